// A minimal client for `switchyard lsp`: starts the server over stdio for TOML files
// (VS Code's own id for them, or the Even Better TOML extension's) and leaves the
// rest to vscode-languageclient. `npm install` here, then run it with F5 from this
// folder or package it with `npx @vscode/vsce package`.
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration('switchyard').get('path') || 'switchyard';
  const server = { command, args: ['lsp'] };
  client = new LanguageClient(
    'switchyard',
    'Switchyard',
    { run: server, debug: server },
    {
      documentSelector: [
        { scheme: 'file', language: 'toml' },
        { scheme: 'file', pattern: '**/*.toml' },
      ],
    },
  );
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

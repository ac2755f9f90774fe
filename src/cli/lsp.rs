//! `switchyard lsp`: a language server over standard input and output. It reads the
//! protocol's messages (rust-analyzer's `lsp-server` does the framing, on its own
//! threads), keeps the open documents, and hands every question to the library's
//! [`switchyard::lsp::Analysis`], which answers from the same load -> check as
//! `validate`. Edits that arrive together are checked once: the queue is drained
//! before diagnostics are published.

use super::exit;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use switchyard::lsp::Analysis;
use switchyard::lsp::lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument, Exit,
    Notification as _, PublishDiagnostics,
};
use switchyard::lsp::lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, GotoDefinition, HoverRequest,
    PrepareRenameRequest, References, Rename, Request as _,
};
use switchyard::lsp::lsp_types::{
    self as lsp, CodeActionKind, CodeActionOptions, CodeActionOrCommand,
    CodeActionProviderCapability, CompletionOptions, HoverProviderCapability, OneOf,
    PublishDiagnosticsParams, RenameOptions, ServerCapabilities, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Url,
};

#[derive(clap::Args)]
pub(crate) struct LspArgs {
    /// Talk over standard input and output: the only transport, and the default;
    /// accepted because some editors pass it.
    #[arg(long)]
    stdio: bool,
}

pub(crate) fn lsp(args: LspArgs) -> anyhow::Result<u8> {
    let LspArgs { stdio: _ } = args;
    let (connection, io_threads) = Connection::stdio();
    let clean = serve(&connection)?;
    // The writer thread ends when the last sender is gone.
    drop(connection);
    io_threads.join()?;
    // The protocol: `exit` after `shutdown` is 0, without it 1.
    Ok(if clean { exit::OK } else { exit::FAILED })
}

/// What the server offers: full-text sync, and one handler per feature below.
fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::FULL),
                save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                ..Default::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec!["\"".into(), "|".into(), "{".into()]),
            ..Default::default()
        }),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Answers one client until it says `exit` or goes away; whether it said `shutdown`
/// first.
fn serve(connection: &Connection) -> anyhow::Result<bool> {
    let (id, _params) = connection.initialize_start()?;
    connection.initialize_finish(
        id,
        serde_json::json!({
            "capabilities": capabilities(),
            "serverInfo": { "name": "switchyard", "version": env!("CARGO_PKG_VERSION") },
        }),
    )?;
    let mut server = Server::default();
    while let Ok(first) = connection.receiver.recv() {
        let mut next = Some(first);
        while let Some(msg) = next {
            match server.handle(connection, msg) {
                Flow::Go => {}
                Flow::Exit => return Ok(true),
                Flow::Abrupt => return Ok(false),
            }
            next = connection.receiver.try_recv().ok();
        }
        server.publish(connection);
    }
    Ok(false)
}

#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    /// `exit` after `shutdown`.
    Exit,
    /// `exit` without `shutdown`, or the client gone.
    Abrupt,
}

/// An open graph document.
struct Doc {
    text: String,
    version: Option<i32>,
    /// The analysis of `text`; none when an edit came after it.
    analysis: Option<Analysis>,
    /// Other files this document's diagnostics were last published for, to clear
    /// them when they are gone.
    foreign: Vec<Url>,
}

#[derive(Default)]
struct Server {
    docs: HashMap<Url, Doc>,
    /// Documents edited since their diagnostics were published.
    dirty: BTreeSet<Url>,
    /// Diagnostics to publish with the next batch (a closed document's, cleared).
    outbox: Vec<PublishDiagnosticsParams>,
}

/// A request that could not be answered, as the response's error.
struct Failure {
    code: ErrorCode,
    message: String,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl Server {
    fn handle(&mut self, connection: &Connection, msg: Message) -> Flow {
        match msg {
            Message::Request(req) => {
                // `shutdown` is answered, then `exit` awaited, by lsp-server; a
                // client that goes away meanwhile ends the server all the same.
                match connection.handle_shutdown(&req) {
                    Ok(true) => return Flow::Exit,
                    // Shut down, and the client gone before its `exit`.
                    Err(_) => return Flow::Exit,
                    Ok(false) => {}
                }
                let response = self.request(&req);
                send(connection, response.into());
            }
            Message::Notification(n) if n.method == Exit::METHOD => return Flow::Abrupt,
            Message::Notification(n) => self.notification(n),
            Message::Response(_) => {}
        }
        Flow::Go
    }

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidOpenTextDocumentParams>(n.params)
                    // A client that sends every file it opens: only TOML is a graph
                    // (a prompt checked as TOML would bury its own diagnostics).
                    && (p.text_document.language_id == "toml"
                        || p.text_document.uri.path().ends_with(".toml"))
                {
                    let doc = p.text_document;
                    let old = self.docs.remove(&doc.uri);
                    self.docs.insert(
                        doc.uri.clone(),
                        Doc {
                            text: doc.text,
                            version: Some(doc.version),
                            analysis: None,
                            foreign: old.map(|d| d.foreign).unwrap_or_default(),
                        },
                    );
                    self.dirty.insert(doc.uri);
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidChangeTextDocumentParams>(n.params)
                    && let Some(doc) = self.docs.get_mut(&p.text_document.uri)
                    // Full sync: the last change is the whole text.
                    && let Some(change) = p.content_changes.into_iter().next_back()
                {
                    doc.text = change.text;
                    doc.version = Some(p.text_document.version);
                    doc.analysis = None;
                    self.dirty.insert(p.text_document.uri);
                }
            }
            DidSaveTextDocument::METHOD => {
                // A saved file may be a prompt or schema another graph reads: every
                // open graph is checked again.
                for (uri, doc) in &mut self.docs {
                    doc.analysis = None;
                    self.dirty.insert(uri.clone());
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidCloseTextDocumentParams>(n.params) {
                    let uri = p.text_document.uri;
                    self.dirty.remove(&uri);
                    if let Some(doc) = self.docs.remove(&uri) {
                        let mut out = std::mem::take(&mut self.outbox);
                        out.push(publish_params(uri, Vec::new(), None));
                        self.clear(doc.foreign, &mut out);
                        self.outbox = out;
                    }
                }
            }
            _ => {}
        }
    }

    /// Publishes the diagnostics of every document edited since the last time.
    fn publish(&mut self, connection: &Connection) {
        for params in std::mem::take(&mut self.outbox) {
            send(
                connection,
                Notification::new(PublishDiagnostics::METHOD.into(), params).into(),
            );
        }
        for uri in std::mem::take(&mut self.dirty) {
            let Some(doc) = self.docs.get_mut(&uri) else {
                continue;
            };
            let version = doc.version;
            let lists = match analyze(&uri, doc) {
                Some(a) => catch_unwind(AssertUnwindSafe(|| a.diagnostics()))
                    .unwrap_or_else(|_| internal_error(&uri)),
                None => internal_error(&uri),
            };
            let now: Vec<Url> = lists
                .iter()
                .map(|(u, _)| u.clone())
                .filter(|u| *u != uri)
                .collect();
            let gone: Vec<Url> = doc
                .foreign
                .iter()
                .filter(|u| !now.contains(u))
                .cloned()
                .collect();
            doc.foreign = now;
            let mut out = Vec::new();
            for (target, diagnostics) in lists {
                let version = if target == uri { version } else { None };
                out.push(publish_params(target, diagnostics, version));
            }
            self.clear(gone, &mut out);
            for params in out {
                send(
                    connection,
                    Notification::new(PublishDiagnostics::METHOD.into(), params).into(),
                );
            }
        }
    }

    /// Empty diagnostics for other files a document had published for; those another
    /// open document still publishes for are left alone.
    fn clear(&self, foreign: Vec<Url>, out: &mut Vec<PublishDiagnosticsParams>) {
        for f in foreign {
            if !self.docs.values().any(|d| d.foreign.contains(&f)) {
                out.push(publish_params(f, Vec::new(), None));
            }
        }
    }

    fn request(&mut self, req: &Request) -> Response {
        let id: RequestId = req.id.clone();
        match catch_unwind(AssertUnwindSafe(|| self.answer(req))) {
            Ok(Ok(value)) => Response::new_ok(id, value),
            Ok(Err(f)) => Response::new_err(id, f.code as i32, f.message),
            Err(_) => Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                format!(
                    "switchyard failed answering `{}` (a bug: please report it)",
                    req.method
                ),
            ),
        }
    }

    fn answer(&mut self, req: &Request) -> Result<serde_json::Value, Failure> {
        Ok(match req.method.as_str() {
            HoverRequest::METHOD => {
                let p: lsp::HoverParams = params(req)?;
                let at = p.text_document_position_params;
                json(
                    &self
                        .doc(&at.text_document.uri)
                        .and_then(|a| a.hover(at.position)),
                )
            }
            GotoDefinition::METHOD => {
                let p: lsp::GotoDefinitionParams = params(req)?;
                let at = p.text_document_position_params;
                let found = self
                    .doc(&at.text_document.uri)
                    .and_then(|a| a.definition(at.position));
                json(&found.map(lsp::GotoDefinitionResponse::Scalar))
            }
            References::METHOD => {
                let p: lsp::ReferenceParams = params(req)?;
                let at = p.text_document_position;
                let include = p.context.include_declaration;
                json(
                    &self
                        .doc(&at.text_document.uri)
                        .map(|a| a.references(at.position, include)),
                )
            }
            Completion::METHOD => {
                let p: lsp::CompletionParams = params(req)?;
                let at = p.text_document_position;
                let items = self
                    .doc(&at.text_document.uri)
                    .map(|a| a.completion(at.position));
                json(&items.map(lsp::CompletionResponse::Array))
            }
            DocumentSymbolRequest::METHOD => {
                let p: lsp::DocumentSymbolParams = params(req)?;
                let symbols = self.doc(&p.text_document.uri).map(|a| a.symbols());
                json(&symbols.map(lsp::DocumentSymbolResponse::Nested))
            }
            PrepareRenameRequest::METHOD => {
                let p: lsp::TextDocumentPositionParams = params(req)?;
                let range = self
                    .doc(&p.text_document.uri)
                    .and_then(|a| a.prepare_rename(p.position));
                json(&range.map(lsp::PrepareRenameResponse::Range))
            }
            Rename::METHOD => {
                let p: lsp::RenameParams = params(req)?;
                let at = p.text_document_position;
                let Some(a) = self.doc(&at.text_document.uri) else {
                    return Ok(serde_json::Value::Null);
                };
                let edit = a
                    .rename(at.position, &p.new_name)
                    .map_err(|e| Failure::new(ErrorCode::RequestFailed, e.to_string()))?;
                json(&edit)
            }
            CodeActionRequest::METHOD => {
                let p: lsp::CodeActionParams = params(req)?;
                let actions = self.doc(&p.text_document.uri).map(|a| {
                    a.code_actions(p.range)
                        .into_iter()
                        .map(CodeActionOrCommand::CodeAction)
                        .collect::<Vec<_>>()
                });
                json(&actions)
            }
            other => {
                return Err(Failure::new(
                    ErrorCode::MethodNotFound,
                    format!("switchyard does not answer `{other}`"),
                ));
            }
        })
    }

    /// The open document's analysis, made now if an edit came since the last.
    fn doc(&mut self, uri: &Url) -> Option<&Analysis> {
        analyze(uri, self.docs.get_mut(uri)?)
    }
}

fn analyze<'d>(uri: &Url, doc: &'d mut Doc) -> Option<&'d Analysis> {
    if doc.analysis.is_none() {
        let made = catch_unwind(AssertUnwindSafe(|| Analysis::new(uri.clone(), &doc.text)));
        doc.analysis = made.ok();
    }
    doc.analysis.as_ref()
}

/// What is published when the check itself failed: one diagnostic saying so, rather
/// than a server that stops answering.
fn internal_error(uri: &Url) -> Vec<(Url, Vec<lsp::Diagnostic>)> {
    vec![(
        uri.clone(),
        vec![lsp::Diagnostic {
            severity: Some(lsp::DiagnosticSeverity::ERROR),
            source: Some("switchyard".into()),
            message: "switchyard failed checking this file (a bug: please report it with the file)"
                .into(),
            ..Default::default()
        }],
    )]
}

fn publish_params(
    uri: Url,
    diagnostics: Vec<lsp::Diagnostic>,
    version: Option<i32>,
) -> PublishDiagnosticsParams {
    PublishDiagnosticsParams {
        uri,
        diagnostics,
        version,
    }
}

fn params<T: serde::de::DeserializeOwned>(req: &Request) -> Result<T, Failure> {
    serde_json::from_value(req.params.clone())
        .map_err(|e| Failure::new(ErrorCode::InvalidParams, format!("`{}`: {e}", req.method)))
}

/// A client that went away cannot be told anything: sending is best effort, and the
/// receiving loop ends the server.
fn send(connection: &Connection, msg: Message) {
    let _ = connection.sender.send(msg);
}

fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests;

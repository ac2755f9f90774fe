//! `switchyard lsp` as editors run it: over its real standard input and output, and
//! driven by Neovim's own LSP client (`tests/lsp/nvim_test.lua`, headless), which opens
//! a graph with an error, waits for its diagnostics and jumps to a definition.

use crate::util::root;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const GRAPH: &str = r#"[graph]
name = "demo"
entry = "plan"

[state.count]
type = "int"
reducer = "add"

[nodes.plan]
kind = "set"
set = { count = "1" }
next = "check"

[nodes.check]
kind = "set"
set = { count = "count + 1" }
next = "dnoe"

[nodes.done]
kind = "finalize"
outcome = "done"
"#;

fn frame(msg: &Value) -> Vec<u8> {
    let body = msg.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

fn read_message(out: &mut impl BufRead) -> Value {
    let mut len = 0;
    loop {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length:") {
            len = n.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    out.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// `switchyard lsp` as an editor starts it: the process, its input and its output.
fn start() -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdin, stdout)
}

#[test]
fn the_server_speaks_over_stdio_and_exits_cleanly() {
    let (mut child, mut stdin, mut stdout) = start();
    let uri = "file:///nowhere/demo.toml";
    for msg in [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "capabilities": {} } }),
        json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": {
            "uri": uri, "languageId": "toml", "version": 1, "text": GRAPH } } }),
    ] {
        stdin.write_all(&frame(&msg)).unwrap();
    }
    let init = read_message(&mut stdout);
    assert_eq!(init["result"]["serverInfo"]["name"], "switchyard");
    let published = read_message(&mut stdout);
    assert_eq!(published["method"], "textDocument/publishDiagnostics");
    assert_eq!(
        published["params"]["diagnostics"][0]["code"],
        "unknown-node"
    );
    stdin
        .write_all(&frame(
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "shutdown" }),
        ))
        .unwrap();
    assert_eq!(read_message(&mut stdout)["id"], 2);
    stdin
        .write_all(&frame(&json!({ "jsonrpc": "2.0", "method": "exit" })))
        .unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `exit` without `shutdown` first ends the server with 1, as the protocol asks.
#[test]
fn an_exit_without_shutdown_exits_with_one() {
    let (mut child, mut stdin, mut stdout) = start();
    stdin
        .write_all(&frame(&json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "capabilities": {} } })))
        .unwrap();
    assert_eq!(read_message(&mut stdout)["id"], 1);
    for msg in [
        json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
        json!({ "jsonrpc": "2.0", "method": "exit" }),
    ] {
        stdin.write_all(&frame(&msg)).unwrap();
    }
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(1));
}

#[test]
fn neovim_gets_the_diagnostics_and_jumps_to_a_definition() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("demo.toml");
    std::fs::write(&graph, GRAPH).unwrap();
    let out = dir.path().join("result.json");
    let script = root().join("tests/lsp/nvim_test.lua");
    let run = Command::new("nvim")
        .args(["--headless", "--clean", "-u", "NONE", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("SWITCHYARD_BIN", env!("CARGO_BIN_EXE_switchyard"))
        .env("SWITCHYARD_GRAPH", &graph)
        // `next = "check"`, on the `c` of `check` (0-based, as LSP counts).
        .env("SWITCHYARD_DEF_LINE", "11")
        .env("SWITCHYARD_DEF_CHAR", "9")
        .env("SWITCHYARD_OUT", &out)
        .env("XDG_STATE_HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run nvim ({e}): install Neovim 0.7 or later (`apt-get install neovim`; .ci/setup does)")
        });
    let text = std::fs::read_to_string(&out).unwrap_or_else(|e| {
        panic!(
            "nvim wrote no result ({e}); it said:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
    });
    let result: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["ok"], true, "{result:#}");
    let uri = format!("file://{}", graph.display());
    assert_eq!(
        result["diagnostics"],
        json!([
            {
                "lnum": 16, "col": 7, "end_lnum": 16, "end_col": 13, "severity": 1,
                "code": "unknown-node",
                "message": "unknown node `dnoe`\nno node has this name\nhelp: did you mean `done`?",
            },
            {
                "lnum": 18, "col": 7, "end_lnum": 18, "end_col": 11, "severity": 1,
                "code": "unreachable",
                "message": "node `done` is unreachable\nno path from the entry `plan` leads here\nhelp: route to it from another node, or remove it",
            },
        ]),
        "{result:#}"
    );
    assert_eq!(
        result["definition"],
        json!({ "uri": uri, "range": {
            "start": { "line": 13, "character": 7 }, "end": { "line": 13, "character": 12 } } })
    );
    assert_eq!(result["hover"], "(node) `check`: `set`");
}

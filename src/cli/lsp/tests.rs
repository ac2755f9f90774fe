//! The server end to end over an in-memory connection: JSON-RPC in, JSON-RPC out.

use super::*;
use serde_json::{Value, json};

/// A client talking to a server on a thread of its own.
struct Client {
    conn: Connection,
    server: Option<std::thread::JoinHandle<anyhow::Result<bool>>>,
    next_id: i32,
}

impl Client {
    fn start() -> Client {
        let (server, conn) = Connection::memory();
        let server = std::thread::spawn(move || serve(&server));
        let mut c = Client {
            conn,
            server: Some(server),
            next_id: 0,
        };
        let init = c.request("initialize", json!({ "capabilities": {} }));
        assert_eq!(init["serverInfo"]["name"], "switchyard");
        assert_eq!(init["capabilities"]["textDocumentSync"]["change"], 1);
        c.notify("initialized", json!({}));
        c
    }

    fn notify(&self, method: &str, params: Value) {
        let n = Notification::new(method.into(), params);
        self.conn.sender.send(n.into()).unwrap();
    }

    /// The answer to a request; any diagnostics published meanwhile are a failure (a
    /// request changes nothing).
    #[track_caller]
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        let req = Request::new(id.clone(), method.into(), params);
        self.conn.sender.send(req.into()).unwrap();
        loop {
            match self.recv() {
                Message::Notification(n) => panic!("published while answering: {n:?}"),
                Message::Response(r) if r.id == id => {
                    if let Some(e) = r.error {
                        return json!({ "error": e.message, "code": e.code });
                    }
                    return r.result.unwrap_or(Value::Null);
                }
                _ => continue,
            }
        }
    }

    #[track_caller]
    fn recv(&self) -> Message {
        self.conn
            .receiver
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the server answers")
    }

    /// The next diagnostics published for `uri`.
    #[track_caller]
    fn diagnostics(&self, uri: &str) -> Value {
        loop {
            if let Message::Notification(n) = self.recv()
                && n.method == "textDocument/publishDiagnostics"
                && n.params["uri"] == uri
            {
                return n.params;
            }
        }
    }

    fn shutdown(mut self) {
        assert_eq!(self.request("shutdown", Value::Null), Value::Null);
        self.notify("exit", Value::Null);
        // `exit` after `shutdown`: a clean end.
        assert!(self.server.take().unwrap().join().unwrap().unwrap());
    }
}

const GRAPH: &str = "[graph]\nname = \"g\"\nentry = \"start\"\n\n[state.n]\ntype = \"int\"\n\n[nodes.start]\nkind = \"set\"\nset = { n = \"n + 1\" }\nnext = \"fnish\"\n\n[nodes.finish]\nkind = \"finalize\"\noutcome = \"done\"\n";
const URI: &str = "file:///nowhere/g.toml";

fn open(c: &Client, text: &str, version: i32) {
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": URI, "languageId": "toml", "version": version, "text": text } }),
    );
}

#[test]
fn diagnostics_hover_definition_and_a_quick_fix_over_json_rpc() {
    let mut c = Client::start();
    open(&c, GRAPH, 1);
    let published = c.diagnostics(URI);
    assert_eq!(published["version"], 1);
    let first = &published["diagnostics"][0];
    assert_eq!(first["code"], "unknown-node");
    assert_eq!(first["severity"], 1);
    assert_eq!(first["source"], "switchyard");
    assert_eq!(
        first["range"],
        json!({ "start": { "line": 10, "character": 7 }, "end": { "line": 10, "character": 14 } })
    );

    let at = |line: u32, character: u32| json!({ "textDocument": { "uri": URI }, "position": { "line": line, "character": character } });
    let hover = c.request("textDocument/hover", at(4, 8));
    assert_eq!(
        hover["contents"]["value"],
        "(state field) `n`: `int`, reducer `replace`"
    );
    let def = c.request("textDocument/definition", at(9, 13));
    assert_eq!(def["uri"], URI);
    assert_eq!(def["range"]["start"], json!({ "line": 4, "character": 7 }));

    let actions = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": URI },
            "range": { "start": { "line": 10, "character": 9 }, "end": { "line": 10, "character": 9 } },
            "context": { "diagnostics": [] },
        }),
    );
    assert_eq!(actions[0]["title"], "Replace `fnish` with `finish`");
    assert_eq!(actions[0]["edit"]["changes"][URI][0]["newText"], "finish");

    let refused = c.request(
        "textDocument/rename",
        json!({ "textDocument": { "uri": URI }, "position": { "line": 4, "character": 7 }, "newName": "not a name" }),
    );
    assert_eq!(refused["code"], ErrorCode::RequestFailed as i32);
    let unknown = c.request("workspace/symbol", json!({ "query": "" }));
    assert_eq!(unknown["code"], ErrorCode::MethodNotFound as i32);
    let garbled = c.request("textDocument/hover", json!({ "nonsense": true }));
    assert_eq!(garbled["code"], ErrorCode::InvalidParams as i32);
    c.shutdown();
}

#[test]
fn a_burst_of_edits_is_checked_once_and_the_last_text_wins() {
    let mut c = Client::start();
    open(&c, GRAPH, 1);
    let _ = c.diagnostics(URI);
    for version in 2..=4 {
        let text = if version == 4 {
            GRAPH.replace("fnish", "finish")
        } else {
            "[graph\n".to_string()
        };
        c.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": URI, "version": version }, "contentChanges": [{ "text": text }] }),
        );
    }
    // Whatever was published in between, the version 4 text ends with no problems.
    let mut last = c.diagnostics(URI);
    while last["version"] != 4 {
        last = c.diagnostics(URI);
    }
    assert_eq!(last["diagnostics"], json!([]));
    let symbols = c.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": URI } }),
    );
    assert_eq!(symbols.as_array().unwrap().len(), 3);
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": URI } }),
    );
    assert_eq!(c.diagnostics(URI)["diagnostics"], json!([]));
    // A closed document is not known: no answer, and no error.
    let hover = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": URI }, "position": { "line": 0, "character": 0 } }),
    );
    assert_eq!(hover, Value::Null);
    c.shutdown();
}

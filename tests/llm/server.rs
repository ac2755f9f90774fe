//! A scripted OpenAI chat-completions server on 127.0.0.1 for the llm tests: real
//! TCP, real HTTP/1.1, answers taken from a script in order, every request kept with
//! the time it arrived.

use serde_json::{Value as Json, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer.
pub(crate) enum Answer {
    /// A status, extra headers and a JSON (or any) body.
    Body {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// A server-sent event stream: each string is one `data:` payload, then `[DONE]`.
    Stream(Vec<String>),
    /// Waits, then answers.
    Slow(Duration, Box<Answer>),
    /// Answers once the test lets it (`notify_one`; a permit given early is kept).
    Held(Arc<tokio::sync::Notify>, Box<Answer>),
    /// The status with a body that quotes every request header, as some proxies do.
    EchoHeaders(u16),
    /// Bytes that are not an HTTP response, then the connection closes.
    Raw(&'static str),
    /// A model's reply, sent the way the request asks: a server-sent event stream when
    /// it has `"stream": true`, else one JSON body.
    Reply(Reply),
    /// A reply streamed with this pause between its events, as a slow model writes.
    Drip(Duration, Reply),
    /// Events with this pause between them.
    PacedStream(Duration, Vec<String>),
    /// An `/embeddings` answer: for each text of the request's `input`, the vector
    /// `[a's, b's, c's, length]`, as the embedding function of the LangGraph
    /// comparison did, so the scores can be worked out by hand.
    Embeddings,
}

/// What a model answers: text, one tool call, or both. Its usage is derived from the
/// request and the reply (a token per 4 bytes), so a replayed run counts the same.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reply {
    pub(crate) content: Option<String>,
    /// The tools called, each its name and its arguments as JSON text, in order.
    pub(crate) tool_calls: Vec<(String, String)>,
}

impl Reply {
    fn answer(&self, request: &Json) -> Answer {
        let tokens_in = request["messages"].to_string().len() as u64 / 4;
        let written = self.content.as_deref().unwrap_or("").len()
            + self
                .tool_calls
                .iter()
                .map(|(n, a)| n.len() + a.len())
                .sum::<usize>();
        let tokens_out = written as u64 / 4 + 1;
        let usage = json!({ "prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out });
        let finish = if self.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        // Call `i` (from 0) is `call_<i + 1>`.
        let call = |i: usize, name: &str, arguments: &str| json!({ "index": i, "id": format!("call_{}", i + 1), "type": "function", "function": { "name": name, "arguments": arguments } });
        if request["stream"] != json!(true) {
            let mut message = json!({ "role": "assistant", "content": self.content });
            if !self.tool_calls.is_empty() {
                message["tool_calls"] = self
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, (n, a))| call(i, n, a))
                    .collect();
            }
            return Answer::Body {
                status: 200,
                headers: Vec::new(),
                body: json!({
                    "id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": request["model"],
                    "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
                    "usage": usage,
                })
                .to_string(),
            };
        }
        let chunk = |delta: Json, finish: Option<&str>| {
            json!({
                "id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": request["model"],
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
            })
            .to_string()
        };
        let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
        // Text in pieces of a few words, as a model streams it.
        let text = self.content.as_deref().unwrap_or("");
        let mut piece = String::new();
        for (i, word) in text.split_inclusive(' ').enumerate() {
            piece.push_str(word);
            if i % 4 == 3 {
                events.push(chunk(
                    json!({ "content": std::mem::take(&mut piece) }),
                    None,
                ));
            }
        }
        if !piece.is_empty() {
            events.push(chunk(json!({ "content": piece }), None));
        }
        for (i, (name, arguments)) in self.tool_calls.iter().enumerate() {
            // Each call's name first, then its arguments in two fragments.
            let half = arguments
                .char_indices()
                .nth(arguments.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            events.push(chunk(
                json!({ "tool_calls": [call(i, name, &arguments[..half])] }),
                None,
            ));
            let rest = json!([{ "index": i, "function": { "arguments": &arguments[half..] } }]);
            events.push(chunk(json!({ "tool_calls": rest }), None));
        }
        events.push(chunk(json!({}), Some(finish)));
        events.push(
            json!({ "id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": request["model"], "choices": [], "usage": usage })
                .to_string(),
        );
        Answer::Stream(events)
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) at: Instant,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Json,
    /// The body's bytes (a protobuf body is not JSON).
    pub(crate) raw: Vec<u8>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(crate) async fn start(script: Vec<Answer>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    tokio::spawn(serve(socket, seen.clone(), script.clone()));
                }
            })
        };
        Server { url, seen, task }
    }

    /// The base URL, `http://127.0.0.1:<port>/v1`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves one connection: requests one after the other (keep-alive) until it closes.
async fn serve(
    mut socket: TcpStream,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some((path, headers, body)) = read_request(&mut socket, &mut buffer).await else {
            return;
        };
        let parsed = serde_json::from_slice(&body).unwrap_or(Json::Null);
        seen.lock().unwrap().push(Seen {
            at: Instant::now(),
            path,
            headers: headers.clone(),
            body: parsed.clone(),
            raw: body.clone(),
        });
        let answer = match script.lock().unwrap().pop_front() {
            Some(Answer::Reply(r)) => r.answer(&parsed),
            // A reply that waits is sent the way the request asks, too.
            Some(Answer::Slow(wait, a)) => match *a {
                Answer::Reply(r) => Answer::Slow(wait, Box::new(r.answer(&parsed))),
                a => Answer::Slow(wait, Box::new(a)),
            },
            Some(Answer::Drip(pause, r)) => match r.answer(&parsed) {
                Answer::Stream(events) => Answer::PacedStream(pause, events),
                whole => whole,
            },
            Some(Answer::Embeddings) => {
                let data: Vec<Json> = parsed["input"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, t)| {
                        let t = t.as_str().unwrap_or_default();
                        let n = |c: char| t.chars().filter(|x| *x == c).count() as f64;
                        json!({"object": "embedding", "index": i,
                               "embedding": [n('a'), n('b'), n('c'), t.chars().count() as f64]})
                    })
                    .collect();
                Answer::Body {
                    status: 200,
                    headers: Vec::new(),
                    body: json!({"object": "list", "model": parsed["model"], "data": data,
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                    .to_string(),
                }
            }
            Some(Answer::Held(gate, a)) => match *a {
                Answer::Reply(r) => Answer::Held(gate, Box::new(r.answer(&parsed))),
                a => Answer::Held(gate, Box::new(a)),
            },
            Some(a) => a,
            None => Answer::Body {
                status: 500,
                headers: Vec::new(),
                body: r#"{"error":{"message":"the test script has no more answers"}}"#.into(),
            },
        };
        if !answer_with(&mut socket, answer, &headers).await {
            return;
        }
    }
}

/// Reads one request; none when the connection closed or the request is malformed.
async fn read_request(
    socket: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> Option<(String, Vec<(String, String)>, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    Some((path, headers, body))
}

/// Writes an answer; false when the connection is done (closed, or a stream ended).
async fn answer_with(
    socket: &mut TcpStream,
    answer: Answer,
    request_headers: &[(String, String)],
) -> bool {
    match answer {
        Answer::Slow(wait, answer) => {
            tokio::time::sleep(wait).await;
            Box::pin(answer_with(socket, *answer, request_headers)).await
        }
        Answer::Held(gate, answer) => {
            gate.notified().await;
            Box::pin(answer_with(socket, *answer, request_headers)).await
        }
        Answer::Body {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                reason(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await.is_ok()
                && socket.write_all(body.as_bytes()).await.is_ok()
        }
        Answer::EchoHeaders(status) => {
            let quoted: Vec<String> = request_headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let body = json!({ "error": { "message": format!("rejected request with headers {}", quoted.join("; ")) } }).to_string();
            Box::pin(answer_with(
                socket,
                Answer::Body {
                    status,
                    headers: Vec::new(),
                    body,
                },
                request_headers,
            ))
            .await
        }
        Answer::Raw(bytes) => {
            let _ = socket.write_all(bytes.as_bytes()).await;
            let _ = socket.shutdown().await;
            false
        }
        // Only inside `Slow`: without the request, a whole body.
        Answer::Reply(r) | Answer::Drip(_, r) => {
            Box::pin(answer_with(socket, r.answer(&Json::Null), request_headers)).await
        }
        Answer::Stream(events) => {
            // Separate writes, so the client sees separate deltas.
            Box::pin(answer_with(
                socket,
                Answer::PacedStream(Duration::from_millis(5), events),
                request_headers,
            ))
            .await
        }
        Answer::PacedStream(pause, events) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for data in events.iter().map(String::as_str).chain(["[DONE]"]) {
                let event = format!("data: {data}\n\n");
                if socket.write_all(event.as_bytes()).await.is_err() {
                    return false;
                }
                let _ = socket.flush().await;
                tokio::time::sleep(pause).await;
            }
            let _ = socket.shutdown().await;
            false
        }
        // Turned into its body when the request was read (`serve`).
        Answer::Embeddings => false,
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A chat completion whose message is `content`, with the given usage.
pub(crate) fn completion(content: &str, tokens_in: u64, tokens_out: u64) -> Answer {
    Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": content },
                "finish_reason": "stop"
            }],
            "usage": { "prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out }
        })
        .to_string(),
    }
}

/// A chat completion that calls one tool.
pub(crate) fn tool_call(name: &str, arguments: &str) -> Answer {
    Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: json!({
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": "call_a",
                        "type": "function",
                        "function": { "name": name, "arguments": arguments }
                    }]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38 }
        })
        .to_string(),
    }
}

/// An error status with OpenAI's error body and extra headers.
pub(crate) fn failure(status: u16, message: &str, headers: &[(&str, &str)]) -> Answer {
    Answer::Body {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: json!({ "error": { "message": message } }).to_string(),
    }
}

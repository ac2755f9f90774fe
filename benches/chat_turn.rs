//! A chat turn through `switchyard serve`, as a chat front end makes it
//! (`cargo bench --bench chat_turn`): `POST /threads/{id}/runs/stream` with the
//! person's message and the stream modes `useStream` asks for (`messages-tuple`,
//! `values`), the model's reply streamed as text (`tests/fixtures/llm_chat/talk.toml`,
//! an `llm_chat` node). The model is a scripted OpenAI-compatible server in this
//! process that answers at once (a 60-word reply in 15 deltas), so what is measured is
//! the server's own cost:
//!
//! 1. time to first token: from sending the request to the first `messages` event with
//!    text, p50 and p99, one client, turn after turn (20 conversations of 25 turns, the
//!    conversation growing);
//! 2. the whole turn's time, same client;
//! 3. the server's CPU per turn (user + system time of its process, from /proc), with
//!    one client and with 8 at once (turns per second too).
//!
//! The release binary serves in a child process (memory store, access log drained);
//! client and model server share this process's 2-thread runtime and the machine's 2
//! cores.

#[path = "shared/serve.rs"]
mod serve;

use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench());
}

/// The model's reply as the chat API streams it: the SSE body.
fn reply_body() -> String {
    let words: Vec<String> = (0..60).map(|i| format!("word{i} ")).collect();
    let chunk = |delta: Json, finish: Option<&str>| {
        format!(
            "data: {}\n\n",
            json!({ "id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
        )
    };
    let mut body = chunk(json!({ "role": "assistant", "content": "" }), None);
    for piece in words.chunks(4) {
        body.push_str(&chunk(json!({ "content": piece.concat() }), None));
    }
    body.push_str(&chunk(json!({}), Some("stop")));
    body.push_str(&format!(
        "data: {}\n\n",
        json!({ "id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "scripted", "choices": [],
            "usage": { "prompt_tokens": 50, "completion_tokens": 60, "total_tokens": 110 } })
    ));
    body.push_str("data: [DONE]\n\n");
    body
}

/// A chat-completions server on 127.0.0.1 that streams [`reply_body`] to every request.
async fn model_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{}",
        reply_body()
    );
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                // The request: its head, then content-length bytes.
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buffer.len() >= end + 4 + length {
                        break;
                    }
                }
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

/// The server's user + system CPU time so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // /proc counts in USER_HZ, 100 a second on every Linux.
    Duration::from_millis(ticks * 10)
}

async fn new_thread(c: &reqwest::Client, base: &str, id: &str) {
    let r = c
        .post(format!("{base}/threads"))
        .body(json!({ "thread_id": id }).to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

/// One turn: the time to the first text and to the end.
async fn turn(c: &reqwest::Client, base: &str, thread: &str, text: &str) -> (Duration, Duration) {
    let body = json!({
        "assistant_id": "talk",
        "input": { "messages": [{ "type": "human", "content": text }] },
        "stream_mode": ["messages-tuple", "values"],
    });
    let t = Instant::now();
    let mut r = c
        .post(format!("{base}/threads/{thread}/runs/stream"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let mut first = None;
    let mut pending = String::new();
    while let Some(bytes) = r.chunk().await.unwrap() {
        if first.is_some() {
            continue;
        }
        pending.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let data = event.lines().find_map(|l| l.strip_prefix("data: "));
            if event.starts_with("event: messages")
                && let Some(data) = data
                && serde_json::from_str::<Json>(data).unwrap()[0]["content"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty())
            {
                first = Some(t.elapsed());
            }
        }
    }
    let whole = t.elapsed();
    (first.expect("the reply streamed as text"), whole)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

async fn bench() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let model = model_server().await;
    let (base, child) = serve::start_with(
        ["tests/fixtures/llm_chat/talk.toml", "--store", "memory"],
        &[("OPENAI_BASE_URL", &model), ("OPENAI_API_KEY", "bench")],
    )
    .await;
    let pid = child.id().unwrap();
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    // Warm up.
    new_thread(&c, &base, "warm").await;
    for i in 0..50 {
        turn(&c, &base, "warm", &format!("Warming up {i}")).await;
    }

    // One client, turn after turn.
    let (conversations, turns) = (20, 25);
    let mut firsts = Vec::new();
    let mut wholes = Vec::new();
    let before = cpu(pid);
    let started = Instant::now();
    for n in 0..conversations {
        let thread = format!("one{n}");
        new_thread(&c, &base, &thread).await;
        for i in 0..turns {
            let (first, whole) = turn(&c, &base, &thread, &format!("Question {i}?")).await;
            firsts.push(first);
            wholes.push(whole);
        }
    }
    let elapsed = started.elapsed();
    let spent = cpu(pid) - before;
    let count = (conversations * turns) as u32;
    firsts.sort();
    wholes.sort();
    println!(
        "one client, {count} turns: time to first token p50 {}, p99 {}; whole turn p50 {}, p99 {}",
        us(percentile(&firsts, 0.5)),
        us(percentile(&firsts, 0.99)),
        us(percentile(&wholes, 0.5)),
        us(percentile(&wholes, 0.99)),
    );
    println!(
        "one client: server CPU per turn {} ({:.0} turns/s)",
        us(spent / count),
        count as f64 / elapsed.as_secs_f64()
    );

    // Eight clients at once, each its own conversations.
    let clients = 8;
    let per_client = 100;
    let before = cpu(pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..clients {
        let (c, base) = (c.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                let thread = format!("many{k}-{}", i / 25);
                if i % 25 == 0 {
                    new_thread(&c, &base, &thread).await;
                }
                turn(&c, &base, &thread, &format!("Question {i}?")).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    let spent = cpu(pid) - before;
    let count = (clients * per_client) as u32;
    println!(
        "8 clients, {count} turns: {:.0} turns/s, server CPU per turn {}",
        count as f64 / elapsed.as_secs_f64(),
        us(spent / count)
    );
    drop(child);
}

//! A `switchyard serve` child process for a test, an HTTP client for it, and a scrubber
//! that makes its answers stable (ids, times) so tests compare them exactly.

use crate::util::root;
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

/// A server child process, killed when dropped.
pub(crate) struct Serve {
    pub(crate) url: String,
    child: tokio::process::Child,
    /// Every line it wrote to stderr so far.
    pub(crate) log: Arc<Mutex<Vec<String>>>,
    pub(crate) dir: tempfile::TempDir,
}

/// How to start one.
#[must_use]
pub(crate) struct Start {
    args: Vec<String>,
    env: Vec<(String, String)>,
    store: Option<String>,
    dir: tempfile::TempDir,
}

/// `switchyard serve <paths>` on a free loopback port, with a SQLite store in a
/// temporary directory.
pub(crate) fn serve(paths: &[&str]) -> Start {
    Start {
        args: paths.iter().map(|p| p.to_string()).collect(),
        env: Vec::new(),
        store: None,
        dir: tempfile::tempdir().expect("temp dir"),
    }
}

impl Start {
    pub(crate) fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    pub(crate) fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    pub(crate) fn store(mut self, store: &str) -> Self {
        self.store = Some(store.to_string());
        self
    }

    /// The temporary directory the server's store lives in.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) async fn start(self) -> Serve {
        let store = self
            .store
            .clone()
            .unwrap_or_else(|| format!("sqlite:{}", self.dir.path().join("store.db").display()));
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
        cmd.arg("serve")
            .args(&self.args)
            .args(["--listen", "127.0.0.1:0", "--store", &store])
            .current_dir(root())
            .env_remove("OPENAI_API_KEY")
            // Nothing listens there: a request that is not scripted cannot be answered.
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("switchyard serve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let lines = log.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(url) = line.strip_prefix("switchyard serve: listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let url = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("switchyard serve did not start: {:?}", log.lock().unwrap()))
            .unwrap_or_else(|_| panic!("switchyard serve exited: {:?}", log.lock().unwrap()));
        Serve {
            url,
            child,
            log,
            dir: self.dir,
        }
    }
}

impl Serve {
    pub(crate) fn http(&self) -> Http {
        Http {
            base: self.url.clone(),
            key: None,
            client: client(),
        }
    }

    /// The stderr lines that are JSON, parsed.
    pub(crate) fn log_json(&self) -> Vec<Json> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends SIGTERM and waits for the exit code; the lines it wrote, and its
    /// directory (its store), which outlives it.
    pub(crate) async fn terminate(mut self) -> (i32, Vec<String>, tempfile::TempDir) {
        let pid = self.pid();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits after SIGTERM")
            .expect("wait");
        // The reader task may still hold the last lines; give it a moment.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let log = self.log.lock().unwrap().clone();
        (status.code().unwrap_or(-1), log, self.dir)
    }
}

impl Serve {
    /// Sends SIGKILL and waits for the process to go; its directory (its store).
    pub(crate) async fn kill(mut self) -> tempfile::TempDir {
        self.child.start_kill().expect("kill");
        let _ = self.child.wait().await;
        self.dir
    }
}

/// reqwest is built with rustls and no crypto provider (the library picks ring); plain
/// HTTP needs none, but reqwest wants one installed all the same.
/// The statuses of a list of runs (`GET /threads/{id}/runs`), in its order.
pub(crate) fn statuses(runs: &Json) -> Vec<&str> {
    runs.as_array()
        .expect("a list of runs")
        .iter()
        .map(|r| r["status"].as_str().expect("a status"))
        .collect()
}

pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// An HTTP client for one server.
#[derive(Clone)]
pub(crate) struct Http {
    base: String,
    key: Option<String>,
    client: reqwest::Client,
}

/// A response, read whole.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) text: String,
}

impl Resp {
    #[track_caller]
    pub(crate) fn json(&self) -> Json {
        serde_json::from_str(self.text.trim_start())
            .unwrap_or_else(|e| panic!("not JSON ({e}), status {}: {}", self.status, self.text))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The server-sent events of the body: `(event, data, id)`.
    #[track_caller]
    pub(crate) fn events(&self) -> Vec<(String, Json, Option<String>)> {
        parse_sse(&self.text)
    }
}

pub(crate) fn parse_sse(text: &str) -> Vec<(String, Json, Option<String>)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut event, mut data, mut id) = (None, None, None);
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                event = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(
                    serde_json::from_str(v)
                        .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {v}")),
                );
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            }
        }
        if let Some(event) = event {
            out.push((event, data.unwrap_or(Json::Null), id));
        }
    }
    out
}

impl Http {
    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let req = match &self.key {
            Some(k) => req.header("x-api-key", k),
            None => req,
        };
        let r = tokio::time::timeout(Duration::from_secs(60), req.send())
            .await
            .expect("the server answers in time")
            .expect("the request goes through");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = tokio::time::timeout(Duration::from_secs(60), r.text())
            .await
            .expect("the body ends in time")
            .expect("a body");
        Resp {
            status,
            headers,
            text,
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Resp {
        self.send(self.client.get(self.url(path))).await
    }

    pub(crate) async fn delete(&self, path: &str) -> Resp {
        self.send(self.client.delete(self.url(path))).await
    }

    pub(crate) async fn post(&self, path: &str, body: Json) -> Resp {
        self.send(
            self.client
                .post(self.url(path))
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
        .await
    }

    pub(crate) async fn put(&self, path: &str, body: Json) -> Resp {
        self.send(self.client.put(self.url(path)).body(body.to_string()))
            .await
    }

    /// A DELETE with a JSON body, as the store API takes one.
    pub(crate) async fn delete_with(&self, path: &str, body: Json) -> Resp {
        self.send(self.client.delete(self.url(path)).body(body.to_string()))
            .await
    }

    pub(crate) async fn patch(&self, path: &str, body: Json) -> Resp {
        self.send(self.client.patch(self.url(path)).body(body.to_string()))
            .await
    }

    /// A POST with a raw body, as a broken client sends it.
    pub(crate) async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Resp {
        self.send(self.client.post(self.url(path)).body(body)).await
    }

    pub(crate) async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        let mut req = self.client.get(self.url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    /// Polls `path` until `done` holds on its JSON (at most 30 s).
    pub(crate) async fn until(&self, path: &str, done: impl Fn(&Json) -> bool) -> Json {
        for _ in 0..600 {
            let r = self.get(path).await;
            if r.status == 200 && done(&r.json()) {
                return r.json();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("`{path}` never got there: {}", self.get(path).await.text);
    }
}

/// Makes a response comparable: UUIDv7 ids become `[id1]`, `[id2]`... in order of
/// first appearance (so equal ids stay equal), ISO times become `[time]`, durations
/// and hashes their placeholders. Checkpoint ids (`00000000-0000-7000-8000-...`) are
/// deterministic and stay.
#[derive(Default)]
pub(crate) struct Scrub {
    ids: HashMap<String, String>,
}

impl Scrub {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn json(&mut self, v: &Json) -> Json {
        match v {
            Json::String(s) => Json::String(self.text(s)),
            Json::Array(items) => Json::Array(items.iter().map(|i| self.json(i)).collect()),
            Json::Object(o) => Json::Object(
                o.iter()
                    .map(|(k, v)| {
                        let v = match k.as_str() {
                            "duration_us" | "duration_ms" | "latency_ms" => json!(0),
                            "hash" | "graph_hash" if v.is_string() => json!("[hash]"),
                            "remote" if v.is_string() => json!("[remote]"),
                            _ => self.json(v),
                        };
                        (self.text(k), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    pub(crate) fn text(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let b = s.as_bytes();
        let mut i = 0;
        while i < s.len() {
            if let Some(t) = s.get(i..i + 24).filter(|t| is_time(t)) {
                let _ = t;
                out.push_str("[time]");
                i += 24;
                continue;
            }
            if let Some(id) = s.get(i..i + 36).filter(|t| is_uuid(t))
                && !id.starts_with("00000000-0000-7000-8000-")
            {
                let n = self.ids.len() + 1;
                let name = self
                    .ids
                    .entry(id.to_string())
                    .or_insert_with(|| format!("[id{n}]"))
                    .clone();
                out.push_str(&name);
                i += 36;
                continue;
            }
            let ch = s[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
            let _ = b;
        }
        out
    }
}

fn is_uuid(t: &str) -> bool {
    t.len() == 36
        && t.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

/// `2026-11-23T20:01:44.297Z`
fn is_time(t: &str) -> bool {
    let b = t.as_bytes();
    t.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19 | 23) || c.is_ascii_digit())
}

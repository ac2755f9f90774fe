//! A tiny HTTP/1.1 server on 127.0.0.1 for the seeds' web apps: static files from a
//! fixture folder, plus the routes an app handles itself (forms, pages built from its
//! state). One thread per connection, `Connection: close` on every answer; every request
//! is logged for the tests to check what the browser did.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A request as the app sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// The path with its query, as sent (`/search.html?q=mug`).
    pub(crate) target: String,
    pub(crate) body: String,
}

impl Request {
    /// The path without its query.
    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// A field of an `application/x-www-form-urlencoded` body.
    pub(crate) fn form(&self, name: &str) -> Option<String> {
        self.body.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| v.replace('+', " "))
        })
    }
}

pub(crate) enum Response {
    Html(u16, String),
    /// 303 See Other to a path.
    Redirect(String),
}

type Handler = dyn Fn(&Request) -> Option<Response> + Send + Sync;

/// A web app served on 127.0.0.1 until dropped.
pub(crate) struct WebApp {
    port: u16,
    log: Arc<Mutex<Vec<Request>>>,
    done: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl WebApp {
    /// Serves `tests/fixtures/seeds/<dir>` and whatever `routes` answers first.
    pub(crate) fn start(
        dir: &str,
        routes: impl Fn(&Request) -> Option<Response> + Send + Sync + 'static,
    ) -> WebApp {
        let files = crate::util::root().join("tests/fixtures/seeds").join(dir);
        assert!(files.is_dir(), "no web app at {}", files.display());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let routes: Arc<Handler> = Arc::new(routes);
        let accept = {
            let (log, done) = (log.clone(), done.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (log, routes, files) = (log.clone(), routes.clone(), files.clone());
                    std::thread::spawn(move || serve(stream, &log, &*routes, &files));
                }
            })
        };
        WebApp {
            port,
            log,
            done,
            accept: Some(accept),
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>/`
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Every request so far except the favicon's, as `METHOD target`.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect()
    }
}

impl Drop for WebApp {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `done`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Request>>, routes: &Handler, files: &Path) {
    let Some(request) = read_request(&stream) else {
        return;
    };
    if request.path() != "/favicon.ico" {
        log.lock().unwrap().push(request.clone());
    }
    let response = routes(&request).unwrap_or_else(|| static_file(&request, files));
    let (status, headers, body) = match response {
        Response::Html(status, body) => (
            status,
            "content-type: text/html; charset=utf-8\r\n".to_string(),
            body,
        ),
        Response::Redirect(to) => (303, format!("location: {to}\r\n"), String::new()),
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\n{headers}content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
        if status < 400 { "OK" } else { "Error" },
        body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn static_file(request: &Request, files: &Path) -> Response {
    let path = match request.path() {
        "/" => "/index.html",
        p => p,
    };
    if request.method != "GET" || path.contains("..") {
        return Response::Html(404, not_found());
    }
    match std::fs::read_to_string(files.join(path.trim_start_matches('/'))) {
        Ok(body) if path.ends_with(".html") => Response::Html(200, body),
        // The browser asks for a favicon; an empty page answers it without a console
        // error in the snapshot.
        _ if path == "/favicon.ico" => Response::Html(200, String::new()),
        _ => Response::Html(404, not_found()),
    }
}

fn not_found() -> String {
    "<!doctype html><title>Not found</title><h1>Not found</h1>".into()
}

//! Where the authorization server sends the browser back: a listener on a loopback port
//! of this machine (RFC 8252's native-app redirect), made before the client is
//! registered, since the redirect URI is part of the registration.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The most of a request's head that is read: a redirect's request line is short.
const MAX_HEAD: usize = 16 * 1024;

/// How long a connection to the port may take to send its request.
const READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) struct Callback {
    listener: TcpListener,
    redirect: String,
}

impl Callback {
    pub(super) async fn bind() -> Result<Callback, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("no loopback port for the sign-in's redirect: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("no loopback port for the sign-in's redirect: {e}"))?
            .port();
        Ok(Callback {
            listener,
            redirect: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// The redirect URI: `http://127.0.0.1:PORT/callback`.
    pub(super) fn redirect(&self) -> &str {
        &self.redirect
    }

    /// Waits for the browser to come back with `state`, answers it, and gives the URL
    /// it came to (with the code, or the error the authorization server sent). Other
    /// requests (a browser's favicon, another `state`: not this sign-in's) are answered
    /// 404 and waited past.
    pub(super) async fn wait(&self, server: &str, state: &str) -> Result<String, String> {
        loop {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| format!("the sign-in's redirect listener failed: {e}"))?;
            let mut head = Vec::new();
            let mut buf = [0u8; 2048];
            // A connection that sends nothing (a browser's preconnect) is given up on
            // rather than holding the one the person's browser comes back on.
            let reading = async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
            };
            if tokio::time::timeout(READ_WAIT, reading).await.is_err() {
                continue;
            }
            let line = String::from_utf8_lossy(&head);
            let path = line
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            let ours = path.starts_with("/callback?")
                && reqwest::Url::parse(&format!("http://127.0.0.1{path}"))
                    .is_ok_and(|u| u.query_pairs().any(|(k, v)| k == "state" && v == state));
            if !ours {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let page = format!(
                "<!doctype html><title>Switchyard</title><p>Switchyard has the answer for server <b>{}</b>; you can close this tab.</p>",
                crate::render::xml_escape(server)
            );
            let _ = stream
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{page}",
                        page.len()
                    )
                    .as_bytes(),
                )
                .await;
            let base = self.redirect.trim_end_matches("/callback");
            return Ok(format!("{base}{path}"));
        }
    }
}

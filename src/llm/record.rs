//! [`RecordingClient`]: saves every answered request of a run.

use super::{DeltaSink, Exchange, LlmClient, LlmError, LlmReply, LlmRequest};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Wraps any client and appends each request it answered, with the reply, to a JSON
/// lines file ([`Exchange`]), flushed at once so a crash loses nothing. The key is not
/// in a request, so it is not in a recording.
pub struct RecordingClient {
    inner: Arc<dyn LlmClient>,
    path: PathBuf,
    file: Mutex<File>,
}

impl RecordingClient {
    /// Creates (or truncates) the recording at `path`.
    pub fn create(path: &Path, inner: Arc<dyn LlmClient>) -> std::io::Result<Self> {
        let file = File::create(path)?;
        Ok(RecordingClient {
            inner,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends to the recording at `path`, creating it when missing: a server's runs
    /// add to one recording.
    pub fn append_to(path: &Path, inner: Arc<dyn LlmClient>) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(RecordingClient {
            inner,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    fn append(&self, exchange: &Exchange) -> Result<(), LlmError> {
        let mut line = serde_json::to_string(exchange)
            .map_err(|e| LlmError::Record(format!("{}: {e}", self.path.display())))?;
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| LlmError::Record(format!("{}: {e}", self.path.display())))
    }
}

#[async_trait::async_trait]
impl LlmClient for RecordingClient {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let seen = Mutex::new(Vec::new());
        let tee = |text: &str| {
            seen.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(text.to_string());
            deltas(text);
        };
        let reply = self.inner.complete(request, &tee).await?;
        let seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
        self.append(&Exchange::new(request, reply.clone(), seen))?;
        Ok(reply)
    }

    fn endpoint(&self) -> Option<String> {
        self.inner.endpoint()
    }
}

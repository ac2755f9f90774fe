//! Where a host's runs get their model answers.

use crate::graph::Graph;
use crate::llm::{LlmClient, LlmOptions, RecordingClient, ReplayClient, SetupError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The model of a host's runs: the endpoints the graphs name, optionally recorded, or
/// a recording replayed.
pub enum LlmSource {
    /// Each graph's `[llm]` endpoint; with `record`, every answer is appended there.
    Live {
        record: Option<PathBuf>,
        /// One client per graph version, made on its first run.
        clients: Mutex<HashMap<String, Arc<dyn LlmClient>>>,
    },
    /// Answers from recordings (their text, concatenated). Each run gets a replay of
    /// its own, as each process of the command line does: a resumed run finds the
    /// exchanges after the pause, and two threads asking alike both find theirs.
    Replay { text: String, name: String },
}

impl LlmSource {
    pub fn live(record: Option<PathBuf>) -> Result<Self, SetupError> {
        if let Some(path) = &record {
            // A fresh recording for this server; its runs append to it.
            std::fs::File::create(path).map_err(|source| SetupError::CreateRecording {
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(LlmSource::Live {
            record,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// Replays the recordings at `paths`, read now.
    pub fn replay(paths: &[PathBuf]) -> Result<Self, SetupError> {
        let mut text = String::new();
        for path in paths {
            let part =
                std::fs::read_to_string(path).map_err(|source| SetupError::ReadRecording {
                    path: path.display().to_string(),
                    source,
                })?;
            // Checked now, so a bad line is an error at start, not in the first run.
            ReplayClient::parse(&part).map_err(|(line, message)| SetupError::RecordingLine {
                path: path.display().to_string(),
                line,
                message,
            })?;
            text.push_str(&part);
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        let name = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(LlmSource::Replay { text, name })
    }

    /// The client for one run of `graph`.
    pub(super) fn client(&self, graph: &Graph) -> Result<Arc<dyn LlmClient>, SetupError> {
        match self {
            LlmSource::Replay { text, name } => Ok(Arc::new(ReplayClient::parse(text).map_err(
                |(line, message)| SetupError::RecordingLine {
                    path: name.clone(),
                    line,
                    message,
                },
            )?)),
            LlmSource::Live { record, clients } => {
                if let Some(c) = super::lock(clients).get(&graph.hash) {
                    return Ok(c.clone());
                }
                let inner = crate::llm::llm_client(graph, &LlmOptions::default())?;
                let client: Arc<dyn LlmClient> = match record {
                    Some(path) => {
                        Arc::new(RecordingClient::append_to(path, inner).map_err(|source| {
                            SetupError::CreateRecording {
                                path: path.display().to_string(),
                                source,
                            }
                        })?)
                    }
                    None => inner,
                };
                super::lock(clients).insert(graph.hash.clone(), client.clone());
                Ok(client)
            }
        }
    }
}

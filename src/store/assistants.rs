//! Assistants made through the API: a served graph bound to a configuration, kept in
//! versions ([`Assistants`]) so that a restarted server, or another server on the same
//! store, serves them the same. What a configuration means is the host's
//! (`host/assistants.rs`); a store keeps the versions and which one is current. (The
//! assistant each graph file gives is the file, not a row.)

use super::StoreError;
use async_trait::async_trait;
use serde_json::{Map, Value as Json};

/// One version of an assistant, or an assistant at its current version.
#[derive(Debug, Clone, PartialEq)]
pub struct Assistant {
    pub id: String,
    /// The graph (the served file's `[graph] name`) its runs run.
    pub graph: String,
    /// This version's number, from 1.
    pub version: u32,
    /// Whatever else the host keeps of this version (its name, description, config,
    /// context and metadata): a JSON object the store does not look into.
    pub body: Map<String, Json>,
    /// When the assistant was made; for one of [`Assistants::assistant_versions`],
    /// when that version was.
    pub created_ms: u64,
    /// When its current version last changed (that version's `created_ms` in a list of
    /// versions).
    pub updated_ms: u64,
}

/// The assistants a store keeps.
#[async_trait]
pub trait Assistants: Send + Sync {
    /// Writes `assistant` as its version `assistant.version` and makes that version
    /// current, unless it is not the next one: version 1 of an id the store has, or
    /// another version than one after the highest (another writer added one first, or
    /// the assistant was deleted): whether it was written. An update reads, makes the
    /// next version and tries again until it is written, so that of two updates at
    /// once neither is lost.
    async fn add_assistant_version(&self, assistant: &Assistant) -> Result<bool, StoreError>;
    /// Makes `version` the assistant's current one: whether it has that version.
    async fn set_assistant_version(
        &self,
        id: &str,
        version: u32,
        updated_ms: u64,
    ) -> Result<bool, StoreError>;
    /// The assistant at its current version.
    async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, StoreError>;
    /// Every assistant at its current version, oldest first.
    async fn assistants(&self) -> Result<Vec<Assistant>, StoreError>;
    /// Every version of one, newest first; none for an unknown id.
    async fn assistant_versions(&self, id: &str) -> Result<Vec<Assistant>, StoreError>;
    /// Removes it and all its versions: whether it was there.
    async fn delete_assistant(&self, id: &str) -> Result<bool, StoreError>;
}

/// One assistant in memory: its versions, oldest first, and the current one.
#[derive(Debug, Clone)]
struct Kept {
    versions: Vec<Assistant>,
    current: u32,
    created_ms: u64,
    updated_ms: u64,
}

impl Kept {
    fn at_current(&self) -> Option<Assistant> {
        let v = self.versions.iter().find(|v| v.version == self.current)?;
        Some(Assistant {
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            ..v.clone()
        })
    }
}

/// The assistants of a store in memory (`MemoryStore`'s), in the order they were made.
#[derive(Default)]
pub(super) struct AssistantTable(std::sync::Mutex<indexmap::IndexMap<String, Kept>>);

impl AssistantTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, indexmap::IndexMap<String, Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Assistants for AssistantTable {
    async fn add_assistant_version(&self, assistant: &Assistant) -> Result<bool, StoreError> {
        let mut all = self.lock();
        let version = Assistant {
            updated_ms: assistant.created_ms,
            ..assistant.clone()
        };
        match all.get_mut(&assistant.id) {
            None if assistant.version == 1 => {
                all.insert(
                    assistant.id.clone(),
                    Kept {
                        versions: vec![version],
                        current: 1,
                        created_ms: assistant.created_ms,
                        updated_ms: assistant.created_ms,
                    },
                );
                Ok(true)
            }
            Some(kept)
                if kept.versions.last().map(|v| v.version + 1) == Some(assistant.version) =>
            {
                kept.current = assistant.version;
                kept.updated_ms = assistant.created_ms;
                kept.versions.push(version);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn set_assistant_version(
        &self,
        id: &str,
        version: u32,
        updated_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut all = self.lock();
        match all.get_mut(id) {
            Some(kept) if kept.versions.iter().any(|v| v.version == version) => {
                kept.current = version;
                kept.updated_ms = updated_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, StoreError> {
        Ok(self.lock().get(id).and_then(Kept::at_current))
    }

    async fn assistants(&self) -> Result<Vec<Assistant>, StoreError> {
        Ok(self.lock().values().filter_map(Kept::at_current).collect())
    }

    async fn assistant_versions(&self, id: &str) -> Result<Vec<Assistant>, StoreError> {
        Ok(self
            .lock()
            .get(id)
            .map(|k| k.versions.iter().rev().cloned().collect())
            .unwrap_or_default())
    }

    async fn delete_assistant(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.lock().shift_remove(id).is_some())
    }
}

/// The memory store's assistants are its table's.
#[async_trait]
impl Assistants for super::MemoryStore {
    async fn add_assistant_version(&self, a: &Assistant) -> Result<bool, StoreError> {
        self.assistants.add_assistant_version(a).await
    }

    async fn set_assistant_version(
        &self,
        id: &str,
        version: u32,
        updated_ms: u64,
    ) -> Result<bool, StoreError> {
        self.assistants
            .set_assistant_version(id, version, updated_ms)
            .await
    }

    async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, StoreError> {
        self.assistants.get_assistant(id).await
    }

    async fn assistants(&self) -> Result<Vec<Assistant>, StoreError> {
        self.assistants.assistants().await
    }

    async fn assistant_versions(&self, id: &str) -> Result<Vec<Assistant>, StoreError> {
        self.assistants.assistant_versions(id).await
    }

    async fn delete_assistant(&self, id: &str) -> Result<bool, StoreError> {
        self.assistants.delete_assistant(id).await
    }
}

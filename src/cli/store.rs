use std::path::PathBuf;
use std::sync::Arc;
use switchyard::run::{Checkpointer, MemoryStore, SqliteStore};

/// Where checkpoints go: `sqlite:PATH` or `memory`.
#[derive(Clone, Debug)]
pub(crate) enum StoreArg {
    Sqlite(PathBuf),
    Memory,
}

/// The store used when `--store` is not given: `$SWITCHYARD_STORE`, else this file
/// under the working directory.
pub(crate) const DEFAULT_STORE: &str = "sqlite:.switchyard/checkpoints.db";

impl std::str::FromStr for StoreArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            _ if s == "memory" => Ok(StoreArg::Memory),
            Some(("sqlite", path)) if !path.is_empty() => Ok(StoreArg::Sqlite(path.into())),
            _ => Err(format!("`{s}` is not `sqlite:PATH` or `memory`")),
        }
    }
}

impl StoreArg {
    pub(crate) fn open(&self) -> anyhow::Result<Arc<dyn Checkpointer>> {
        Ok(match self {
            StoreArg::Sqlite(path) => Arc::new(SqliteStore::open(path)?),
            StoreArg::Memory => Arc::new(MemoryStore::new()),
        })
    }

    /// The store, to read only: a store on a read-only file or mount opens read-only.
    pub(crate) fn open_to_read(&self) -> anyhow::Result<Arc<dyn Checkpointer>> {
        match self {
            StoreArg::Sqlite(path) => match SqliteStore::open(path) {
                Ok(s) => Ok(Arc::new(s)),
                Err(switchyard::store::StoreError::ReadOnly { .. }) => {
                    Ok(Arc::new(SqliteStore::open_read_only(path)?))
                }
                Err(e) => Err(e.into()),
            },
            StoreArg::Memory => self.open(),
        }
    }

    /// Where tools' binary results (screenshots) go, by content hash: `blobs/` beside
    /// the SQLite file, or a temporary directory for a memory store.
    pub(crate) fn blob_dir(&self) -> PathBuf {
        match self {
            StoreArg::Sqlite(path) => path
                .parent()
                .map_or_else(|| PathBuf::from("blobs"), |d| d.join("blobs")),
            // This process's own: nothing of a memory run outlives it anyway.
            StoreArg::Memory => {
                std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id()))
            }
        }
    }

    /// The `--store` flag that names this store, for printed commands.
    pub(crate) fn flag(&self) -> String {
        match self {
            StoreArg::Sqlite(p) => format!(
                "--store {}",
                super::run::shell_quote(&format!("sqlite:{}", p.display()))
            ),
            StoreArg::Memory => "--store memory".into(),
        }
    }
}

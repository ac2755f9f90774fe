use std::path::PathBuf;
use std::sync::Arc;
use switchyard::store::{MemoryStore, NoStore, SqliteStore, Store};
use switchyard::store::{PostgresStore, SqliteOptions};

/// Where checkpoints go: `sqlite:PATH`, `postgres://URL`, `memory`, or `none`
/// (nowhere).
#[derive(Clone, Debug)]
pub(crate) enum StoreArg {
    Sqlite(PathBuf, SqliteOptions),
    /// A Postgres database, by URL (`postgres://` or `postgresql://`).
    Postgres(String),
    Memory,
    None,
}

/// The store used when `--store` is not given: `$SWITCHYARD_STORE`, else this file
/// under the working directory.
pub(crate) const DEFAULT_STORE: &str = "sqlite:.switchyard/checkpoints.db";

impl std::str::FromStr for StoreArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            _ if s == "memory" => Ok(StoreArg::Memory),
            _ if s == "none" => Ok(StoreArg::None),
            Some(("sqlite", path)) if !path.is_empty() => {
                Ok(StoreArg::Sqlite(path.into(), SqliteOptions::default()))
            }
            Some(("postgres" | "postgresql", rest)) if rest.starts_with("//") => {
                Ok(StoreArg::Postgres(s.to_string()))
            }
            _ => Err(format!(
                "`{s}` is not `sqlite:PATH`, `postgres://URL` or `memory` (or `none`, to keep nothing)"
            )),
        }
    }
}

impl StoreArg {
    /// The store with `--durability` and `--compress` applied (they only mean
    /// something to SQLite).
    pub(crate) fn with_options(self, options: SqliteOptions) -> Self {
        match self {
            StoreArg::Sqlite(path, _) => StoreArg::Sqlite(path, options),
            other => other,
        }
    }

    pub(crate) fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        Ok(match self {
            StoreArg::Sqlite(path, options) => Arc::new(SqliteStore::open_with(path, *options)?),
            StoreArg::Postgres(url) => Arc::new(PostgresStore::open(url)?),
            StoreArg::Memory => Arc::new(MemoryStore::new()),
            StoreArg::None => Arc::new(NoStore::new()),
        })
    }

    /// The store a server holds: a Postgres store's claims last the server's run lease,
    /// so that a run and its thread are taken over together.
    pub(crate) fn open_serving(
        &self,
        lease: std::time::Duration,
    ) -> anyhow::Result<Arc<dyn Store>> {
        match self {
            StoreArg::Postgres(url) => {
                Ok(Arc::new(PostgresStore::open(url)?.with_claim_lease(lease)))
            }
            _ => self.open(),
        }
    }

    /// The store, to read only: a store on a read-only file or mount opens read-only.
    pub(crate) fn open_to_read(&self) -> anyhow::Result<Arc<dyn Store>> {
        match self {
            StoreArg::Sqlite(path, _) => match self.open() {
                Ok(s) => Ok(s),
                Err(e)
                    if matches!(
                        e.downcast_ref(),
                        Some(switchyard::store::StoreError::ReadOnly { .. })
                    ) =>
                {
                    Ok(Arc::new(SqliteStore::open_read_only(path)?))
                }
                Err(e) => Err(e),
            },
            StoreArg::Postgres(_) | StoreArg::Memory | StoreArg::None => self.open(),
        }
    }

    /// Where tools' binary results (screenshots) go, by content hash: `blobs/` beside
    /// the SQLite file, `.switchyard/blobs/` under the working directory for Postgres
    /// (each machine keeps its own), or a temporary directory for a memory store.
    pub(crate) fn blob_dir(&self) -> PathBuf {
        match self {
            StoreArg::Sqlite(path, _) => path
                .parent()
                .map_or_else(|| PathBuf::from("blobs"), |d| d.join("blobs")),
            StoreArg::Postgres(_) => PathBuf::from(".switchyard/blobs"),
            // This process's own: nothing of a memory run outlives it anyway.
            StoreArg::Memory | StoreArg::None => {
                std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id()))
            }
        }
    }

    /// The `--store` flag that names this store, for printed commands.
    pub(crate) fn flag(&self) -> String {
        match self {
            StoreArg::Sqlite(p, _) => format!(
                "--store {}",
                super::shell_quote(&format!("sqlite:{}", p.display()))
            ),
            // Without its password: the command is printed where others may read it.
            StoreArg::Postgres(url) => {
                format!("--store {}", super::shell_quote(&PostgresStore::shown(url)))
            }
            StoreArg::Memory => "--store memory".into(),
            StoreArg::None => "--store none".into(),
        }
    }
}

//! Checkpoints in one SQLite file. `layout.rs` has the tables and how older files are
//! brought forward, `records.rs` checkpoint and snapshot rows, `catalog.rs` the LLM
//! cache and the server's catalog; this file opens stores, claims threads and waits
//! out other processes.

mod assistants;
mod catalog;
mod claims;
mod crons;
mod items;
mod layout;
mod readers;
mod records;
mod resume;

use super::StoreError;
use super::rows::Written;
use layout::{Layout, RECOUNT, VERSION, bring_forward, has_recount, has_table, layout};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How durable a step's record is once it is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Survives the process being killed at any moment; a power loss or an OS crash
    /// may lose the last records (SQLite's `synchronous = NORMAL` with WAL).
    #[default]
    Normal,
    /// Survives a power loss too: every record waits for the disk (`synchronous =
    /// FULL`).
    Full,
}

impl Durability {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "normal" => Some(Durability::Normal),
            "full" => Some(Durability::Full),
            _ => None,
        }
    }
}

/// How a store file is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqliteOptions {
    pub durability: Durability,
    /// Keeps a record's writes and a snapshot LZ4-compressed when their JSON text is
    /// 1 KiB or more and compression makes it smaller. A store holds compressed and
    /// plain rows alike, so this can change from one open to the next.
    pub compress: bool,
}

impl From<Durability> for SqliteOptions {
    fn from(durability: Durability) -> Self {
        SqliteOptions {
            durability,
            compress: false,
        }
    }
}

/// Checkpoints in one SQLite file: WAL journal, `synchronous = NORMAL` (or `FULL`, see
/// [`Durability`]). A record is durable once `append` returns as far as the process is
/// concerned (a crash or SIGKILL loses nothing).
///
/// Its calls run on tokio's blocking threads (see [`SqliteStore::blocking`]): a
/// statement that waits for the disk or for another process's lock never holds up
/// the runtime's threads.
pub struct SqliteStore {
    shared: Sqlite,
}

/// The connection and the claims.
struct Sqlite {
    /// Connections for reads (a writable store's). Declared before the writer so they
    /// close first: the last connection to close ends the WAL (folds it into the file
    /// and removes `-wal` and `-shm`), which a read-only connection cannot.
    readers: Option<readers::Readers>,
    inner: Mutex<Inner>,
    /// Who runs which thread: locks in `<file>.locks/claims`.
    claims: Arc<claims::Claims>,
}

/// A graph file and its hash.
type GraphKey = (Arc<str>, Arc<str>);

/// The connection and what this process remembers of the file.
struct Inner {
    conn: Connection,
    /// Graph ids, both ways.
    graph_ids: HashMap<GraphKey, i64>,
    graphs: HashMap<i64, GraphKey>,
    /// Per thread and field, the last large value written in full and its record, so
    /// that the same value written again is stored as a reference (`records.rs`).
    written: Written,
    /// See [`SqliteOptions::compress`].
    compress: bool,
    /// The file marks the threads whose records were removed by hand (see
    /// `layout::RECOUNT`): a snapshot is trusted without counting the records before
    /// it. A file opened read-only may predate the marks, and then they are counted.
    marks: bool,
}

impl Inner {
    fn new(conn: Connection, marks: bool) -> Self {
        Inner {
            conn,
            graph_ids: HashMap::new(),
            graphs: HashMap::new(),
            written: Written::default(),
            compress: false,
            marks,
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, and its parent directory. A
    /// file that is not a store of this layout (another program's database, a store of
    /// another version) is refused unchanged; an empty file becomes a store in one
    /// transaction, so a process killed meanwhile leaves an empty file, not half a store.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`SqliteStore::open`] with a durability other than the default.
    pub fn open_with(path: &Path, options: impl Into<SqliteOptions>) -> Result<Self, StoreError> {
        match Self::open_writable(path, options.into()) {
            Err(e) if e.is_read_only() => Err(StoreError::ReadOnly {
                path: path.to_path_buf(),
            }),
            other => other,
        }
    }

    fn open_writable(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        match retry_busy(|| layout_at_once(&conn))? {
            Layout::Current => {}
            l @ Layout::Other { .. } => return Err(refused(path, l)),
            Layout::Empty | Layout::Older(_) | Layout::Unfinished => {
                // Under the write lock, looked at again: a concurrent first open may
                // have made the store meanwhile. All in one transaction: a process
                // killed part-way leaves the file as it was.
                retry_busy(|| {
                    let tx = rusqlite::Transaction::new_unchecked(
                        &conn,
                        rusqlite::TransactionBehavior::Immediate,
                    )?;
                    bring_forward(&tx, &layout(&tx)?)?;
                    tx.commit()
                })?;
                if let l @ Layout::Other { .. } = retry_busy(|| layout_at_once(&conn))? {
                    return Err(refused(path, l));
                }
            }
        }
        if !retry_busy(|| has_recount(&conn))? {
            // Under the write lock, looked at again, as above.
            retry_busy(|| {
                let tx = rusqlite::Transaction::new_unchecked(
                    &conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                if !has_recount(&tx)? {
                    tx.execute_batch(RECOUNT)?;
                }
                tx.commit()
            })?;
        }
        for (table, schema) in [
            ("items", items::ITEMS),
            ("crons", crons::CRONS),
            ("assistants", assistants::ASSISTANTS),
        ] {
            if !retry_busy(|| has_table(&conn, table))? {
                // `IF NOT EXISTS`: another process may have made it meanwhile.
                retry_busy(|| conn.execute_batch(schema))?;
            }
        }
        if !retry_busy(|| layout::has_column(&conn, "items", "vectors"))? {
            // Another process may have added it meanwhile: then this one fails, and
            // the column is there all the same.
            let added = retry_busy(|| conn.execute_batch(items::VECTORS));
            if added.is_err() && !retry_busy(|| layout::has_column(&conn, "items", "vectors"))? {
                added?;
            }
        }
        // Only a store of ours is switched to WAL. The switch takes the database's
        // lock, which many processes opening a new store at once contend for: SQLite
        // answers a loser with "database is locked" rather than waiting.
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL"))?;
        retry_busy(|| {
            conn.pragma_update(
                None,
                "synchronous",
                match options.durability {
                    Durability::Normal => "NORMAL",
                    Durability::Full => "FULL",
                },
            )
        })?;
        let mut inner = Inner::new(conn, true);
        inner.compress = options.compress;
        Ok(SqliteStore::new(Sqlite {
            inner: Mutex::new(inner),
            readers: path.is_file().then(|| readers::Readers::new(path)),
            claims: claims::Claims::new(locks_dir(path)),
        }))
    }

    /// How durable this connection's writes are, as SQLite reports it.
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let level: i64 = self
            .shared
            .conn()
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))?;
        // 1 is NORMAL, 2 FULL, 3 EXTRA: anything from FULL on waits for the disk.
        Ok(if level >= 2 {
            Durability::Full
        } else {
            Durability::Normal
        })
    }

    /// Opens an existing store to read it only (a read-only file or mount): `state`
    /// and `history` work, anything that writes fails.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!("`{}` does not exist", path.display())),
            )));
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let uri = |extra: &str| format!("file:{}?mode=ro{extra}", path.display());
        // A WAL store needs its shared-memory file; on a read-only mount that cannot be
        // made, the file is read as it is (`immutable`).
        let conn = Connection::open_with_flags(uri(""), flags)
            .and_then(|c| layout_at_once(&c).map(|_| c))
            .or_else(|_| Connection::open_with_flags(uri("&immutable=1"), flags))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        match layout_at_once(&conn)? {
            Layout::Current => {}
            // Bringing it forward would write.
            Layout::Older(found) => {
                return Err(StoreError::Version {
                    path: path.to_path_buf(),
                    found,
                    expected: VERSION,
                });
            }
            Layout::Empty | Layout::Unfinished => {
                return Err(StoreError::Foreign {
                    path: path.to_path_buf(),
                    tables: Vec::new(),
                });
            }
            l @ Layout::Other { .. } => return Err(refused(path, l)),
        }
        let marks = has_recount(&conn)?;
        Ok(SqliteStore::new(Sqlite {
            inner: Mutex::new(Inner::new(conn, marks)),
            readers: None,
            claims: claims::Claims::new(locks_dir(path)),
        }))
    }

    fn new(shared: Sqlite) -> Self {
        SqliteStore { shared }
    }

    /// Runs `f`, a call that may wait (for the disk, or for another process's lock),
    /// without holding up the runtime: on a multi-thread runtime (a server) the thread
    /// stops being one of its workers while `f` runs (`block_in_place`: the others,
    /// and a new one in its place, serve every other task meanwhile); on a runtime of
    /// one thread (a command's single run), or outside one, `f` runs where it is
    /// called, as nothing else is waiting for that thread but the run itself. Handing
    /// each call to another thread instead (`spawn_blocking`, a writer thread) cost
    /// ~100 us a step here in thread wake-ups, five times the step itself.
    async fn blocking<T>(
        &self,
        f: impl FnOnce(&Sqlite) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| f(&self.shared)),
            _ => f(&self.shared),
        }
    }
}

impl Sqlite {
    /// What `f` reads on a reading connection beside the writer, or on the writer when
    /// there is none.
    fn read<T>(&self, f: impl Fn(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        if let Some(read) = self.readers.as_ref().and_then(|r| r.read(&f)) {
            return read;
        }
        f(&self.conn().conn)
    }

    /// A thread's records (see [`records::select`]), read on a reader when there is one.
    fn records(
        &self,
        thread: &str,
        from: u64,
        last_only: bool,
    ) -> Result<Vec<crate::store::Checkpoint>, StoreError> {
        if let Some(readers) = &self.readers
            && let Some(read) = readers.read(|conn| {
                records::select(conn, thread, from, last_only, &mut |id| {
                    readers.graph(conn, thread, id)
                })
            })
        {
            return read;
        }
        self.conn().select(thread, from, last_only)
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Every transaction begins and ends under one hold of the lock, so one still
        // open here was left by a panic or a failed COMMIT: ended, or every later write
        // of this store would go into it (and be lost) or wait on it.
        if !inner.conn.is_autocommit() {
            inner.roll_back();
        }
        inner
    }
}

/// Why a file is not opened: not ours, or ours of a layout this version does not read.
fn refused(path: &Path, layout: Layout) -> StoreError {
    match layout {
        Layout::Other { version, tables }
            if version != 0 && tables.iter().any(|t| t == "checkpoints") =>
        {
            StoreError::Version {
                path: path.to_path_buf(),
                found: version,
                expected: VERSION,
            }
        }
        Layout::Other { tables, .. } => StoreError::Foreign {
            path: path.to_path_buf(),
            tables,
        },
        _ => StoreError::Foreign {
            path: path.to_path_buf(),
            tables: Vec::new(),
        },
    }
}

fn locks_dir(path: &Path) -> PathBuf {
    let mut locks = path.as_os_str().to_owned();
    locks.push(".locks");
    PathBuf::from(locks)
}

/// How long one statement waits for another process's write lock.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a write keeps trying, with backoff, while other processes hold the store:
/// contention alone does not fail a step.
const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` again, with a growing pause, while it fails because another process holds
/// the store, for up to [`BUSY_PATIENCE`].
fn retry_busy<T>(mut f: impl FnMut() -> Result<T, rusqlite::Error>) -> Result<T, rusqlite::Error> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match f() {
            Err(e) if is_busy(&e) && start.elapsed() < BUSY_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// [`retry_busy`] for store operations.
fn patiently<T>(mut f: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match f() {
            Err(StoreError::Sqlite(e)) if is_busy(&e) && start.elapsed() < BUSY_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// The layout as one moment of the file shows it: the version and the tables read in
/// one transaction. Read apart, another process's first open could commit between
/// the two (version 0, then its tables with rows in them), and the store would look
/// like another program's.
fn layout_at_once(conn: &Connection) -> Result<Layout, rusqlite::Error> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Deferred)?;
    let found = layout(&tx)?;
    tx.commit()?;
    Ok(found)
}

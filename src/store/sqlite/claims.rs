//! Who runs a thread of a SQLite store: a claim is a byte-range lock on one lock file
//! kept open beside the database (`<file>.locks/claims`), a range per thread.
//!
//! Open-file-description locks (`F_OFD_SETLK`), not a file per thread: a claim is one
//! `fcntl` on a file that stays open, where creating, locking, stamping and removing a
//! file per claim cost a resume ~30 us. The kernel still releases a lock when its holder
//! exits however it exits (SIGKILL, a crash), and it works across PID namespaces; no
//! file is left per thread. The holder's pid is the lock's length, so a process that is
//! refused names the owner without anything being written: the kernel reports an OFD
//! lock's length but not its owner's pid.
//!
//! OFD locks of one open file description do not conflict with each other, so claims
//! through the same store are told apart by the set of slots it holds (as the Postgres
//! store's advisory locks are); two stores in one process open the file apart and
//! exclude each other through the kernel.

use super::super::{Claim, StoreError};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Each thread's range starts at its slot times this: wider than any pid (Linux's
/// `PID_MAX_LIMIT` is 2^22), so ranges of different threads never touch.
const SLOT_BITS: u32 = 23;

pub(super) struct Claims {
    /// `<file>.locks/`.
    dir: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// The slots this store holds.
    held: HashSet<u64>,
    /// The lock file, opened at the first claim (a store only read never makes it),
    /// with its device and inode then.
    file: Option<(Arc<File>, u64, u64)>,
}

impl Claims {
    pub(super) fn new(dir: PathBuf) -> Arc<Self> {
        Arc::new(Claims {
            dir,
            state: Mutex::new(State {
                held: HashSet::new(),
                file: None,
            }),
        })
    }

    /// The lock file. It must still be the file at its path: one removed or replaced
    /// under an open store would have it lock a file no other process sees.
    fn file(&self, state: &mut State) -> Result<Arc<File>, StoreError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir.join("claims");
        if let Some((file, dev, ino)) = &state.file
            && std::fs::metadata(&path).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino)
        {
            return Ok(file.clone());
        }
        // A directory or mount that cannot be written is the store's: said as such
        // (the store may have opened, a crashed writer's -wal and -shm letting it),
        // rather than as a lock that failed.
        let read_only = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            )
        };
        // `<file>.locks` without its extension.
        let store_file = || self.dir.with_extension("");
        let failed = |source: std::io::Error| {
            if read_only(&source) {
                StoreError::ReadOnly { path: store_file() }
            } else {
                StoreError::Lock {
                    path: path.clone(),
                    source,
                }
            }
        };
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
        };
        // The directory is made when a claim first finds it missing.
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir).map_err(|source| {
                    if read_only(&source) {
                        StoreError::ReadOnly { path: store_file() }
                    } else {
                        StoreError::Create {
                            path: self.dir.clone(),
                            source,
                        }
                    }
                })?;
                open()
            }
            other => other,
        }
        .map_err(failed)?;
        let meta = file.metadata().map_err(failed)?;
        let file = Arc::new(file);
        state.file = Some((file.clone(), meta.dev(), meta.ino()));
        Ok(file)
    }

    /// Claims `thread` for this process, or says which process holds it.
    pub(super) fn claim(self: &Arc<Self>, thread: &str) -> Result<Claim, StoreError> {
        let digest = Sha256::digest(thread.as_bytes());
        let slot = u64::from_be_bytes([
            0, 0, 0, digest[0], digest[1], digest[2], digest[3], digest[4],
        ]);
        let refused = |pid| {
            Err(StoreError::Claimed {
                thread: thread.to_string(),
                pid,
            })
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.held.contains(&slot) {
            return refused(std::process::id());
        }
        let file = self.file(&mut state)?;
        let start = (slot << SLOT_BITS) as i64;
        let mine = lock(libc::F_WRLCK, start, i64::from(std::process::id()) + 1);
        // A holder that lets go between the attempt and the question is tried again;
        // a bounded number of times, as the lock of this store's claims is held.
        for _ in 0..100 {
            match fcntl(&*file, FcntlArg::F_OFD_SETLK(&mine)) {
                Ok(_) => {
                    state.held.insert(slot);
                    return Ok(Claim::holding(Holding {
                        claims: self.clone(),
                        slot,
                        file,
                    }));
                }
                Err(Errno::EAGAIN | Errno::EACCES) => {
                    let mut theirs = mine;
                    fcntl(&*file, FcntlArg::F_OFD_GETLK(&mut theirs)).map_err(|e| self.error(e))?;
                    if i32::from(theirs.l_type) == libc::F_UNLCK {
                        continue;
                    }
                    // A classic POSIX lock names its process; a claim's OFD lock
                    // (reported as pid -1) carries it in its length.
                    let pid = if theirs.l_pid > 0 {
                        theirs.l_pid as u32
                    } else if theirs.l_start == start {
                        u32::try_from(theirs.l_len - 1).unwrap_or(0)
                    } else {
                        0
                    };
                    return refused(pid);
                }
                Err(e) => return Err(self.error(e)),
            }
        }
        Err(self.error(Errno::EAGAIN))
    }

    fn error(&self, e: Errno) -> StoreError {
        StoreError::Lock {
            path: self.dir.join("claims"),
            source: e.into(),
        }
    }
}

fn lock(kind: i32, start: i64, len: i64) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start,
        l_len: len,
        l_pid: 0,
    }
}

/// A claim held: its range unlocked when it ends, on the file it was locked on (a
/// lock call that never waits, so it is made where the claim ends).
struct Holding {
    claims: Arc<Claims>,
    slot: u64,
    file: Arc<File>,
}

impl super::super::Held for Holding {}

impl Drop for Holding {
    fn drop(&mut self) {
        // Unlocked before the slot leaves the set, under its lock: a claim of the same
        // thread through this store in between would otherwise have its lock undone.
        let mut state = self.claims.state.lock().unwrap_or_else(|e| e.into_inner());
        let whole = lock(
            libc::F_UNLCK,
            (self.slot << SLOT_BITS) as i64,
            1 << SLOT_BITS,
        );
        let _ = fcntl(&*self.file, FcntlArg::F_OFD_SETLK(&whole));
        state.held.remove(&self.slot);
    }
}

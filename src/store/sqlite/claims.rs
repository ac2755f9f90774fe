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
use std::sync::{Arc, Mutex, OnceLock};

/// Each thread's range starts at its slot times this: wider than any pid (Linux's
/// `PID_MAX_LIMIT` is 2^22), so ranges of different threads never touch.
const SLOT_BITS: u32 = 23;

pub(super) struct Claims {
    /// `<file>.locks/`.
    dir: PathBuf,
    /// The lock file, opened at the first claim (a store only read never makes it).
    file: OnceLock<File>,
    /// The slots this store holds.
    held: Mutex<HashSet<u64>>,
}

impl Claims {
    pub(super) fn new(dir: PathBuf) -> Arc<Self> {
        Arc::new(Claims {
            dir,
            file: OnceLock::new(),
            held: Mutex::new(HashSet::new()),
        })
    }

    fn file(&self) -> Result<&File, StoreError> {
        if let Some(file) = self.file.get() {
            return Ok(file);
        }
        let path = self.dir.join("claims");
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
                std::fs::create_dir_all(&self.dir).map_err(|source| StoreError::Create {
                    path: self.dir.clone(),
                    source,
                })?;
                open()
            }
            other => other,
        }
        .map_err(|source| StoreError::Lock {
            path: path.clone(),
            source,
        })?;
        Ok(self.file.get_or_init(|| file))
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
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains(&slot) {
            return refused(std::process::id());
        }
        let file = self.file()?;
        let start = (slot << SLOT_BITS) as i64;
        let mine = lock(libc::F_WRLCK, start, i64::from(std::process::id()) + 1);
        loop {
            match fcntl(file, FcntlArg::F_OFD_SETLK(&mine)) {
                Ok(_) => {
                    held.insert(slot);
                    return Ok(Claim::holding(Held {
                        claims: self.clone(),
                        slot,
                    }));
                }
                Err(Errno::EAGAIN | Errno::EACCES) => {
                    let mut theirs = lock(libc::F_WRLCK, start, 1);
                    fcntl(file, FcntlArg::F_OFD_GETLK(&mut theirs)).map_err(|e| self.error(e))?;
                    if i32::from(theirs.l_type) == libc::F_UNLCK {
                        // Released in between: try again.
                        continue;
                    }
                    return refused(u32::try_from(theirs.l_len - 1).unwrap_or(0));
                }
                Err(e) => return Err(self.error(e)),
            }
        }
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

/// A claim held: its range unlocked when it ends.
struct Held {
    claims: Arc<Claims>,
    slot: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Unlocked before the slot leaves the set, under its lock: a claim of the same
        // thread through this store in between would otherwise have its lock undone.
        let mut held = self.claims.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = self.claims.file.get() {
            let whole = lock(
                libc::F_UNLCK,
                (self.slot << SLOT_BITS) as i64,
                1 << SLOT_BITS,
            );
            let _ = fcntl(file, FcntlArg::F_OFD_SETLK(&whole));
        }
        held.remove(&self.slot);
    }
}

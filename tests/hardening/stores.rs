//! Stores under contention, half-made, not ours, read-only, with gaps; thread claims.

use super::{DEEP, state_text, store_flag};
use crate::store::record;
use crate::util::{root, switchyard};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use switchyard::store::Checkpoints;
use switchyard::store::SqliteStore;
use switchyard::store::StoreError;

#[tokio::test]
async fn sixty_four_processes_on_one_new_store_all_finish() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    // Started together on a store that does not exist yet: their first opens race too.
    let children: Vec<_> = (0..64)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_switchyard"))
                .args([
                    "run",
                    "tests/fixtures/run/count.toml",
                    "--input",
                    r#"{"goal": 60}"#,
                    "--thread",
                    &format!("t{i}"),
                    "--store",
                    &store_flag(&db),
                ])
                .current_dir(root())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).as_ref()
            ),
            (Some(0), "n=60 total=1830 checks=60 evens=30\n"),
            "process {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = SqliteStore::open(&db).unwrap();
    for i in 0..64 {
        let records = store.load(&format!("t{i}")).await.unwrap();
        assert_eq!(records.last().unwrap().outcome.as_deref(), Some("done"));
    }
}

#[test]
fn a_run_waits_out_a_write_lock_held_longer_than_sqlites_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    drop(SqliteStore::open(&db).unwrap());
    // Another process's long write transaction: 6 s, past the 5 s a statement waits.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "run",
            "tests/fixtures/run/count.toml",
            "--input",
            r#"{"goal": 4}"#,
            "--store",
            &store_flag(&db),
        ])
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(6));
    holder.execute_batch("COMMIT").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), "n=4 total=10 checks=4 evens=2\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_empty_file_or_a_store_whose_creation_was_cut_short_becomes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    // What a process killed while an older version created the store left behind:
    // some of its tables, empty, and no layout version.
    let cut = dir.path().join("cut.db");
    let conn = rusqlite::Connection::open(&cut).unwrap();
    conn.execute_batch(
        "CREATE TABLE checkpoints (thread TEXT); CREATE TABLE llm_cache (key TEXT);",
    )
    .unwrap();
    drop(conn);
    for db in [&empty, &cut] {
        let out = switchyard(&[
            "run",
            "tests/fixtures/run/routes.toml",
            "--input",
            r#"{"n": 1}"#,
            "--store",
            &store_flag(db),
        ])
        .run()
        .code(0);
        assert_eq!(out.stdout, "classify count_down:0\n", "{}", db.display());
    }
}

/// A database of another program: a table with a row, in rollback-journal mode.
fn foreign_db(path: &Path) -> Vec<u8> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    drop(conn);
    std::fs::read(path).unwrap()
}

#[test]
fn another_programs_database_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    let bytes = foreign_db(&db);
    let store = store_flag(&db);
    let refused = format!(
        "error: `{}` is not a Switchyard store (it holds the tables `notes`); it is left as it is: give --store another file\n",
        db.display()
    );
    let out = switchyard(&["run", DEEP, "--input", "{}", "--store", &store])
        .run()
        .code(1);
    assert_eq!(out.stderr, refused);
    let out = switchyard(&["state", "--thread", "t", "--store", &store])
        .run()
        .code(1);
    assert_eq!(out.stderr, refused);
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "the file changed");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.db"], "no WAL, no lock files beside it");

    // A store of a later layout is refused by version, also unchanged.
    let later = dir.path().join("later.db");
    let conn = rusqlite::Connection::open(&later).unwrap();
    conn.execute_batch("CREATE TABLE checkpoints (thread TEXT); PRAGMA user_version = 99;")
        .unwrap();
    drop(conn);
    let bytes = std::fs::read(&later).unwrap();
    match SqliteStore::open(&later) {
        Err(e @ StoreError::Version { .. }) => assert_eq!(
            e.to_string(),
            format!(
                "checkpoint store `{}` has layout version 99, and this Switchyard reads version 6; use another store path",
                later.display()
            )
        ),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&later).unwrap(), bytes);
}

/// `switchyard` as a user who can read `dir` but not write it. Root writes anywhere,
/// so as root it runs without the capabilities that override file permissions.
fn as_reader(dir: &Path, args: &[&str]) -> std::process::Output {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let chmod = |mode: &str| {
        assert!(
            Command::new("chmod")
                .args(["-R", mode])
                .arg(dir)
                .status()
                .unwrap()
                .success()
        );
    };
    chmod("a-w");
    let mut cmd = if is_root {
        let mut c = Command::new("setpriv");
        c.arg("--bounding-set=-dac_override,-dac_read_search,-fowner")
            .arg(env!("CARGO_BIN_EXE_switchyard"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_switchyard"))
    };
    let out = cmd.args(args).current_dir(root()).output().unwrap();
    chmod("u+w");
    out
}

#[tokio::test]
async fn a_read_only_store_can_be_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    let db = ro.join("s.db");
    let store = store_flag(&db);
    switchyard(&[
        "run", DEEP, "--input", "{}", "--thread", "t", "--store", &store,
    ])
    .run()
    .code(4);
    let expected = state_text("t", &store);
    let out = as_reader(&ro, &["state", "--thread", "t", "--store", &store]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), expected.as_str()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = as_reader(&ro, &["history", "--thread", "t", "--store", &store]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Writing is refused with the store's words, not a panic.
    let refused = || {
        let out = as_reader(
            &ro,
            &[
                "resume",
                "--thread",
                "t",
                "--store",
                &store,
                "--payload",
                "1",
            ],
        );
        assert_eq!(
            (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
            (
                Some(1),
                format!("error: checkpoint store `{}` cannot be written (a read-only file, directory or mount); `state` and `history` can read it\n", db.display()).as_str()
            )
        );
    };
    refused();
    // The same with the -wal and -shm a crashed writer leaves beside the file (they let
    // the store open; the claim is where it cannot write).
    std::fs::write(ro.join("s.db-wal"), "").unwrap();
    std::fs::write(ro.join("s.db-shm"), "").unwrap();
    refused();
    std::fs::remove_file(ro.join("s.db-wal")).unwrap();
    std::fs::remove_file(ro.join("s.db-shm")).unwrap();
    // A read-only connection never writes, even when the file is writable.
    let reader = SqliteStore::open_read_only(&db).unwrap();
    assert_eq!(reader.load("t").await.unwrap().len(), 3);
    assert!(
        reader
            .append(record("other", 0, "n", json!(1)))
            .await
            .is_err()
    );
}

#[test]
fn a_gap_in_a_threads_records_is_reported_not_resumed_past() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = store_flag(&db);
    switchyard(&[
        "run",
        "tests/fixtures/run/count.toml",
        "--input",
        r#"{"goal": 3}"#,
        "--thread",
        "g",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let gone = conn
        .execute(
            "DELETE FROM checkpoints WHERE thread = 'g' AND seq IN (1, 2)",
            [],
        )
        .unwrap();
    assert_eq!(gone, 2);
    drop(conn);
    let corrupt =
        "error: checkpoint store: a record of thread `g` is corrupt: records 1 to 2 are missing\n";
    for command in ["state", "history"] {
        let out = switchyard(&[command, "--thread", "g", "--store", &store])
            .run()
            .code(1);
        assert_eq!(out.stderr, corrupt, "{command}");
    }
    let out = switchyard(&["resume", "--thread", "g", "--store", &store, "--at", "4"])
        .run()
        .code(1);
    assert_eq!(out.stderr, corrupt);
}

#[tokio::test]
async fn the_loser_of_a_thread_claim_names_the_real_owner() {
    use nix::fcntl::{FcntlArg, fcntl};
    use nix::libc;
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    // Another process holds thread `c`: its lock on the thread's range, as long as its
    // pid and one, in the store's lock file.
    let locks = dir.path().join("s.db.locks");
    std::fs::create_dir_all(&locks).unwrap();
    let owner = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(locks.join("claims"))
        .unwrap();
    let d = Sha256::digest(b"c");
    let slot = u64::from_be_bytes([0, 0, 0, d[0], d[1], d[2], d[3], d[4]]);
    let range = |kind: i32| libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: (slot << 23) as i64,
        l_len: 4243,
        l_pid: 0,
    };
    fcntl(&owner, FcntlArg::F_OFD_SETLK(&range(libc::F_WRLCK))).unwrap();
    match store.claim("c").await {
        Err(StoreError::Claimed { thread, pid }) => assert_eq!((thread.as_str(), pid), ("c", 4242)),
        other => panic!("{other:?}"),
    }
    // Other threads are free meanwhile.
    drop(store.claim("d").await.unwrap());
    fcntl(&owner, FcntlArg::F_OFD_SETLK(&range(libc::F_UNLCK))).unwrap();
    store.claim("c").await.unwrap();
}

/// A classic POSIX lock on a thread's range (another program's) is named by its pid.
#[tokio::test]
async fn a_classic_lock_on_a_claims_range_names_its_process() {
    use nix::fcntl::{FcntlArg, fcntl};
    use nix::libc;
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    drop(store.claim("warm").await.unwrap());
    let other = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("s.db.locks/claims"))
        .unwrap();
    let d = Sha256::digest(b"c");
    let slot = u64::from_be_bytes([0, 0, 0, d[0], d[1], d[2], d[3], d[4]]);
    // Inside the range, not at its start.
    let classic = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: (slot << 23) as i64 + 7,
        l_len: 1,
        l_pid: 0,
    };
    fcntl(&other, FcntlArg::F_SETLK(&classic)).unwrap();
    match store.claim("c").await {
        Err(StoreError::Claimed { pid, .. }) => assert_eq!(pid, std::process::id()),
        other => panic!("{other:?}"),
    }
}

/// A lock file removed under an open store is made again, not locked where no other
/// process looks: two stores still exclude each other.
#[tokio::test]
async fn a_removed_claims_file_is_made_again_and_still_excludes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let a = SqliteStore::open(&db).unwrap();
    let b = SqliteStore::open(&db).unwrap();
    drop(a.claim("warm").await.unwrap());
    std::fs::remove_file(dir.path().join("s.db.locks/claims")).unwrap();
    let held = a.claim("t").await.unwrap();
    assert!(
        matches!(b.claim("t").await, Err(StoreError::Claimed { .. })),
        "both stores hold `t`"
    );
    drop(held);
    b.claim("t").await.unwrap();
}

//! `switchyard serve` started for a bench: in a child process on a free loopback
//! port, its access log drained as a log collector would.

use std::ffi::OsStr;
use std::process::Stdio;
use tokio::io::AsyncBufReadExt;

/// Starts `switchyard serve ARGS --listen 127.0.0.1:0` in the crate's directory; the
/// address it listens on, and the child (killed when dropped).
#[allow(dead_code)] // not every bench that shares this file calls it
pub(crate) async fn start<I, S>(args: I) -> (String, tokio::process::Child)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    start_with(args, &[]).await
}

/// [`start`] with these environment variables set for the server.
pub(crate) async fn start_with<I, S>(
    args: I,
    env: &[(&str, &str)],
) -> (String, tokio::process::Child)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    // `SWITCHYARD_BIN`: another build to measure (an older commit's, for a before and
    // after on the same day).
    let bin = std::env::var_os("SWITCHYARD_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_switchyard").into());
    let mut child = tokio::process::Command::new(bin)
        .envs(env.iter().copied())
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("switchyard serve starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("its standard error")
            .expect("the server says where");
        if let Some(url) = line.strip_prefix("switchyard serve: listening on ") {
            break url.to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (url, child)
}

/// A throwaway Postgres cluster for this process (`tests/servers/postgres.sh`: fsync and
/// synchronous_commit on, a Unix socket): its admin URL.
#[allow(dead_code)] // not every bench that shares this file calls it
pub(crate) fn postgres_cluster() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("bash")
        .arg(format!("{root}/tests/servers/postgres.sh"))
        .arg(std::process::id().to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "the bench cluster did not start");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A new database `name` on the cluster of `admin`: its URL. (On a thread of its own:
/// the client blocks on a runtime of its own.)
#[allow(dead_code)]
pub(crate) fn postgres_database(admin: &str, name: &str) -> String {
    let (url, create) = (admin.to_string(), format!("CREATE DATABASE {name}"));
    std::thread::spawn(move || {
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .batch_execute(&create)
            .unwrap()
    })
    .join()
    .unwrap();
    admin.replacen("/postgres?", &format!("/{name}?"), 1)
}

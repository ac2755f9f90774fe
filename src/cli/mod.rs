//! The subcommands, one file each: their arguments (`#[derive(clap::Args)]`) and their
//! work, which calls the library and prints; the library underneath never does.
//! `args.rs` is the command line as a whole, `flags.rs` the flags several share; the
//! helpers they share are here. No subcommand's file imports another's.

mod answer;
pub(crate) mod args;
pub(crate) mod color;
pub(crate) mod conformance;
pub(crate) mod diff;
mod events;
mod flags;
pub(crate) mod inspect;
pub(crate) mod lsp;
pub(crate) mod man;
mod ndjson;
pub(crate) mod new;
pub(crate) mod render;
pub(crate) mod run;
pub(crate) mod serve;
mod store;
pub(crate) mod test;
pub(crate) mod tools;
pub(crate) mod validate;

use anyhow::{Context, bail};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use switchyard::LoadError;
use switchyard::graph::Graph;
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::store::Store;

/// Loads, checks and compiles a graph for a command that uses it; an invalid graph
/// prints its diagnostics, as `validate` does, and gives the exit code instead.
pub(crate) fn load_graph(file: &Path) -> anyhow::Result<Result<Graph, u8>> {
    match switchyard::load_graph(file) {
        Ok(g) => Ok(Ok(g)),
        Err(LoadError::Invalid {
            rendered,
            path,
            count,
        }) => {
            eprintln!("{}", color::diagnostics(&rendered));
            let s = if count == 1 { "" } else { "s" };
            eprintln!("{path}: {count} error{s}");
            Ok(Err(exit::INVALID))
        }
        Err(e) => Err(e.into()),
    }
}

/// The graph file that wrote a thread, as its checkpoints recorded it.
pub(crate) async fn recorded_graph(store: &dyn Store, thread: &str) -> anyhow::Result<PathBuf> {
    let Some(last) = store.latest(thread).await? else {
        bail!("thread `{thread}` has no checkpoints in this store");
    };
    let path = PathBuf::from(&*last.graph);
    if !path.exists() {
        bail!(
            "thread `{thread}` was written by `{}`, which is gone; pass the graph file",
            path.display()
        );
    }
    Ok(path)
}

/// `--input '{"a": 1}'` or `--input @file.json`.
pub(crate) fn read_json_arg(text: &str, flag: &str) -> anyhow::Result<Json> {
    let (text, from) = match text.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{path}` ({flag})"))?,
            format!("`{path}`"),
        ),
        None => (text.to_string(), flag.to_string()),
    };
    serde_json::from_str(&text).with_context(|| format!("{from} is not JSON"))
}

/// `s` as a shell reads it back, for the commands printed to be run again.
pub(crate) fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./@:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// An MCP client for a graph's servers whose binary results are not kept (`validate
/// --online`, `tools`, the conformance client).
pub(crate) fn mcp_client(root: &Path) -> McpClient {
    McpClient::new(
        root,
        BlobStore::new(
            std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id())),
        ),
    )
}

/// The tools of a graph's servers as `switchyard tools` and `validate --online` list
/// them: the builtin `store` server's from Switchyard itself (no store is opened: they
/// are only listed), every other server's through [`mcp_client`].
pub(crate) fn graph_tools(root: &Path) -> switchyard::run::StoreTools {
    switchyard::run::StoreTools::new(
        std::sync::Arc::new(switchyard::store::NoStore::new()),
        None,
        std::sync::Arc::new(mcp_client(root)),
    )
}

/// The wall clock in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The async runtime of a command: one thread is enough for one run.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Runs a command that reads or writes a store (whose calls are async) to its end.
pub(crate) fn block_on(
    command: impl std::future::Future<Output = anyhow::Result<u8>>,
) -> anyhow::Result<u8> {
    runtime()?.block_on(command)
}

/// What `f` gives, outside a runtime (a command about to start its run's own).
pub(crate) fn wait<T>(f: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    Ok(runtime()?.block_on(f))
}

/// Exit codes, in one place (documented in docs/cli.md).
pub(crate) mod exit {
    /// Success: the command did its work; a run reached a finalize node or END.
    pub(crate) const OK: u8 = 0;
    /// The command failed: a file could not be read or written, a run failed.
    pub(crate) const FAILED: u8 = 1;
    /// The command line was wrong (clap exits with this code itself), or a run's
    /// `--input` or `--context` was refused before anything was saved.
    pub(crate) const USAGE: u8 = 2;
    /// A graph file is invalid.
    pub(crate) const INVALID: u8 = 3;
    /// The run is paused at an interrupt and waits for `switchyard resume`.
    pub(crate) const PAUSED: u8 = 4;
    /// The run was stopped (Ctrl-C or a stop request) at a node boundary; resume it.
    pub(crate) const STOPPED: u8 = 5;
}

//! The commands that run graphs: `run`, `resume`, `state`, `history`, `fork`, `serve`.
//! Everything here prints; the library underneath never does.

pub(crate) mod args;
pub(crate) mod color;
pub(crate) mod inspect;
pub(crate) mod run;
pub(crate) mod serve;
mod store;

pub(crate) use store::{DEFAULT_STORE, StoreArg};

use anyhow::Context;
use std::path::Path;
use switchyard::LoadError;
use switchyard::graph::Graph;

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

/// The async runtime of a command: one thread is enough for one run.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Exit codes, in one place (documented in docs/cli.md).
pub(crate) mod exit {
    /// Success: the command did its work; a run reached a finalize node or END.
    pub(crate) const OK: u8 = 0;
    /// The command failed: a file could not be read or written, a run failed.
    pub(crate) const FAILED: u8 = 1;
    /// The command line was wrong (clap exits with this code itself).
    #[allow(dead_code)]
    pub(crate) const USAGE: u8 = 2;
    /// A graph file is invalid.
    pub(crate) const INVALID: u8 = 3;
    /// The run is paused at an interrupt and waits for `switchyard resume`.
    pub(crate) const PAUSED: u8 = 4;
    /// The run was stopped (Ctrl-C or a stop request) at a node boundary; resume it.
    pub(crate) const STOPPED: u8 = 5;
}

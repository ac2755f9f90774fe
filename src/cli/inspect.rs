//! `switchyard state`, `history`, `fork` and `prune`: read a thread's checkpoints,
//! copy them, bound them.

use super::exit;
use super::flags::StoreFlag;
use super::store::StoreArg;
use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value as Json, json};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use switchyard::run::Threads;
use switchyard::store::Source;
use switchyard::store::{Checkpoint, Status, Store};

#[derive(clap::Args)]
pub(crate) struct StateArgs {
    #[command(subcommand)]
    action: Option<StateAction>,
    /// The thread.
    #[arg(long, required = true)]
    thread: Option<String>,
    /// The state at checkpoint SEQ instead of the latest.
    #[arg(long, value_name = "SEQ")]
    at: Option<u64>,
    /// The graph file (default: the one that wrote the thread).
    #[arg(long)]
    graph: Option<PathBuf>,
    #[command(flatten)]
    store: StoreFlag,
}

#[derive(Subcommand)]
pub(crate) enum StateAction {
    /// Write fields of a paused or finished thread's state, each through its reducer
    /// and type check, as a checkpoint of its own (the server's `update_state`); print
    /// the state after it.
    #[command(
        after_help = "Examples:\n  switchyard state set --thread t1 --values '{\"goal\": \"Find the opening hours\"}'\n  switchyard state set --thread t1 --values @fix.json --as-node validate"
    )]
    Set {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The fields to write: a JSON object, or @FILE holding one.
        #[arg(long, value_name = "JSON|@FILE")]
        values: String,
        /// Count the write as this node's: the thread then stands stopped before the
        /// node that node's edges pick, to be resumed from there.
        #[arg(long, value_name = "NODE")]
        as_node: Option<String>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        #[command(flatten)]
        store: StoreFlag,
    },
}

#[derive(clap::Args)]
pub(crate) struct HistoryArgs {
    /// The thread.
    #[arg(long)]
    thread: String,
    /// Every record as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreFlag,
}

#[derive(clap::Args)]
pub(crate) struct PruneArgs {
    /// The thread whose checkpoints go but its latest, which then holds the whole
    /// state (its earlier states and forks from them go too).
    #[arg(
        long,
        required_unless_present = "ended_before",
        conflicts_with = "ended_before"
    )]
    thread: Option<String>,
    /// Delete every thread that finished or failed longer ago than this (`30d`,
    /// `12h`), but those being run.
    #[arg(long, value_name = "DURATION", value_parser = super::flags::parse_duration)]
    ended_before: Option<std::time::Duration>,
    /// The graph file (default: the one that wrote the thread).
    #[arg(long)]
    graph: Option<PathBuf>,
    #[command(flatten)]
    store: StoreFlag,
}

#[derive(clap::Args)]
pub(crate) struct ForkArgs {
    /// The thread to copy.
    #[arg(long)]
    thread: String,
    /// The last checkpoint the copy keeps.
    #[arg(long, value_name = "SEQ")]
    at: u64,
    /// The new thread's id (default: `THREAD@SEQ`).
    #[arg(long)]
    into: Option<String>,
    /// The graph file (default: the one that wrote the thread).
    #[arg(long)]
    graph: Option<PathBuf>,
    #[command(flatten)]
    store: StoreFlag,
}

/// The thread's graph's view of the store: the graph file given, else the one that
/// wrote the thread.
async fn threads(
    store: Arc<dyn Store>,
    graph: Option<PathBuf>,
    thread: &str,
) -> anyhow::Result<Result<Threads, u8>> {
    let file = match graph {
        Some(f) => f,
        None => super::recorded_graph(&*store, thread).await?,
    };
    Ok(super::load_graph(&file)?.map(|g| Threads::new(Arc::new(g), store)))
}

/// `switchyard state`, and `state set`.
pub(crate) async fn state(args: StateArgs) -> anyhow::Result<u8> {
    let StateArgs {
        action,
        thread,
        at,
        graph,
        store,
    } = args;
    if let Some(StateAction::Set {
        thread,
        values,
        as_node,
        graph,
        store,
    }) = action
    {
        return set(&store.store, graph, &thread, &values, as_node.as_deref()).await;
    }
    let thread = thread.unwrap_or_default();
    let threads = match threads(store.store.open_to_read()?, graph, &thread).await? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let (state, last) = threads.state(&thread, at).await?;
    print_json(&state_doc(&thread, &state, &last))
}

/// `switchyard state set`: writes fields through their reducers as a checkpoint of its
/// own, then prints the state as `state` does. A refused write changes nothing.
async fn set(
    store: &StoreArg,
    graph: Option<PathBuf>,
    thread: &str,
    values: &str,
    as_node: Option<&str>,
) -> anyhow::Result<u8> {
    let values = super::read_json_arg(values, "--values")?;
    let threads = match threads(store.open()?, graph, thread).await? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    threads.update(thread, values, as_node).await?;
    let (state, last) = threads.state(thread, None).await?;
    print_json(&state_doc(thread, &state, &last))
}

/// Where a thread stands and its state, as `state` prints them.
fn state_doc(thread: &str, state: &Json, last: &Checkpoint) -> Json {
    json!({
        "thread": thread,
        "seq": last.seq,
        "run": last.run,
        "step": last.step,
        "status": last.status.name(),
        "node": last.node.as_deref(),
        "next": last.next.as_deref(),
        "pending": last.pending.as_ref().map(|p| json!({
            "node": &*p.node,
            "payload": p.payload,
            "reference": p.reference,
            "deadline_ms": p.deadline_ms,
            "breakpoint": p.breakpoint,
        })),
        "outcome": last.outcome,
        "state": state,
    })
}

/// `switchyard history`: one line per checkpoint, or every record as JSON.
pub(crate) async fn history(args: HistoryArgs) -> anyhow::Result<u8> {
    let HistoryArgs {
        thread,
        json,
        store,
    } = args;
    let store = store.store.open_to_read()?;
    let records = store.load(&thread).await?;
    if records.is_empty() {
        anyhow::bail!("thread `{thread}` has no checkpoints in this store");
    }
    if json {
        return print_json(&serde_json::to_value(&records)?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:>4} {:>3} {:>5}  {:<28} {:<12} writes",
        "seq", "run", "step", "node -> next", "status"
    )?;
    for r in &records {
        writeln!(out, "{}", line(r))?;
    }
    out.flush()?;
    Ok(exit::OK)
}

fn line(r: &Checkpoint) -> String {
    // Records without a node: a run's input, or the run's end without a finalize node
    // (END, a limit with no `on_limit`), or a stop between nodes, or a person's update.
    let node = match (r.node.as_deref(), r.status) {
        _ if r.source == Source::Base => "(pruned)",
        (Some(n), _) => n,
        (None, _) if r.source == Source::Update => "(update)",
        // A run's input checkpoint: the state as the run found it. (An older version's
        // `input` records hold the input.)
        (None, _) if r.source == Source::Input && r.writes.is_empty() => "(start)",
        (None, Status::Finished) => "(end)",
        (None, Status::Stopped) => "(stop)",
        (None, _) => "(input)",
    };
    let edge = match r.next.as_deref() {
        Some(next) => format!("{node} -> {next}"),
        None => node.to_string(),
    };
    let writes: Vec<&str> = r.writes.iter().map(|w| &*w.field).collect();
    let mut status = r.status.name().to_string();
    if let Some(o) = &r.outcome {
        status = format!("{status}:{o}");
    }
    // A branch begins where a record follows another than the one before it.
    let follows = match r.parent {
        Some(p) if r.source != Source::Base && p.checked_add(1) != Some(r.seq) => {
            format!("  (follows {p})")
        }
        _ => String::new(),
    };
    format!(
        "{:>4} {:>3} {:>5}  {:<28} {:<12} {}{follows}",
        r.seq,
        r.run,
        r.step,
        edge,
        status,
        writes.join(", ")
    )
}

/// `switchyard fork`: copies a thread up to a checkpoint into a new thread.
pub(crate) async fn fork(args: ForkArgs) -> anyhow::Result<u8> {
    let ForkArgs {
        thread,
        at,
        into,
        graph,
        store,
    } = args;
    let threads = match threads(store.store.open()?, graph, &thread).await? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let new = into.unwrap_or_else(|| format!("{thread}@{at}"));
    threads
        .fork(&thread, at, &new)
        .await
        .with_context(|| format!("cannot fork thread `{thread}`"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{new}")?;
    out.flush()?;
    Ok(exit::OK)
}

/// `switchyard prune`: a thread's history down to its latest checkpoint, or the
/// threads that ended before a time deleted. Says what went.
pub(crate) async fn prune(args: PruneArgs) -> anyhow::Result<u8> {
    let PruneArgs {
        thread,
        ended_before,
        graph,
        store,
    } = args;
    let opened = store.store.open()?;
    let mut out = std::io::stdout().lock();
    if let Some(age) = ended_before {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let before = now.saturating_sub(age.as_millis() as u64);
        // A thread with a run waiting (a server's, queued) stays.
        let waiting = |t: String| -> futures_util::future::BoxFuture<'_, bool> {
            let opened = &opened;
            Box::pin(async move {
                opened
                    .runs(&t)
                    .await
                    .map_or(true, |runs| runs.iter().any(|r| r.status.in_flight()))
            })
        };
        let deleted = switchyard::store::delete_ended(&*opened, before, waiting).await?;
        for t in &deleted {
            writeln!(out, "deleted thread `{t}`")?;
        }
        writeln!(
            out,
            "{} thread{} deleted",
            deleted.len(),
            if deleted.len() == 1 { "" } else { "s" }
        )?;
    } else if let Some(thread) = thread.as_deref() {
        let threads = match threads(opened, graph, thread).await? {
            Ok(r) => r,
            Err(code) => return Ok(code),
        };
        let gone = threads
            .prune(thread)
            .await
            .with_context(|| format!("cannot prune thread `{thread}`"))?;
        let kept = threads.latest(thread).await?.seq;
        writeln!(
            out,
            "thread `{thread}`: {gone} checkpoint{} removed; checkpoint {kept} holds its state",
            if gone == 1 { "" } else { "s" }
        )?;
    }
    out.flush()?;
    Ok(exit::OK)
}

fn print_json(doc: &Json) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    // As an io::Error, so a closed pipe (`| head`) is recognised and not reported.
    serde_json::to_writer_pretty(&mut out, doc).map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()?;
    Ok(exit::OK)
}

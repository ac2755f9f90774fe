//! `switchyard diff OLD NEW`: what an edit of a graph changes (its settings, servers,
//! fields, nodes and files), and with `--store`, which threads left waiting on OLD can go
//! on on NEW and why the others cannot (the check a resume and a server's reload make).

use super::exit;
use super::flags::ReportFormat;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use switchyard::run::Threads;

#[derive(clap::Args)]
pub(crate) struct DiffArgs {
    /// The graph file before the edit (a copy, with the files it reads beside it).
    old: PathBuf,
    /// The graph file after the edit.
    new: PathBuf,
    /// Also list the threads of this store that OLD left paused or stopped, each with
    /// whether it can go on on NEW.
    #[arg(long, value_name = "sqlite:PATH|postgres://URL")]
    store: Option<super::store::StoreArg>,
    /// Text for people, or JSON for tools.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

pub(crate) async fn diff(args: DiffArgs) -> anyhow::Result<u8> {
    let old = match super::load_graph(&args.old)? {
        Ok(g) => Arc::new(g),
        Err(code) => return Ok(code),
    };
    let new = match super::load_graph(&args.new)? {
        Ok(g) => Arc::new(g),
        Err(code) => return Ok(code),
    };
    let changes = switchyard::graph::diff(&old.shape, &new.shape);
    let mut threads = Vec::new();
    if let Some(store) = &args.store {
        let store = store.open_to_read()?;
        let reader = Threads::new(new.clone(), store.clone());
        for thread in store.waiting_on(&old.hash).await? {
            let latest = store.latest(&thread).await?;
            let (status, at) = latest
                .map(|l| {
                    (
                        l.status.name().to_string(),
                        l.pending
                            .map(|p| p.node.to_string())
                            .or(l.next.map(|n| n.to_string())),
                    )
                })
                .unwrap_or_default();
            let why = reader.movable(&thread).await?;
            threads.push(serde_json::json!({
                "thread": thread,
                "status": status,
                "at": at,
                "moves": why.is_none(),
                "why": why,
            }));
        }
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        ReportFormat::Json => {
            let mut report = serde_json::json!({
                "old": args.old.display().to_string(),
                "new": args.new.display().to_string(),
                "graph": new.name,
                "changes": changes,
            });
            if args.store.is_some() {
                report["threads"] = threads.into();
            }
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            let n = changes.len();
            let s = if n == 1 { "" } else { "s" };
            writeln!(out, "graph `{}`: {n} change{s}", new.name)?;
            for c in &changes {
                writeln!(out, "{c}")?;
            }
            if args.store.is_some() {
                let n = threads.len();
                let s = if n == 1 { "" } else { "s" };
                writeln!(out, "{n} thread{s} waiting on {}:", args.old.display())?;
                for t in &threads {
                    let at = t["at"]
                        .as_str()
                        .map(|a| format!(" at `{a}`"))
                        .unwrap_or_default();
                    let verdict = match t["why"].as_str() {
                        None => format!("can go on on {}", args.new.display()),
                        Some(why) => format!("stays on the old version: {why}"),
                    };
                    writeln!(
                        out,
                        "  `{}` ({}{at}): {verdict}",
                        t["thread"].as_str().unwrap_or(""),
                        t["status"].as_str().unwrap_or("")
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(exit::OK)
}

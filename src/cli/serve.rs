//! `switchyard serve`: hosts graphs over HTTP until SIGTERM or Ctrl-C. It prints where
//! it listens, then one JSON line per request and per thing the host did, on stderr.

use super::exit;
use super::flags::{
    SqliteFlags, TraceArgs, cli_default_store, parse_duration, parse_positive_duration, parse_size,
};
use super::store::StoreArg;
use anyhow::Context;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use switchyard::host::{Graphs, Host, HostOptions, LlmSource, RunRules};
use switchyard::serve::{ServeOptions, bind};

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Graph files, or directories whose `*.toml` files are graphs.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The address and port to listen on (`:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:2024")]
    listen: SocketAddr,
    /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
    #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
    store: StoreArg,
    #[command(flatten)]
    sqlite: SqliteFlags,
    /// Require the API key held by this environment variable (`x-api-key` or
    /// `Authorization: Bearer`).
    #[arg(long, value_name = "NAME", conflicts_with = "api_key_file")]
    api_key_env: Option<String>,
    /// Require the API key held in this file.
    #[arg(long, value_name = "PATH")]
    api_key_file: Option<PathBuf>,
    /// Listen on a non-loopback address without an API key.
    #[arg(long)]
    insecure: bool,
    /// Let a browser page from this origin call the API (`*` for any); repeat for more.
    #[arg(long, value_name = "ORIGIN")]
    cors: Vec<String>,
    /// The largest request body taken: bytes, or with kB / MB.
    #[arg(long, value_name = "SIZE", default_value = "10MB", value_parser = parse_size)]
    max_body: usize,
    /// Refuse (409) what LangGraph's server lets through: a new input to a thread
    /// paused at an interrupt (which starts it over), an answer to a thread that waits
    /// for none, a run without input on a paused or ended thread; and make `reject`
    /// the default multitask strategy. For clients that send a request again after
    /// losing its answer.
    #[arg(long)]
    strict_runs: bool,
    /// Runs driven at once; more wait as pending.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    max_runs: u64,
    /// Stop a paused thread's MCP servers after this long unused.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    mcp_idle: Duration,
    /// Live MCP servers allowed at once; past it, those of the thread unused longest stop.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    mcp_max_servers: u64,
    /// How often to look for edited graph files.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration)]
    watch: Duration,
    /// Do not look for edited graph files.
    #[arg(long)]
    no_watch: bool,
    /// How long a finished run's events stay for streams that join late.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    log_retention: Duration,
    /// Delete threads that finished or failed longer ago than this (their
    /// checkpoints, entry and runs); kept for ever without it.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    thread_ttl: Option<Duration>,
    /// With a Postgres store several servers share: how long a run stays this
    /// server's without its heartbeat (renewed four times as often) before another
    /// server takes it over from its last checkpoint.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_positive_duration)]
    run_lease: Duration,
    /// Leave model calls' messages and replies out of run events (and so out of
    /// streams, the page and the store's event log); only their sizes and timings stay.
    /// (Not with `--otlp-content`: spans would have no content to carry.)
    #[arg(long, conflicts_with = "otlp_content")]
    no_llm_content: bool,
    #[command(flatten)]
    trace: TraceArgs,
    /// Send a heartbeat down a stream quiet for this long.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration)]
    heartbeat: Duration,
    /// Answer LLM requests from recordings, with no network; repeat for more.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    replay: Vec<PathBuf>,
    /// Append every LLM request and reply to FILE (JSON lines).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Embed the long-term store's items with this model for semantic search
    /// (`query` in a store search): an OpenAI-compatible `/embeddings` endpoint at
    /// `OPENAI_BASE_URL` (OpenAI's when unset), key in `OPENAI_API_KEY`.
    #[arg(long, value_name = "MODEL")]
    embeddings: Option<String>,
    /// What of an item is embedded, unless its put says: paths into its value
    /// (`text`, `tags[*]`, `{title,body}`), `$` the whole value.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "$",
        value_delimiter = ',',
        requires = "embeddings"
    )]
    embeddings_fields: Vec<String>,
    /// Print no access or notice lines.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let store_arg = args.sqlite.apply(&args.store);
    let trace = args.trace.resolve()?;
    let watch = (!args.no_watch).then_some(args.watch);
    let api_key = api_key(&args)?;
    // Refused before anything is loaded or opened.
    switchyard::serve::check_exposure(args.listen, api_key.is_some(), args.insecure)?;
    if matches!(store_arg, StoreArg::None) {
        anyhow::bail!(
            "the server keeps threads and runs, and --store none keeps nothing; use --store memory or sqlite:PATH (stateless runs keep no checkpoints anyway)"
        );
    }
    let store = store_arg.open_serving(args.run_lease)?;
    let index = match &args.embeddings {
        None => None,
        Some(model) => Some(switchyard::store::Index {
            fields: {
                switchyard::store::check_index_paths(&args.embeddings_fields)
                    .map_err(|e| anyhow::anyhow!("--embeddings-fields: {e}"))?;
                args.embeddings_fields.clone()
            },
            embed: std::sync::Arc::new(
                switchyard::llm::Embeddings::from_env(model, "OPENAI_BASE_URL", "OPENAI_API_KEY")
                    .context("--embeddings")?,
            ),
        }),
    };
    let llm = if args.replay.is_empty() {
        LlmSource::live(args.record.clone())?
    } else {
        LlmSource::replay(&args.replay)?
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // New requests (a health check, a page) are heard every 4 tasks a worker runs
        // rather than tokio's 61: with many runs in flight on two cores, `GET /ok`
        // waited behind ~60 run steps (p50 4 ms at 64 clients, 1 ms now) for the same
        // runs per second (docs/performance.md, issue 26).
        .event_interval(4)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let (lines, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        // One writer for every log line, so lines never interleave; `None` ends it.
        let quiet = args.quiet;
        let printer = tokio::spawn(async move {
            while let Some(Some(line)) = rx.recv().await {
                if !quiet {
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                }
            }
        });
        let tx = Line(lines);
        let graphs = {
            let paths = args.paths.clone();
            tokio::task::spawn_blocking(move || Graphs::load(paths)).await?
        };
        // One name, two files: which the clients would get is the order of a
        // directory listing, so neither is served until one is renamed.
        if let Some((name, first, second)) = graphs.duplicates().into_iter().next() {
            anyhow::bail!(
                "graph `{name}` is declared by both `{}` and `{}`; give one of them another `[graph] name`",
                first.display(),
                second.display()
            );
        }
        let tracer = trace.map(switchyard::telemetry::Tracer::start);
        let host = Host::new(
            graphs,
            HostOptions {
                store,
                index,
                blob_dir: store_arg.blob_dir(),
                llm,
                max_runs: args.max_runs as usize,
                mcp_idle: args.mcp_idle,
                max_mcp_servers: args.mcp_max_servers as usize,
                log_retention: args.log_retention,
                thread_ttl: args.thread_ttl,
                run_lease: args.run_lease,
                llm_content: !args.no_llm_content,
                tracer: tracer.clone(),
                runs: if args.strict_runs {
                    RunRules::Strict
                } else {
                    RunRules::LangGraph
                },
            },
        );
        let (notices, mut notice_rx) = tokio::sync::mpsc::unbounded_channel();
        // The graphs were loaded before anyone listened: say what they are now.
        for served in host.graphs().list() {
            let line = match (&served.current, &served.problems) {
                (_, Some(p)) => serde_json::json!({
                    "notice": "graph_invalid",
                    "graph": served.id,
                    "path": served.path.display().to_string(),
                    "errors": p.errors,
                    "rendered": p.rendered,
                    "serving": served.current.as_ref().map(|g| g.hash.clone()),
                }),
                (Some(g), None) => serde_json::json!({
                    "notice": "graph_loaded",
                    "graph": served.id,
                    "path": served.path.display().to_string(),
                    "hash": g.hash,
                }),
                (None, None) => continue,
            };
            let _ = tx.send(line.to_string());
        }
        host.set_notices(notices);
        let forward = tx.clone();
        let forwarding = tokio::spawn(async move {
            while let Some(n) = notice_rx.recv().await {
                if let Ok(line) = serde_json::to_string(&n) {
                    let _ = forward.send(line);
                }
            }
        });
        let (access, mut access_rx) = tokio::sync::mpsc::unbounded_channel();
        let forward = tx.clone();
        tokio::spawn(async move {
            while let Some(a) = access_rx.recv().await {
                let line = serde_json::json!({ "access": a });
                let _ = forward.send(line.to_string());
            }
        });
        let recovered = host.recover().await?;
        if recovered > 0 {
            let _ = tx
                .send(serde_json::json!({ "notice": "recovering", "runs": recovered }).to_string());
        }
        host.spawn_background(watch);
        let bound = bind(
            host.clone(),
            ServeOptions {
                listen: args.listen,
                api_key,
                insecure: args.insecure,
                cors: args.cors.clone(),
                max_body: args.max_body,
                heartbeat: args.heartbeat,
                access_log: Some(access),
            },
        )
        .await?;
        let addr = bound.local_addr()?;
        eprintln!("switchyard serve: listening on http://{addr}");
        let _ = std::io::stderr().flush();
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
        let stopping = host.clone();
        let shutdown = async move {
            signal().await;
            // Runs stop at their next node boundary and are saved; then the listener
            // closes and open streams end with their runs.
            stopping.shutdown().await;
            let _ = stopped_tx.send(());
        };
        let server = bound.run(shutdown);
        tokio::pin!(server);
        tokio::select! {
            done = &mut server => done?,
            // Connections that outlive the runs (a client that keeps a finished
            // stream open) get a moment, not forever.
            _ = async {
                let _ = stopped_rx.await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            } => {}
        }
        // Every notice of the shutdown (the runs it ended) is printed before `stopped`.
        host.close_notices();
        if let Some(t) = &tracer {
            let (failed, last) = t.flush().await;
            if failed > 0 {
                let _ = tx.send(
                    serde_json::json!({ "notice": "traces_lost", "runs": failed, "error": last })
                        .to_string(),
                );
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), forwarding).await;
        let _ = tx.send(serde_json::json!({ "notice": "stopped" }).to_string());
        let _ = tx.0.send(None);
        let _ = printer.await;
        anyhow::Ok(())
    })?;
    Ok(exit::OK)
}

/// Where log lines go.
#[derive(Clone)]
struct Line(tokio::sync::mpsc::UnboundedSender<Option<String>>);

impl Line {
    fn send(&self, line: String) -> Result<(), ()> {
        self.0.send(Some(line)).map_err(drop)
    }
}

/// SIGTERM or Ctrl-C.
async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn api_key(args: &ServeArgs) -> anyhow::Result<Option<String>> {
    if let Some(path) = &args.api_key_file {
        let key = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the API key file `{}`", path.display()))?;
        let key = key.trim().to_string();
        anyhow::ensure!(
            !key.is_empty(),
            "the API key file `{}` is empty",
            path.display()
        );
        return Ok(Some(key));
    }
    if let Some(name) = &args.api_key_env {
        let key = std::env::var(name)
            .with_context(|| format!("the API key variable `{name}` is not set"))?;
        let key = key.trim().to_string();
        anyhow::ensure!(!key.is_empty(), "the API key variable `{name}` is empty");
        return Ok(Some(key));
    }
    Ok(None)
}

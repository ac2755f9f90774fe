//! OpenTelemetry traces of runs, exported over OTLP by the OpenTelemetry project's own
//! exporter (`opentelemetry-otlp`): HTTP with protobuf (the default) or JSON, or gRPC,
//! as `OTEL_EXPORTER_OTLP_PROTOCOL` says, with the other standard variables (headers,
//! timeout, resource attributes). A span per run, node, model call, tool call and MCP
//! server start, named and attributed as the GenAI semantic conventions say
//! (`invoke_agent`, `chat`, `execute_tool`; `gen_ai.usage.input_tokens`, ...), a model
//! request's retries as events of its node's span. Off unless asked for (`--otlp URL`,
//! or `OTEL_EXPORTER_OTLP_ENDPOINT`). Spans are made from the run's events ([`Spans`]),
//! so the runner knows nothing of tracing; they are queued when each run ends and sent
//! by a task of their own, so a slow collector never slows a run. Prompt and completion
//! content go into spans only when asked (`content`).

mod export;
mod spans;

pub use spans::{Kind, Span, SpanEvent, Spans};

use crate::run::Event;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How traces travel (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP, protobuf: the standard's default.
    HttpProtobuf,
    HttpJson,
    Grpc,
}

impl Protocol {
    fn parse(s: &str) -> Option<Protocol> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "http/protobuf" => Protocol::HttpProtobuf,
            "http/json" => Protocol::HttpJson,
            "grpc" => Protocol::Grpc,
            _ => return None,
        })
    }
}

/// Where traces go and what they carry.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOptions {
    /// Where spans are sent: the traces URL (`.../v1/traces`) over HTTP, the
    /// collector's address over gRPC.
    pub endpoint: String,
    pub protocol: Protocol,
    /// Prompts, replies and tool arguments go into spans.
    pub content: bool,
    /// `service.name` of the resource.
    pub service: String,
}

impl TraceOptions {
    /// From `--otlp URL` when given, else the standard environment variables:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the URL as it is), or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base, `/v1/traces` added over HTTP); none
    /// without either. `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` choose the protocol (`http/protobuf` when unset);
    /// `OTEL_SERVICE_NAME`, else a `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, names
    /// the service (`switchyard` by default). A protocol of another name is an error.
    pub fn resolve(flag: Option<&str>, content: bool) -> Result<Option<TraceOptions>, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let protocol = match [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|k| env(k).map(|v| (k, v)))
        {
            Some((k, v)) => Protocol::parse(&v).ok_or_else(|| {
                format!("{k} is `{v}`: traces go by `http/protobuf`, `http/json` or `grpc`")
            })?,
            None => Protocol::HttpProtobuf,
        };
        let base = match flag {
            Some(url) => Some((url.to_string(), false)),
            None => match env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(url) => Some((url, true)),
                None => env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|u| (u, false)),
            },
        };
        let Some((url, whole)) = base else {
            return Ok(None);
        };
        let endpoint = if whole || protocol == Protocol::Grpc {
            url
        } else {
            traces_url(&url)
        };
        let service = env("OTEL_SERVICE_NAME")
            .or_else(|| {
                env("OTEL_RESOURCE_ATTRIBUTES")?.split(',').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    (k.trim() == "service.name").then(|| v.trim().to_string())
                })
            })
            .unwrap_or_else(|| "switchyard".into());
        Ok(Some(TraceOptions {
            endpoint,
            protocol,
            content,
            service,
        }))
    }
}

/// A collector's base URL as the traces URL (one that names its path is kept).
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Ended runs waiting to be sent, at most: beyond it a run's spans are dropped rather
/// than kept in memory for a collector that does not keep up.
const EXPORT_QUEUE: usize = 256;

/// How long the end of a command waits for the last traces to be sent.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs sent in one request at most: a collector's size limit or a timeout loses no
/// more than these.
const EXPORT_BATCH: u64 = 32;

/// What the sending task is given.
enum Outgoing {
    Spans(Vec<Span>),
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Takes events of runs and exports their spans. Cheap to clone; clones share the
/// exporter.
#[derive(Clone)]
pub struct Tracer {
    /// Spans are made in the caller, as events come: a run's spans are queued before
    /// its end is told to anyone (a client that saw the run end and then asks the
    /// collector finds its trace sent or on its way). Making them is cheap next to
    /// the events themselves; only sending waits on the collector.
    spans: Arc<std::sync::Mutex<Spans>>,
    out: tokio::sync::mpsc::Sender<Outgoing>,
    failures: Arc<AtomicU64>,
    last_error: Arc<std::sync::Mutex<Option<String>>>,
}

impl Tracer {
    /// Starts the exporter on the current Tokio runtime.
    pub fn start(options: TraceOptions) -> Tracer {
        let failures = Arc::new(AtomicU64::new(0));
        let last_error = Arc::new(std::sync::Mutex::new(None));
        let content = options.content;
        // reqwest is built without a TLS provider of its own: ours, as for LLM calls.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Spans are sent by a task of their own, so a slow collector holds back
        // neither the runs nor the making of spans: ended runs wait in a bounded
        // queue, are sent together when several wait, and are dropped (counted as a
        // failed export) when the queue is full.
        let (out, mut queued) = tokio::sync::mpsc::channel::<Outgoing>(EXPORT_QUEUE);
        let (failed, last) = (failures.clone(), last_error.clone());
        tokio::spawn(async move {
            // Made on the runtime: gRPC's channel is driven by a task of it.
            let exporter = export::Exporter::new(&options);
            while let Some(first) = queued.recv().await {
                // The runs waiting, up to a batch; a flush answered once what came
                // before it is sent.
                let mut batch = Vec::new();
                let mut runs = 0;
                let mut flushed = None;
                let mut next = Some(first);
                while let Some(item) = next {
                    match item {
                        Outgoing::Spans(spans) => {
                            batch.extend(spans);
                            runs += 1;
                        }
                        Outgoing::Flush(done) => {
                            flushed = Some(done);
                            break;
                        }
                    }
                    next = if runs < EXPORT_BATCH {
                        queued.try_recv().ok()
                    } else {
                        None
                    };
                }
                if !batch.is_empty() {
                    let sent = match &exporter {
                        Ok(e) => e.export(batch).await,
                        Err(e) => Err(e.clone()),
                    };
                    if let Err(e) = sent {
                        failed.fetch_add(runs, Ordering::SeqCst);
                        *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
                if let Some(done) = flushed {
                    let _ = done.send(());
                }
            }
        });
        Tracer {
            spans: Arc::new(std::sync::Mutex::new(Spans::new(content))),
            out,
            failures,
            last_error,
        }
    }

    /// One event of the run under `key` (any id that tells concurrent runs apart).
    pub fn observe(&self, key: &str, event: &Event) {
        // Most events (deltas, stderr lines, routes) make no span: the lock is not even
        // taken.
        if !Spans::wants(event) {
            return;
        }
        // A subgraph node's child run: a trace of its own, under a key of its own.
        if let Event::Subgraph { node, inner } = event {
            self.observe(&format!("{key}/{node}"), inner);
            return;
        }
        let ended = self.lock().event(key, now_ns(), event);
        self.queue(ended);
    }

    /// The run under `key` is over: a run that ended without its last event (a store
    /// error) is closed and sent all the same, and nothing of it is kept.
    pub fn end(&self, key: &str) {
        let ended = self.lock().end(key, now_ns());
        self.queue(ended);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Spans> {
        self.spans.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an ended run's spans for the sending task.
    fn queue(&self, ended: Option<Vec<Span>>) {
        let Some(done) = ended else { return };
        if self.out.try_send(Outgoing::Spans(done)).is_err() {
            // The collector's own error, if it gave one, says more than this.
            self.failures.fetch_add(1, Ordering::SeqCst);
            let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_none() {
                *last = Some(format!(
                    "the collector keeps {EXPORT_QUEUE} ended runs waiting: a run's spans were dropped"
                ));
            }
        }
    }

    /// Waits until every span of the runs that ended so far has been sent (or failed);
    /// how many runs' spans were lost (an export that failed, a full queue), and the
    /// last failure.
    pub async fn flush(&self) -> (u64, Option<String>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Waited for a while, not for ever: a collector that takes no connection would
        // hold up the command's end by every queued export's timeout (and a full
        // queue would hold up even the asking).
        let asked = async {
            if self.out.send(Outgoing::Flush(tx)).await.is_ok() {
                let _ = rx.await;
            }
        };
        if tokio::time::timeout(FLUSH_WAIT, asked).await.is_err() {
            return (
                self.failures.load(Ordering::SeqCst).max(1),
                Some(format!(
                    "the collector did not take the traces within {} s",
                    FLUSH_WAIT.as_secs()
                )),
            );
        }
        (
            self.failures.load(Ordering::SeqCst),
            self.last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

//! Flags and value parsers several subcommands share.

use super::store::StoreArg;
use clap::{Args, ValueEnum};

/// `--store` where it names the checkpoints a command reads or writes.
#[derive(Args)]
pub(crate) struct StoreFlag {
    /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
    #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
    pub(crate) store: StoreArg,
}

/// How SQLite keeps checkpoints, for the commands that write them as they run.
#[derive(Args)]
pub(crate) struct SqliteFlags {
    /// How durable each SQLite checkpoint is: `normal` survives the process being
    /// killed, `full` a power loss too, at the cost of waiting for the disk.
    #[arg(long, value_name = "normal|full", default_value = "normal", env = "SWITCHYARD_DURABILITY", value_parser = parse_durability)]
    pub(crate) durability: switchyard::store::Durability,
    /// Keep large SQLite checkpoint values LZ4-compressed: smaller files for a
    /// little more work per step.
    #[arg(long, env = "SWITCHYARD_COMPRESS", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) compress: bool,
}

impl SqliteFlags {
    /// `store` with these settings (they only mean something to SQLite).
    pub(crate) fn apply(&self, store: &StoreArg) -> StoreArg {
        store
            .clone()
            .with_options(switchyard::store::SqliteOptions {
                durability: self.durability,
                compress: self.compress,
            })
    }
}

pub(crate) fn cli_default_store() -> &'static str {
    super::store::DEFAULT_STORE
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    switchyard::spec::parse_duration(s)
}

pub(crate) fn parse_durability(s: &str) -> Result<switchyard::store::Durability, String> {
    switchyard::store::Durability::parse(s)
        .ok_or_else(|| format!("`{s}` is not `normal` or `full`"))
}

pub(crate) fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s).and_then(|d| {
        if d.is_zero() {
            Err(format!(
                "`{s}` is no time at all; give a duration above zero"
            ))
        } else {
            Ok(d)
        }
    })
}

/// `1048576`, `512kB`, `10MB`.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("MB") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("kB").or_else(|| t.strip_suffix("KB")) {
        (n, 1 << 10)
    } else {
        (t.strip_suffix('B').unwrap_or(t), 1)
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{s}` is not a size (bytes, or a number with kB or MB)"))
}

/// Where traces go, for `run`, `resume` and `serve` alike.
#[derive(clap::Args, Debug)]
pub(crate) struct TraceArgs {
    /// Export OpenTelemetry traces over OTLP to this collector (a base URL, or one
    /// ending in `/v1/traces`; over gRPC its address); without it,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` when set. `OTEL_EXPORTER_OTLP_PROTOCOL` chooses
    /// `http/protobuf` (default), `http/json` or `grpc`.
    #[arg(long, value_name = "URL")]
    pub(crate) otlp: Option<String>,
    /// Put prompts, replies and tool arguments into the spans (and the model events).
    #[arg(long)]
    pub(crate) otlp_content: bool,
}

impl TraceArgs {
    pub(crate) fn resolve(&self) -> anyhow::Result<Option<switchyard::telemetry::TraceOptions>> {
        switchyard::telemetry::TraceOptions::resolve(self.otlp.as_deref(), self.otlp_content)
            .map_err(anyhow::Error::msg)
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReportFormat {
    Text,
    Json,
}

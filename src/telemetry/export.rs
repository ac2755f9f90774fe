//! Spans handed to `opentelemetry-otlp`'s exporter: ours turned into the SDK's
//! `SpanData`, the resource made from `service.name` and `OTEL_RESOURCE_ATTRIBUTES`,
//! and the protocol and endpoint chosen here (the exporter's own default, when both
//! HTTP encodings are built in, would be JSON).

use super::{Kind, Protocol, Span, TraceOptions};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use serde_json::Value as Json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long one export may take, retries included.
const TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Exporter {
    inner: opentelemetry_otlp::SpanExporter,
    endpoint: String,
    scope: InstrumentationScope,
}

impl Exporter {
    /// The exporter for `options`; on the Tokio runtime (gRPC's channel needs one).
    pub(super) fn new(options: &TraceOptions) -> Result<Exporter, String> {
        let built = match options.protocol {
            Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(&options.endpoint)
                .with_timeout(TIMEOUT)
                .build(),
            http => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(match http {
                    Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
                    _ => opentelemetry_otlp::Protocol::HttpBinary,
                })
                .with_endpoint(&options.endpoint)
                .with_timeout(TIMEOUT)
                // Ours, not the exporter's; `OTEL_EXPORTER_OTLP_HEADERS` go on top.
                .with_headers(
                    [(
                        "User-Agent".to_string(),
                        crate::tool::USER_AGENT.to_string(),
                    )]
                    .into(),
                )
                .build(),
        };
        let mut inner = built
            .map_err(|e| format!("cannot make an OTLP exporter for {}: {e}", options.endpoint))?;
        // The detectors read `OTEL_RESOURCE_ATTRIBUTES`; the service's name is the one
        // `TraceOptions` settled on.
        inner.set_resource(
            &Resource::builder()
                .with_service_name(options.service.clone())
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        Ok(Exporter {
            inner,
            endpoint: options.endpoint.clone(),
            scope: InstrumentationScope::builder("switchyard")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        })
    }

    /// Sends these spans; why it failed.
    pub(super) async fn export(&self, spans: Vec<Span>) -> Result<(), String> {
        let batch = spans.into_iter().map(|s| self.data(s)).collect();
        self.inner
            .export(batch)
            .await
            .map_err(|e| format!("cannot send traces to {}: {e}", self.endpoint))
    }

    fn data(&self, span: Span) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(span.trace_id),
                SpanId::from_bytes(span.span_id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: span.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
            parent_span_is_remote: false,
            span_kind: match span.kind {
                Kind::Internal => SpanKind::Internal,
                Kind::Client => SpanKind::Client,
            },
            name: span.name.into(),
            start_time: time(span.start_ns),
            end_time: time(span.end_ns),
            attributes: attributes(span.attributes),
            dropped_attributes_count: 0,
            events: events(span.events),
            links: SpanLinks::default(),
            status: match span.error {
                Some(m) => Status::error(m),
                None => Status::Unset,
            },
            instrumentation_scope: self.scope.clone(),
        }
    }
}

fn events(list: Vec<super::SpanEvent>) -> SpanEvents {
    let mut events = SpanEvents::default();
    events.events = list
        .into_iter()
        .map(|e| {
            opentelemetry::trace::Event::new(e.name, time(e.at_ns), attributes(e.attributes), 0)
        })
        .collect();
    events
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

fn attributes(list: Vec<(&'static str, Json)>) -> Vec<KeyValue> {
    list.into_iter()
        .map(|(k, v)| KeyValue::new(k, value(v)))
        .collect()
}

/// An attribute's value: JSON's scalars as themselves, a list of strings as a string
/// array, anything else as its JSON text.
fn value(v: Json) -> Value {
    match v {
        Json::Bool(b) => Value::Bool(b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => Value::String(s.into()),
        Json::Array(items) if items.iter().all(Json::is_string) => Value::Array(Array::String(
            items
                .into_iter()
                .map(|i| StringValue::from(i.as_str().unwrap_or_default().to_string()))
                .collect(),
        )),
        other => Value::String(other.to_string().into()),
    }
}

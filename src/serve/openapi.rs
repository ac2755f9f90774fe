//! The API's description, `/openapi.json`, made from the handlers' own `path`
//! attributes as their routes are registered (utoipa-axum), and `/docs`, a page that
//! lists it (no script, nothing fetched from elsewhere). What every operation may
//! answer besides its own success (the errors of `error.rs`, each `{"detail"}`) and
//! its path parameters are added here once rather than on each handler.

use super::AppState;
use axum::Router;
use axum::http::header;
use axum::routing::get;
use std::sync::Arc;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Schema, Type,
};
use utoipa::{PartialSchema, ToSchema};

/// Every refusal: what is wrong, in words.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ErrorBody {
    /// What is wrong, naming the field, the node or the id.
    detail: String,
}

/// The statuses any operation may answer with an [`ErrorBody`], and when.
const ERRORS: [(&str, &str); 9] = [
    (
        "400",
        "The request cannot be taken as it is (LangGraph answers these with 400 too).",
    ),
    ("401", "No API key, or a wrong one (`serve --api-key-env`)."),
    ("404", "What the path or the body names is not there."),
    (
        "409",
        "The thread or run is busy, or in a state that refuses this.",
    ),
    (
        "413",
        "The body is larger than the server takes (`serve --max-body`).",
    ),
    ("422", "A field does not fit: the message names it."),
    ("500", "The store failed (its message says how)."),
    (
        "502",
        "A service the request needs failed (the embeddings endpoint).",
    ),
    ("503", "The server is stopping."),
];

/// An operation: its method and path.
type Op = (&'static str, &'static str);

/// Path parameters, each from a response's field.
type Params = &'static [(&'static str, &'static str)];

/// Where the ids a response gives lead: from the operation `(method, path)` that
/// answers 200, to each operation `(method, path)`, its path parameters from the
/// response's fields (OpenAPI links: a client, or a tester, follows them).
const LINKS: [(Op, &[Op], Params); 6] = [
    (
        ("post", "/assistants"),
        &[
            ("get", "/assistants/{id}"),
            ("patch", "/assistants/{id}"),
            ("delete", "/assistants/{id}"),
            ("get", "/assistants/{id}/graph"),
            ("get", "/assistants/{id}/schemas"),
            ("get", "/assistants/{id}/subgraphs"),
            ("post", "/assistants/{id}/versions"),
            ("post", "/assistants/{id}/latest"),
        ],
        &[("id", "$response.body#/assistant_id")],
    ),
    (
        ("post", "/threads"),
        &[
            ("get", "/threads/{id}"),
            ("patch", "/threads/{id}"),
            ("delete", "/threads/{id}"),
            ("post", "/threads/{id}/copy"),
            ("get", "/threads/{id}/state"),
            ("post", "/threads/{id}/state"),
            ("get", "/threads/{id}/history"),
            ("post", "/threads/{id}/history"),
        ],
        &[("id", "$response.body#/thread_id")],
    ),
    (
        ("post", "/threads"),
        &[
            ("post", "/threads/{tid}/runs"),
            ("get", "/threads/{tid}/runs"),
            ("post", "/threads/{tid}/runs/wait"),
            ("post", "/threads/{tid}/runs/stream"),
            ("get", "/threads/{tid}/stream"),
            ("post", "/threads/{thread_id}/runs/crons"),
        ],
        &[
            ("tid", "$response.body#/thread_id"),
            ("thread_id", "$response.body#/thread_id"),
        ],
    ),
    (
        ("post", "/threads/{tid}/runs"),
        &[
            ("get", "/threads/{tid}/runs/{rid}"),
            ("delete", "/threads/{tid}/runs/{rid}"),
            ("post", "/threads/{tid}/runs/{rid}/cancel"),
            ("get", "/threads/{tid}/runs/{rid}/join"),
            ("get", "/threads/{tid}/runs/{rid}/stream"),
        ],
        &[
            ("tid", "$response.body#/thread_id"),
            ("rid", "$response.body#/run_id"),
        ],
    ),
    (
        ("post", "/runs"),
        &[("get", "/runs/{rid}/join"), ("get", "/runs/{rid}/stream")],
        &[("rid", "$response.body#/run_id")],
    ),
    (
        ("post", "/runs/crons"),
        &[
            ("get", "/runs/crons/{cron_id}"),
            ("patch", "/runs/crons/{cron_id}"),
            ("delete", "/runs/crons/{cron_id}"),
        ],
        &[("cron_id", "$response.body#/cron_id")],
    ),
];

/// An operation's id: its method and path, which no two operations share (the
/// handlers' names do: each module has its `get_one`).
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        id.push('_');
        id.push_str(seg.trim_start_matches('{').trim_end_matches('}'));
    }
    id.replace(['.', '-'], "_")
}

fn operation<'a>(
    api: &'a mut OpenApi,
    method: &str,
    path: &str,
) -> Option<&'a mut utoipa::openapi::path::Operation> {
    let item = api.paths.paths.get_mut(path)?;
    match method {
        "get" => item.get.as_mut(),
        "post" => item.post.as_mut(),
        "put" => item.put.as_mut(),
        "patch" => item.patch.as_mut(),
        "delete" => item.delete.as_mut(),
        _ => None,
    }
}

/// The description as served: the handlers' paths with the errors and path
/// parameters every operation has, ids of their own and the links between them.
pub(super) fn finish(mut api: OpenApi) -> OpenApi {
    api.info.title = "Switchyard".into();
    api.info.version = env!("CARGO_PKG_VERSION").into();
    api.info.description = Some(
        "The LangGraph Agent Server API as `switchyard serve` answers it; docs/server.md says where and why it differs from LangGraph's.".into(),
    );
    api.info.license = None;
    api.info.contact = None;
    let components = api.components.get_or_insert_with(Default::default);
    components
        .schemas
        .insert("ErrorBody".into(), ErrorBody::schema());
    // With `serve --api-key-env`/`--api-key-file`, every endpoint but `/ok`, `/info`,
    // these two and the page needs the key; without, none does.
    components.add_security_scheme(
        "api_key",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "x-api-key",
            "The server's key, when it has one (or `Authorization: Bearer <key>`).",
        ))),
    );
    api.security = Some(vec![
        SecurityRequirement::new("api_key", Vec::<String>::new()),
        SecurityRequirement::default(),
    ]);
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in [
            ("get", &mut item.get),
            ("post", &mut item.post),
            ("put", &mut item.put),
            ("patch", &mut item.patch),
            ("delete", &mut item.delete),
        ] {
            if let Some(op) = op {
                op.operation_id = Some(operation_id(method, path));
            }
        }
        let params: Vec<String> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(str::to_string)
            .collect();
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            let given = op.parameters.get_or_insert_with(Vec::new);
            for name in &params {
                let named = |p: &RefOr<Parameter>| matches!(p, RefOr::T(p) if &p.name == name && p.parameter_in == ParameterIn::Path);
                if !given.iter().any(named) {
                    given.push(RefOr::T(path_param(name)));
                }
            }
            if given.is_empty() {
                op.parameters = None;
            }
            // OpenAPI requires every response to say what it is.
            for response in op.responses.responses.values_mut() {
                if let RefOr::T(r) = response
                    && r.description.is_empty()
                {
                    r.description = "What was asked.".into();
                }
            }
            // `/ok` and `/info` refuse nothing.
            let errors = if matches!(path.as_str(), "/ok" | "/info") {
                &[][..]
            } else {
                &ERRORS[..]
            };
            for &(status, why) in errors {
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| {
                        RefOr::T(
                            ResponseBuilder::new()
                                .description(why)
                                .content(
                                    "application/json",
                                    ContentBuilder::new()
                                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                                        .build(),
                                )
                                .build(),
                        )
                    });
            }
        }
    }
    for ((method, path), targets, fields) in LINKS {
        let mut links = Vec::new();
        for (to_method, to_path) in targets {
            let mut link = LinkBuilder::new().operation_id(operation_id(to_method, to_path));
            for (param, from) in fields {
                if to_path.contains(&format!("{{{param}}}")) {
                    link = link.parameter(*param, *from);
                }
            }
            links.push((operation_id(to_method, to_path), link.build()));
        }
        if let Some(RefOr::T(ok)) =
            operation(&mut api, method, path).and_then(|op| op.responses.responses.get_mut("200"))
        {
            for (name, link) in links {
                ok.links.insert(name, RefOr::T(link));
            }
        }
    }
    api
}

fn path_param(name: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::String).build(),
        ))))
        .build()
}

/// `/openapi.json` and `/docs`, open without a key as LangGraph's are.
pub(super) fn routes(api: OpenApi) -> Router<AppState> {
    let json: Arc<str> = Arc::from(api.to_pretty_json().unwrap_or_else(|_| "{}".into()));
    let page: Arc<str> = Arc::from(page(&api));
    Router::new()
        .route(
            "/openapi.json",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    json.to_string(),
                )
            }),
        )
        .route(
            "/docs",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    page.to_string(),
                )
            }),
        )
}

/// The description as a page: each operation, its parameters and what it answers.
fn page(api: &OpenApi) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Switchyard API</title>\n<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}section{border-top:1px solid #ddd;padding:.5rem 0}.m{font-weight:bold;display:inline-block;width:4.5rem}</style></head><body>\n<h1>Switchyard API</h1>\n<p>The LangGraph Agent Server API as <code>switchyard serve</code> answers it. The machine-readable description: <a href=\"/openapi.json\">/openapi.json</a>.</p>\n",
    );
    for (path, item) in &api.paths.paths {
        for (method, op) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
        ] {
            let Some(op) = op else { continue };
            out.push_str(&format!(
                "<section id=\"{}\"><p><span class=\"m\">{method}</span> <code>{}</code></p>\n",
                escape(&format!("{method} {path}")),
                escape(path)
            ));
            if let Some(summary) = &op.summary {
                out.push_str(&format!("<p><b>{}</b></p>\n", escape(summary)));
            }
            if let Some(description) = &op.description {
                out.push_str(&format!("<p>{}</p>\n", escape(description)));
            }
            let codes: Vec<&str> = op.responses.responses.keys().map(String::as_str).collect();
            out.push_str(&format!("<p>Answers: {}</p></section>\n", codes.join(", ")));
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

// The request bodies of the operations that make things, as the description gives
// them (the handlers read the fields one by one and say which does not fit; these say
// what a client may send). Each field may be left out unless marked required.

/// A free-form JSON object.
type Obj = std::collections::HashMap<String, serde_json::Value>;

#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct AssistantCreate {
    /// A served graph's name.
    #[schema(example = "greet")]
    graph_id: String,
    /// A UUID; a new one when none.
    assistant_id: Option<String>,
    /// `configurable`: values for the graph's constants; other keys kept.
    #[schema(value_type = Option<Object>)]
    config: Option<Obj>,
    /// Values for the graph's constants (not with `config.configurable`).
    #[schema(value_type = Option<Object>)]
    context: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Obj>,
    name: Option<String>,
    description: Option<String>,
    if_exists: Option<IfExists>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "snake_case")]
pub(super) enum IfExists {
    Raise,
    DoNothing,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ThreadCreate {
    thread_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Obj>,
    if_exists: Option<IfExists>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "snake_case")]
pub(super) enum Multitask {
    Reject,
    Enqueue,
    Interrupt,
    Rollback,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct RunCreate {
    /// A served graph's name, or a made assistant's id.
    #[schema(example = "greet")]
    assistant_id: String,
    /// The state fields the run starts with.
    #[schema(value_type = Option<Object>)]
    input: Option<Obj>,
    /// `resume` (an interrupt's answer), `update`, `goto`.
    #[schema(value_type = Option<Object>)]
    command: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    config: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    context: Option<Obj>,
    /// `values`, `updates`, `messages-tuple`, `events`, `debug`, `tasks`,
    /// `checkpoints`, `custom`, or a list of them.
    stream_mode: Option<serde_json::Value>,
    multitask_strategy: Option<Multitask>,
    #[schema(example = "create")]
    if_not_exists: Option<String>,
    checkpoint_id: Option<String>,
    on_completion: Option<String>,
    on_disconnect: Option<String>,
    stream_resumable: Option<bool>,
    /// Switchyard's own: node executions allowed in this run.
    max_steps: Option<u64>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct CronCreate {
    #[schema(example = "greet")]
    assistant_id: String,
    /// As cron writes it: `*/5 * * * *`.
    #[schema(example = "0 9 * * 1-5")]
    schedule: String,
    /// An IANA time zone.
    timezone: Option<String>,
    /// RFC 3339.
    end_time: Option<String>,
    #[schema(value_type = Option<Object>)]
    input: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    config: Option<Obj>,
    #[schema(value_type = Option<Object>)]
    context: Option<Obj>,
    enabled: Option<bool>,
    on_run_completed: Option<String>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ItemPut {
    #[schema(example = json!(["users", "u1"]))]
    namespace: Vec<String>,
    key: String,
    #[schema(value_type = Object)]
    value: Obj,
    /// Minutes to keep it.
    ttl: Option<f64>,
    index: Option<serde_json::Value>,
}

/// One server-sent event of a stream: its name (the stream mode, `metadata`, `error`,
/// `end`), its JSON as text, and an id to resume after (`Last-Event-ID`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct StreamEvent {
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

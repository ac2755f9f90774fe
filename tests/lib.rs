//! The one integration test binary: one module per topic, sharing `util`.

mod check_fixtures;
mod cli;
mod cli_json;
mod cli_run;
mod doubles;
mod examples;
mod format_schema;
mod hardening;
mod language;
mod layers;
mod llm;
mod lsp;
mod mcp;
mod no_panic;
mod postgres;
mod render;
mod run;
mod seeds_browser;
mod seeds_tools;
mod serve;
mod store;
mod telemetry;
mod testing;
mod util;
mod wheel;

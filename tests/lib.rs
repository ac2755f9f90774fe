//! The one integration test binary: one module per topic, sharing `util`.

mod check_fixtures;
mod cli;
mod examples;
mod format_schema;
mod llm;
mod no_panic;
mod render;
mod util;

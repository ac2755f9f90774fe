//! `finalize`: renders the response and ends the run with its outcome. `fail`: renders
//! its message and fails the run with its outcome.

use super::Step;
use super::cx::NodeCx;
use crate::graph::{FailBody, FinalizeBody};
use serde_json::Value as Json;

pub(crate) fn run(cx: &NodeCx<'_>, body: &FinalizeBody) -> Step {
    let response = match body.response.as_deref().map(|t| cx.render(t)).transpose() {
        Ok(r) => r,
        Err(e) => {
            return Step::fail(format!("response: {e}"));
        }
    };
    let result = std::sync::Arc::new(response.clone().map_or(Json::Null, Json::String));
    let writes = match (&body.output, &response) {
        (Some(f), Some(_)) => vec![(*f, result.clone())],
        _ => Vec::new(),
    };
    Step::Done {
        result,
        writes,
        route: None,
        finish: Some((body.outcome.clone(), response)),
        tokens: 0,
    }
}

pub(crate) fn fail(cx: &NodeCx<'_>, body: &FailBody) -> Step {
    match cx.render(&body.message) {
        Ok(message) => Step::FailRun {
            outcome: body.outcome.clone(),
            message,
        },
        Err(e) => Step::fail(format!("message: {e}")),
    }
}

//! `interrupt`: renders a payload and pauses the run; a resume brings the answer.

use super::Step;
use super::cx::NodeCx;
use crate::graph::InterruptBody;
use serde_json::Value as Json;

pub(crate) fn run(cx: &NodeCx<'_>, body: &InterruptBody) -> Step {
    let payload = match &body.payload {
        Some(tpl) => match cx.value(tpl) {
            Ok(p) => p,
            Err(e) => {
                return Step::fail(format!("payload: {e}"));
            }
        },
        None => Json::Object(Default::default()),
    };
    Step::Pause { payload }
}

/// Checks a resume payload against the interrupt's schema.
pub(crate) fn check_payload(body: &InterruptBody, payload: &Json) -> Result<(), String> {
    let Some(schema) = &body.resume_schema else {
        return Ok(());
    };
    crate::json_schema::check(schema, payload)
}

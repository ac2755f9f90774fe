//! `policy`: ordered rules decide allow / confirm / deny, with a reason.

use super::Step;
use super::cx::NodeCx;
use crate::graph::PolicyBody;
use crate::spec::Decision;
use serde_json::json;

pub(crate) fn run(cx: &NodeCx<'_>, body: &PolicyBody) -> Step {
    let mut chosen = None;
    for rule in &body.rules {
        match cx.eval(rule.when) {
            Ok(v) if v.is_true() => {
                chosen = Some(rule);
                break;
            }
            Ok(_) => {}
            Err(e) => {
                return Step::fail(format!("rule `{}`: {e}", cx.graph.expr_source(rule.when)));
            }
        }
    }
    let (decision, reason, name) = match chosen {
        Some(rule) => (rule.decision, rule.reason.as_deref(), rule.name.clone()),
        None => (body.default, Some(body.default_reason.as_str()), None),
    };
    let reason = match reason.map(|t| cx.render(t)).transpose() {
        Ok(r) => r.unwrap_or_default(),
        Err(e) => {
            return Step::fail(format!("reason: {e}"));
        }
    };
    let decision = match decision {
        Decision::Allow => "allow",
        Decision::Confirm => "confirm",
        Decision::Deny => "deny",
    };
    let result = json!({ "decision": decision, "reason": reason, "rule": name });
    let result = std::sync::Arc::new(result);
    Step::done(result.clone(), vec![(body.output, result)])
}

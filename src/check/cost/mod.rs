//! The most a run may cost, proved before it runs (`validate --cost`): model calls,
//! tool calls, side-effecting tool calls, tokens and dollars, each as a number with
//! the way through the graph that reaches it, or unbounded with what makes it so.
//! A graph's `[budget]` is held against them here: a worst case above a budget is an
//! error, one that cannot be proved a warning (the runner enforces budgets too).
//!
//! [`loops`] bounds how often each node runs, [`unit`] what one run of it costs,
//! [`total`] the costliest way through the graph.

mod amount;
mod loops;
mod total;
mod unit;

pub use amount::Amount;

use super::{Cx, DiagExt};
use crate::source::Sources;
use crate::spec::{GraphSpec, KindSpec, Price, Prices, Sp};
use crate::topology::Topology;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

pub(super) const MODEL_CALLS: usize = 0;
pub(super) const TOOL_CALLS: usize = 1;
pub(super) const SIDE_EFFECTS: usize = 2;
pub(super) const TOKENS: usize = 3;
pub(super) const USD: usize = 4;

/// One amount per measure, in the order of [`MEASURES`].
pub(super) type Costs = [Amount; 5];

/// The measures' names, as reports and `[budget]` name them.
pub const MEASURES: [&str; 5] = [
    "model_calls",
    "tool_calls",
    "side_effect_calls",
    "tokens",
    "usd",
];

/// Subgraphs nested deeper than this are not followed (the checker refuses a graph
/// that includes itself; this only keeps a long chain of files from going on).
const MAX_DEPTH: usize = 16;

/// A graph's worst case per run.
#[derive(Debug, Serialize)]
pub struct CostReport {
    pub graph: String,
    /// `usd` only when the graph gives prices.
    pub measures: Vec<Worst>,
    /// Every loop, with how many times it may go round.
    pub loops: Vec<LoopBound>,
}

#[derive(Debug, Serialize)]
pub struct Worst {
    pub measure: &'static str,
    /// None: no bound can be proved (`unbounded` says why).
    pub worst: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unbounded: Option<Arc<str>>,
    /// The way through the graph that reaches the worst case.
    pub path: String,
    /// The graph's `[budget]` of this measure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct LoopBound {
    pub nodes: Vec<String>,
    pub times: Option<f64>,
    /// The counter guard that bounds it (`attempts >= 3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unbounded: Option<Arc<str>>,
}

/// The worst case of a graph that passed its checks.
pub fn cost(spec: &GraphSpec, sources: &mut Sources) -> CostReport {
    let analysis = analyse(spec, sources, 0);
    let budgets = budgets(spec);
    let measures = analysis
        .worst
        .iter()
        .enumerate()
        .filter(|(m, _)| *m != USD || analysis.priced)
        .map(|(m, w)| Worst {
            measure: MEASURES[m],
            worst: w.amount.value(),
            unbounded: match &w.amount {
                Amount::Unbounded(why) => Some(why.clone()),
                Amount::At(_) => None,
            },
            path: w.path.clone(),
            budget: budgets[m].as_ref().map(|(b, _)| *b),
        })
        .collect();
    // In file order (by each loop's first node), whatever order the walk found them in.
    let mut cyclic: Vec<&loops::Component> =
        analysis.loops.comps.iter().filter(|c| c.cyclic).collect();
    cyclic.sort_by_key(|c| c.members[0]);
    let loops = cyclic
        .into_iter()
        .map(|c| LoopBound {
            nodes: c
                .members
                .iter()
                .map(|&i| spec.nodes[i].name.get_ref().clone())
                .collect(),
            times: c.times.value(),
            guard: c.guard.clone(),
            unbounded: match &c.times {
                Amount::Unbounded(why) => Some(why.clone()),
                Amount::At(_) => None,
            },
        })
        .collect();
    CostReport {
        graph: spec
            .graph
            .name
            .as_ref()
            .map_or_else(String::new, |n| n.get_ref().clone()),
        measures,
        loops,
    }
}

struct Analysis {
    loops: loops::Loops,
    worst: Vec<total::Worst>,
    priced: bool,
}

fn analyse(spec: &GraphSpec, sources: &mut Sources, depth: usize) -> Analysis {
    let topo = Topology::build(spec);
    let loops = loops::Loops::build(spec, &topo);
    let prices = prices(spec).ok().flatten();
    let mut children = HashMap::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        let KindSpec::Graph(g) = &node.body else {
            continue;
        };
        let Some(path) = &g.graph else { continue };
        if depth >= MAX_DEPTH {
            continue;
        }
        let file = spec.resolve(path.get_ref());
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Some(child) = crate::load::load_str(&file, &text, sources).spec else {
            continue;
        };
        let inner = analyse(&child, sources, depth + 1);
        let totals: Costs = std::array::from_fn(|m| inner.worst[m].amount.clone());
        children.insert(i, totals);
    }
    let units = unit::Units {
        spec,
        loops: &loops,
        prices: prices.as_ref(),
        children,
    };
    let costs: Vec<Costs> = (0..spec.nodes.len()).map(|i| units.of(i)).collect();
    let worst = (0..MEASURES.len())
        .map(|m| total::worst(spec, &loops, &costs, m))
        .collect();
    Analysis {
        loops,
        worst,
        priced: prices.is_some(),
    }
}

/// The graph's prices by model: none when it gives none; `Err` why a price file
/// cannot be used. The compiler reads them here too, so the runner counts dollars by
/// the prices the checker saw.
pub(crate) fn prices(spec: &GraphSpec) -> Result<Option<HashMap<String, Price>>, String> {
    Ok(Some(match &spec.llm.prices {
        None => return Ok(None),
        Some(Prices::Table(t)) => t.iter().map(|(m, p)| (m.get_ref().clone(), *p)).collect(),
        Some(Prices::File(path)) => {
            let text = std::fs::read_to_string(spec.resolve(path.get_ref()))
                .map_err(|e| format!("cannot read `{}`: {e}", path.get_ref()))?;
            crate::spec::parse_prices(&text)
                .map_err(|why| format!("`{}` is not a price file: {why}", path.get_ref()))?
                .into_iter()
                .collect()
        }
    }))
}

/// Each measure's budget and where it is written.
fn budgets(spec: &GraphSpec) -> [Option<(f64, std::ops::Range<usize>)>; 5] {
    let b = &spec.budget;
    let int = |v: &Option<Sp<u64>>| v.as_ref().map(|n| (*n.get_ref() as f64, n.span()));
    [
        int(&b.model_calls),
        int(&b.tool_calls),
        None,
        int(&b.tokens),
        b.usd.as_ref().map(|n| (*n.get_ref(), n.span())),
    ]
}

/// The check pass: a price file that cannot be used; a budget the worst case is above
/// (an error, at the loop that weighs most), or that cannot be proved (a warning).
pub(super) fn check(cx: &mut Cx<'_>, sources: &mut Sources) {
    let spec = cx.spec;
    if let (Some(Prices::File(path)), Err(why)) = (&spec.llm.prices, prices(spec)) {
        cx.error("bad-prices", path.span(), why).with_label(
            "prices of models: `\"<model>\" = { input = <usd>, output = <usd> }` per line",
        );
    }
    if spec.budget.is_empty() || cx.diags.iter().any(|d| d.is_error()) {
        return;
    }
    let analysis = analyse(spec, sources, 0);
    for (m, budget) in budgets(spec).into_iter().enumerate() {
        let Some((budget, span)) = budget else {
            continue;
        };
        let w = &analysis.worst[m];
        let name = MEASURES[m];
        if m == USD && !analysis.priced {
            cx.error("no-prices", span, "a `usd` budget needs the models' prices")
                .with_label("no `[llm] prices`")
                .with_help("add `[llm.prices]` with `\"<model>\" = { input = <usd>, output = <usd> }` (dollars per million tokens), or `prices = \"<file>\"`");
            continue;
        }
        match &w.amount {
            Amount::At(worst) if *worst > budget => {
                let shown = show(m, *worst);
                let message = format!(
                    "a run may use {shown} {}, above `[budget] {name} = {budget}`",
                    unit_name(m)
                );
                let (at, label) = match w.heaviest.filter(|_| !w.by_steps) {
                    Some(c) => {
                        let comp = &analysis.loops.comps[c];
                        let head = &spec.nodes[comp.members[0]];
                        let times = comp.times.value().unwrap_or(0.0);
                        (
                            head.name.span(),
                            match &comp.guard {
                                Some(g) => format!("this loop may go round {times} times (`{g}`)"),
                                None => format!("this loop may go round {times} times"),
                            },
                        )
                    }
                    None if w.by_steps => (
                        spec.graph
                            .max_steps
                            .as_ref()
                            .map_or(span.clone(), |s| s.span()),
                        "the run may take this many steps".to_string(),
                    ),
                    None => (span.clone(), format!("the budget is {budget}")),
                };
                cx.error("over-budget", at, message)
                    .with_label(label)
                    .with_help(format!(
                        "the worst case goes {}; lower its bound, or raise the budget",
                        w.path
                    ));
            }
            Amount::Unbounded(why) => {
                cx.diags.push(
                    crate::diagnostic::Diagnostic::warning(
                        "unproved-budget",
                        cx.file,
                        span,
                        format!("`[budget] {name}` cannot be proved before the run"),
                    )
                    .label(why.to_string())
                    .help("the runner still ends a run that goes past it, as at a limit"),
                );
            }
            Amount::At(_) => {}
        }
    }
}

fn unit_name(m: usize) -> &'static str {
    [
        "model calls",
        "tool calls",
        "side-effecting tool calls",
        "tokens",
        "dollars",
    ][m]
}

/// A measure's number as people read it: whole numbers, and dollars to the cent's
/// hundredth.
fn show(m: usize, n: f64) -> String {
    if m == USD {
        format!("{n:.4}")
    } else {
        format!("{n}")
    }
}

//! Every graph in `graphs/` loads, checks clean and renders (our own SVG lays it out
//! with no box over another), and Graphviz accepts its DOT; each seed's graph keeps the
//! shape its seed requires.

use crate::util::{examples, graphviz_svg};
use switchyard::render::{Format, render};
use switchyard::spec::{GraphSpec, KindSpec, NodeKind};
use switchyard::{Sources, validate_file};

fn load(path: &std::path::Path) -> GraphSpec {
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources).unwrap();
    let rendered: String = v.diagnostics.iter().map(|d| d.render(&sources)).collect();
    assert!(v.is_valid(), "{} is not valid:\n{rendered}", path.display());
    assert!(
        v.diagnostics.is_empty(),
        "{} has warnings:\n{rendered}",
        path.display()
    );
    v.spec.unwrap()
}

#[test]
fn every_example_validates_and_renders() {
    let paths = examples();
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "browser_agent.toml",
            "chat_agent.toml",
            "confirm_execute.toml",
            "reason_act_observe.toml",
            "remember.toml",
            "screen_explorer.toml",
            "tool_agent.toml"
        ]
    );
    for path in paths {
        let spec = load(&path);
        let dot = render(&spec, Format::Dot);
        let svg = graphviz_svg(&dot, &path.display().to_string());
        for node in &spec.nodes {
            assert!(
                svg.contains(&format!("<title>{}</title>", node.name.get_ref())),
                "{} missing from the SVG",
                node.name.get_ref()
            );
        }
        let mermaid = render(&spec, Format::Mermaid);
        for node in &spec.nodes {
            assert!(mermaid.contains(&format!("n_{}", node.name.get_ref())));
        }
        // Its worst case per run, as `validate --cost` shows it.
        let cost = switchyard::cost(&spec, &mut Sources::new());
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        insta::assert_snapshot!(
            format!("cost_{stem}"),
            serde_json::to_string_pretty(&cost).unwrap()
        );
        let own = render(&spec, Format::Svg);
        let boxes = node_boxes(&own);
        for node in &spec.nodes {
            assert!(
                boxes.iter().any(|(name, _)| name == node.name.get_ref()),
                "{} missing from our own SVG of {}",
                node.name.get_ref(),
                path.display()
            );
        }
        for (i, (a, ra)) in boxes.iter().enumerate() {
            for (b, rb) in &boxes[i + 1..] {
                let apart = ra[0] + ra[2] <= rb[0]
                    || rb[0] + rb[2] <= ra[0]
                    || ra[1] + ra[3] <= rb[1]
                    || rb[1] + rb[3] <= ra[1];
                assert!(
                    apart,
                    "{a} and {b} overlap in our SVG of {}",
                    path.display()
                );
            }
        }
        assert!(
            !own.contains("NaN") && !own.contains("inf"),
            "{}",
            path.display()
        );
    }
}

/// Each node's box in our own SVG: its name, and x, y, width, height.
fn node_boxes(svg: &str) -> Vec<(String, [f64; 4])> {
    let attr = |tag: &str, name: &str| -> f64 {
        let start = tag.find(&format!(" {name}=\"")).expect("the attribute") + name.len() + 3;
        let end = start + tag[start..].find('"').expect("its end");
        tag[start..end].parse().expect("a number")
    };
    svg.split("<g class=\"node ")
        .skip(1)
        .map(|g| {
            let name_at = g.find("data-node=\"").expect("a name") + 11;
            let name = &g[name_at..name_at + g[name_at..].find('"').unwrap()];
            let rect = &g[g.find("<rect").expect("a box")..];
            let rect = &rect[..rect.find("/>").unwrap()];
            (
                name.to_string(),
                [
                    attr(rect, "x"),
                    attr(rect, "y"),
                    attr(rect, "width"),
                    attr(rect, "height"),
                ],
            )
        })
        .collect()
}

fn names_of(spec: &GraphSpec, kind: NodeKind) -> Vec<&str> {
    spec.nodes
        .iter()
        .filter(|n| *n.kind.get_ref() == kind)
        .map(|n| n.name.get_ref().as_str())
        .collect()
}

#[test]
fn browser_agent_keeps_every_seed_node() {
    let spec = load("graphs/browser_agent.toml".as_ref());
    let mut nodes: Vec<&str> = spec
        .nodes
        .iter()
        .map(|n| n.name.get_ref().as_str())
        .collect();
    nodes.sort_unstable();
    assert_eq!(
        nodes,
        [
            "confirm_interrupt",
            "execute_action",
            "finalize_blocked",
            "finalize_cancelled",
            "finalize_denied",
            "finalize_done",
            "finalize_limit",
            "ingest_user_input",
            "look_before_execute",
            "look_before_reopen",
            "manual_interrupt",
            "maybe_observe",
            "maybe_stop_or_continue",
            "plan_action",
            "policy_gate",
            "reopen_before_execute",
            "reopen_page",
            "validate_action",
        ]
    );
    assert_eq!(names_of(&spec, NodeKind::Finalize).len(), 5);
    assert_eq!(
        names_of(&spec, NodeKind::Interrupt),
        ["confirm_interrupt", "manual_interrupt"]
    );
    assert!(spec.graph.require_policy && spec.graph.max_steps.is_some());
    // Observe always takes the screenshot and the snapshot together, in one node.
    let observe = spec.node("maybe_observe").unwrap();
    let KindSpec::Mcp(m) = &observe.body else {
        panic!("maybe_observe is not an mcp_call")
    };
    assert_eq!(m.calls.len(), 2);
    assert!(observe.only_if.is_some());
}

#[test]
fn screen_explorer_keeps_17_nodes_and_5_llm_nodes_with_cache_and_fallback() {
    let spec = load("graphs/screen_explorer.toml".as_ref());
    assert_eq!(spec.nodes.len(), 17);
    let mut llm = names_of(&spec, NodeKind::LlmStructured);
    llm.sort_unstable();
    assert_eq!(
        llm,
        [
            "choose_action",
            "detect_progress",
            "should_continue",
            "switch_policy",
            "verify"
        ]
    );
    for node in &spec.nodes {
        if let KindSpec::Llm(l) = &node.body {
            assert!(
                l.cache.is_some() && l.fallback.is_some(),
                "{} lacks a cache or a fallback",
                node.name.get_ref()
            );
        }
    }
    assert!(
        spec.graph.max_steps.is_some()
            && spec.graph.max_tokens.is_some()
            && spec.graph.max_wall_time.is_some()
    );
}

/// `switchyard diff`'s changes for an edit of each seed graph: a policy rule, a route's
/// case, a loop's route, a node's settings and reducer, a map's concurrency; and an
/// edited prompt file read by both versions' copies.
#[test]
fn an_edit_of_each_seed_graph_diffs_to_what_it_changed() {
    let copy = |dir: &std::path::Path| {
        for part in ["graphs", "prompts", "schemas"] {
            let out = std::process::Command::new("cp")
                .arg("-r")
                .arg(crate::util::root().join(part))
                .arg(dir)
                .status()
                .unwrap();
            assert!(out.success());
        }
    };
    let (old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(old.path());
    copy(new.path());
    let edits: [(&str, &[(&str, &str)]); 5] = [
        (
            "browser_agent",
            &[(
                r#"decision = "deny", reason = "only http(s)"#,
                r#"decision = "confirm", reason = "only http(s)"#,
            )],
        ),
        (
            "confirm_execute",
            &[(
                "list_parameters = \"tool_selection\"",
                "list_parameters = \"ask_user\"",
            )],
        ),
        (
            "reason_act_observe",
            &[(
                "if = \"reasoning.finish == true\"",
                "if = \"reasoning.finish\"",
            )],
        ),
        (
            "screen_explorer",
            &[(
                "timeout = \"60s\"\non_error = \"stop\"\nnext = \"provision_app\"",
                "timeout = \"90s\"\non_error = \"stop\"\nnext = \"provision_app\"",
            )],
        ),
        (
            "tool_agent",
            &[("concurrency = 4, errors", "concurrency = 2, errors")],
        ),
    ];
    let mut shown = Vec::new();
    for (name, replace) in edits {
        let path = new.path().join(format!("graphs/{name}.toml"));
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (from, to) in replace {
            assert!(text.contains(from), "{name}: `{from}` is not in the file");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(&path, text).unwrap();
        let load = |dir: &std::path::Path| {
            switchyard::load_graph(&dir.join(format!("graphs/{name}.toml")))
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let (a, b) = (load(old.path()), load(new.path()));
        shown.push(format!("{name}:"));
        shown.extend(
            switchyard::graph::diff(&a.shape, &b.shape)
                .iter()
                .map(|c| format!("  {c}")),
        );
    }
    // A prompt edited: every node that reads it is as written; the file's text changed.
    let prompt = new.path().join("prompts/tool_agent/model.j2");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, format!("{text}\nAnswer briefly.\n")).unwrap();
    let a = switchyard::load_graph(&old.path().join("graphs/tool_agent.toml")).unwrap();
    let b = switchyard::load_graph(&new.path().join("graphs/tool_agent.toml")).unwrap();
    shown.push("tool_agent, its prompt edited too:".into());
    shown.extend(
        switchyard::graph::diff(&a.shape, &b.shape)
            .iter()
            .map(|c| format!("  {c}")),
    );
    insta::assert_snapshot!(shown.join("\n"));
}

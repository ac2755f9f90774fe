//! DOT and Mermaid output, snapshotted, and the DOT checked by Graphviz.

use crate::util::graphviz_svg;
use switchyard::render::{Format, render};
use switchyard::{Sources, validate_file};

fn spec(path: &str) -> switchyard::spec::GraphSpec {
    let mut sources = Sources::new();
    validate_file(path.as_ref(), &mut sources)
        .unwrap()
        .spec
        .expect("loads")
}

#[test]
fn showcase_dot() {
    let dot = render(&spec("tests/fixtures/render/showcase.toml"), Format::Dot);
    insta::assert_snapshot!("showcase_dot", dot);
    let svg = graphviz_svg(&dot, "showcase");
    // Unreachable nodes and unknown targets are visibly flagged in the drawing.
    assert!(svg.contains("(unreachable)") && svg.contains("(unknown node)"));
}

#[test]
fn showcase_mermaid() {
    let mermaid = render(
        &spec("tests/fixtures/render/showcase.toml"),
        Format::Mermaid,
    );
    insta::assert_snapshot!("showcase_mermaid", mermaid);
}

/// Laid out by Switchyard (no Graphviz), for the server's page: the same graph.
#[test]
fn showcase_svg() {
    let svg = render(&spec("tests/fixtures/render/showcase.toml"), Format::Svg);
    insta::assert_snapshot!("showcase_svg", svg);
}

#[test]
fn a_subgraph_is_drawn_as_a_cluster_entered_from_its_node() {
    let spec = spec("tests/fixtures/run/parent.toml");
    let dot = render(&spec, Format::Dot);
    insta::assert_snapshot!("subgraph_dot", dot);
    let svg = graphviz_svg(&dot, "subgraph");
    assert!(
        svg.contains("cluster_delegate") && svg.contains("delegate/ask"),
        "{svg}"
    );
    insta::assert_snapshot!("subgraph_mermaid", render(&spec, Format::Mermaid));
}

/// Every graph of graphs/ and every fixture that is TOML at all (many do not validate:
/// they are drawn anyway), with its Mermaid text and its SVG picture.
fn every_drawing() -> Vec<serde_json::Value> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "toml")
                && !switchyard::testing::is_test_file(&path)
            {
                out.push(path);
            }
        }
    }
    let root = crate::util::root();
    let mut paths = Vec::new();
    walk(&root.join("graphs"), &mut paths);
    walk(&root.join("tests/fixtures"), &mut paths);
    paths
        .iter()
        .filter_map(|path| {
            let mut sources = Sources::new();
            let spec = validate_file(path, &mut sources).ok()?.spec?;
            let file = path.strip_prefix(&root).unwrap().display().to_string();
            Some(serde_json::json!({
                "file": file,
                "mermaid": render(&spec, Format::Mermaid),
                "svg": render(&spec, Format::Svg),
            }))
        })
        .collect()
}

/// Mermaid 11's own parser and renderer (npm `mermaid`, in Debian's Chromium) take every
/// drawing, and Chromium, measuring the SVG pictures' text, finds no label on another
/// label or on a box.
#[test]
fn every_drawing_parses_in_mermaid_and_no_svg_label_lies_on_another_or_on_a_box() {
    let drawings = every_drawing();
    assert!(drawings.len() > 150, "{} drawings", drawings.len());
    let mut child = std::process::Command::new(crate::util::root().join("node_modules/.bin/node"))
        .arg("tests/render/drawings.mjs")
        .current_dir(crate::util::root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node runs: `bash .ci/setup` installs it");
    let input = serde_json::to_vec(&drawings).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&input).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "drawings.mjs failed");
    let results: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), drawings.len());
    let mermaid_failed: Vec<_> = results
        .iter()
        .filter(|r| r["mermaid"]["ok"] != true)
        .map(|r| format!("{}: {}", r["file"], r["mermaid"]["error"]))
        .collect();
    assert!(mermaid_failed.is_empty(), "{mermaid_failed:#?}");
    let overlapping: Vec<_> = results
        .iter()
        .filter(|r| r["svg"]["overlaps"] != serde_json::json!([]))
        .map(|r| format!("{}: {}", r["file"], r["svg"]["overlaps"]))
        .collect();
    assert!(overlapping.is_empty(), "{overlapping:#?}");

    // What Mermaid drew of the parallel branches: START, END, seven nodes and the two
    // bars; twelve edges, the four of a branch's way in and out through the bars.
    let parallel = results
        .iter()
        .find(|r| r["file"] == "tests/fixtures/run/parallel.toml")
        .unwrap();
    assert_eq!(
        parallel["mermaid"],
        serde_json::json!({"ok": true, "nodes": 11, "bars": 2, "edges": 12, "labels": 0})
    );
    // Nine nodes, START, END and four bars; seventeen edges; the route's two cases
    // each named once (`true` on the way into its fork bar, not on both branches).
    let routed = results
        .iter()
        .find(|r| r["file"] == "tests/fixtures/render/forks.toml")
        .unwrap();
    assert_eq!(
        routed["mermaid"],
        serde_json::json!({"ok": true, "nodes": 15, "bars": 4, "edges": 17, "labels": 2})
    );
}

/// Branches that run together leave a fork bar and meet at a join bar in every format;
/// a route case that starts branches names its case once, into its fork bar.
#[test]
fn parallel_branches_fork_and_join_at_bars() {
    let spec = spec("tests/fixtures/render/forks.toml");
    insta::assert_snapshot!("forks_dot", render(&spec, Format::Dot));
    insta::assert_snapshot!("forks_mermaid", render(&spec, Format::Mermaid));
    insta::assert_snapshot!("forks_svg", render(&spec, Format::Svg));
    let svg = graphviz_svg(&render(&spec, Format::Dot), "forks");
    assert!(
        svg.contains("__fork__split") && svg.contains("__join__merge.true"),
        "{svg}"
    );
}

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

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

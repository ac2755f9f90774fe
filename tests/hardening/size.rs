//! Graphs far larger than anyone writes: the checker and `validate --cost` go through
//! them in time that grows with their size, and never deeper than the stack (each test
//! runs on a test thread's 2 MiB stack, where a walk that recursed once a node
//! overflowed at a few thousand).

use std::path::Path;
use switchyard::{Sources, validate_str};

/// A chain of `n` set nodes; with `ring`, the last goes back to the first until `x`
/// reaches 3.
fn chain(n: usize, ring: bool) -> String {
    let mut text = String::from(
        "[graph]\nname = \"big\"\nentry = \"n0\"\n\n[budget]\nmodel_calls = 5\n\n[state.x]\ntype = \"int\"\n\n",
    );
    for i in 0..n {
        text.push_str(&format!(
            "[nodes.n{i}]\nkind = \"set\"\nset = {{ x = \"x + 1\" }}\n"
        ));
        if i + 1 < n {
            text.push_str(&format!("next = \"n{}\"\n\n", i + 1));
        } else if ring {
            text.push_str(&format!("[nodes.n{i}.route]\nwhen = [{{ case = \"done\", if = \"x >= 3\", to = \"END\" }}]\ndefault = \"n0\"\n\n"));
        } else {
            text.push_str("next = \"END\"\n\n");
        }
    }
    text
}

#[test]
fn a_chain_and_a_loop_of_20000_nodes_are_checked_and_costed() {
    for ring in [false, true] {
        let text = chain(20_000, ring);
        let mut sources = Sources::new();
        let v = validate_str(Path::new("big.toml"), &text, &mut sources);
        let rendered: Vec<String> = v.diagnostics.iter().map(|d| d.render(&sources)).collect();
        // No model calls: the budget holds however often the loop goes round.
        assert!(v.diagnostics.is_empty(), "{rendered:?}");
        let cost = switchyard::cost(v.spec.as_ref().unwrap(), &mut sources);
        let calls = &cost.measures[0];
        assert_eq!(calls.worst, Some(0.0));
        // A way through 20,000 nodes is shown by its ends.
        let expected = if ring {
            "(n0, n1, n2, n3, n4, n5, n6, n7, ... 19990 more ..., n19998, n19999) x ?"
        } else {
            "n0 -> n1 -> n2 -> n3 -> n4 -> n5 -> n6 -> n7 -> n8 -> n9 -> ... 19987 more ... -> n19997 -> n19998 -> n19999"
        };
        assert_eq!(calls.path, expected);
    }
}

#[test]
fn names_of_20000_characters_are_not_compared_edit_by_edit() {
    let long = "a".repeat(20_000);
    let mut text =
        format!("[graph]\nname = \"long\"\nentry = \"{long}0\"\n\n[state.x]\ntype = \"int\"\n\n");
    for i in 0..40 {
        let next = if i < 39 {
            format!("{long}{}", i + 1)
        } else {
            format!("{long}x")
        };
        text.push_str(&format!(
            "[nodes.{long}{i}]\nkind = \"set\"\nset = {{ x = \"x + 1\" }}\nnext = \"{next}\"\n\n"
        ));
    }
    let mut sources = Sources::new();
    let v = validate_str(Path::new("long.toml"), &text, &mut sources);
    let unknown: Vec<&switchyard::Diagnostic> = v
        .diagnostics
        .iter()
        .filter(|d| d.code == "unknown-node")
        .collect();
    assert_eq!(unknown.len(), 1);
    // No did-you-mean for a name no person typed.
    assert_eq!(unknown[0].help, None);
}

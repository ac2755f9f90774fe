//! Every broken graph in `tests/fixtures/check/` produces exactly the diagnostics its
//! `# expect:` line names, and the full rendered text matches its snapshot.

use crate::util::files;
use switchyard::{Sources, validate_file};

#[test]
fn broken_graphs_report_every_problem() {
    let fixtures = files("tests/fixtures/check", "err_", ".toml");
    assert!(
        fixtures.len() >= 25,
        "only {} broken fixtures",
        fixtures.len()
    );
    for path in fixtures {
        let text = std::fs::read_to_string(&path).expect("read fixture");
        let mut expected: Vec<&str> = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect:"))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()))
            .split(',')
            .map(str::trim)
            .collect();
        expected.sort_unstable();
        let mut sources = Sources::new();
        let v = validate_file(&path, &mut sources).expect("fixture is readable");
        assert!(!v.is_valid(), "{} validated clean", path.display());
        let mut codes: Vec<&str> = v.diagnostics.iter().map(|d| d.code).collect();
        codes.sort_unstable();
        let rendered: String = v
            .diagnostics
            .iter()
            .map(|d| d.render(&sources) + "\n")
            .collect();
        assert_eq!(
            codes,
            expected,
            "diagnostics of {}:\n{rendered}",
            path.display()
        );
        let name = path
            .file_stem()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        insta::assert_snapshot!(name, rendered);
    }
}

#[test]
fn json_diagnostics_carry_positions() {
    let mut sources = Sources::new();
    let v = validate_file(
        "tests/fixtures/check/err_unknown_node.toml".as_ref(),
        &mut sources,
    )
    .unwrap();
    let d = v
        .diagnostics
        .iter()
        .find(|d| d.code == "unknown-node")
        .unwrap()
        .to_json(&sources);
    assert_eq!(
        (
            d.file.as_str(),
            d.line,
            d.column,
            d.end_column,
            d.message.as_str(),
            d.help.as_deref()
        ),
        (
            "tests/fixtures/check/err_unknown_node.toml",
            13,
            8,
            18,
            "unknown node `validate`",
            Some("did you mean `validate_action`?")
        )
    );
}

/// Settings OpenAI's models refuse are warned of (the graph stays valid): each once,
/// at the model that refuses it.
#[test]
fn settings_a_provider_refuses_are_warned_of() {
    let mut sources = Sources::new();
    let v = validate_file(
        "tests/fixtures/check/warn_refused_setting.toml".as_ref(),
        &mut sources,
    )
    .unwrap();
    assert!(v.is_valid());
    let rendered: String = v
        .diagnostics
        .iter()
        .map(|d| d.render(&sources) + "\n")
        .collect();
    insta::assert_snapshot!("warn_refused_setting", rendered);
}

//! The JSON Schema of the graph file format accepts every example and valid fixture and
//! rejects files with misspelt keys or unknown kinds, so editors flag what we flag.

use crate::util::{examples, files, root};

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("schemas/graph-file.schema.json"))
        .expect("format schema exists");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("format schema is JSON");
    jsonschema::draft7::new(&schema).expect("format schema compiles")
}

fn as_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let value: toml::Value =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(value).unwrap()
}

#[test]
fn accepts_every_example_and_valid_fixture() {
    let v = validator();
    let mut paths = examples();
    paths.extend(files("tests/fixtures/render", "showcase", ".toml"));
    // Constants, a required input, a fail node; a strict opt-out.
    paths.push("tests/fixtures/run/language.toml".into());
    paths.push("tests/fixtures/llm/plan_loose.toml".into());
    paths.push("tests/fixtures/run/map.toml".into());
    paths.push("tests/fixtures/llm/sampling.toml".into());
    paths.push("tests/fixtures/run/parallel.toml".into());
    paths.push("tests/fixtures/mcp/auth_http.toml".into());
    paths.push("tests/fixtures/run/parent.toml".into());
    paths.push("tests/fixtures/run/parallel_route.toml".into());
    paths.push("tests/fixtures/llm/chat_tools.toml".into());
    paths.push("tests/fixtures/run/cost_loop.toml".into());
    for path in paths {
        let errors: Vec<String> = v
            .iter_errors(&as_json(&path))
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} does not fit the format schema:\n{}",
            path.display(),
            errors.join("\n")
        );
    }
}

#[test]
fn rejects_misspelt_keys_and_kinds() {
    let v = validator();
    for name in [
        "err_unknown_key",
        "err_bad_kind",
        "err_server_transport",
        "err_bad_duration",
        "err_bad_type",
        "err_edge_shape",
        "err_no_resume_schema",
        "err_fail_node",
        "err_llm_options",
    ] {
        let path = std::path::PathBuf::from(format!("tests/fixtures/check/{name}.toml"));
        assert!(
            !v.is_valid(&as_json(&path)),
            "{name} fits the format schema"
        );
    }
}

/// Every graph file of the repository (the examples and every fixture but the broken
/// ones) as taplo, the editors' TOML checker from npm, checks it against the format's
/// schema: no false errors. The files beside them that are not graphs (a price file,
/// graph tests) are left out.
#[test]
fn taplo_finds_no_false_error_in_any_graph_file() {
    let taplo = root().join("node_modules/.bin/taplo");
    assert!(
        taplo.exists(),
        "`{}` is missing: run `bash .ci/setup` (npm ci)",
        taplo.display()
    );
    fn graphs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                graphs(&path, out);
            } else if name.ends_with(".toml")
                && !name.starts_with("err_")
                && name != "prices.toml"
                && !name.ends_with(".test.toml")
            {
                out.push(path);
            }
        }
    }
    let mut paths = examples()
        .into_iter()
        .map(|p| root().join(p))
        .collect::<Vec<_>>();
    graphs(&root().join("tests/fixtures"), &mut paths);
    assert!(paths.len() > 80, "only {} graph files", paths.len());
    let schema = format!(
        "file://{}",
        root().join("schemas/graph-file.schema.json").display()
    );
    let out = std::process::Command::new(&taplo)
        .arg("check")
        .arg("--schema")
        .arg(&schema)
        .args(&paths)
        .current_dir(root())
        .output()
        .expect("taplo runs");
    assert!(
        out.status.success(),
        "taplo finds errors:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

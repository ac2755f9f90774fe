//! Prompt and schema files outside the graph's root, special files and oversized ones.

use super::json_of;
use crate::util::switchyard;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A graph in `dir/graph/` whose state field takes its schema from `schema`.
fn graph_reading(dir: &Path, schema: &str, extra: &str) -> PathBuf {
    let graph = dir.join("graph");
    std::fs::create_dir_all(&graph).unwrap();
    let file = graph.join("g.toml");
    std::fs::write(
        &file,
        format!(
            r#"[graph]
name = "g"
entry = "done"
{extra}
[state.a]
type = "json?"
schema = "{schema}"

[nodes.done]
kind = "finalize"
outcome = "done"
response = "ok"
"#
        ),
    )
    .unwrap();
    file
}

/// The first label of the one diagnostic `validate` gives `file`, and its help.
fn refusal(file: &Path) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["validate", "--format", "json"])
        .arg(file)
        .env("SWITCHYARD_PROBE_SECRET", "leaked-environment-7731")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("leaked-environment-7731"), "{stdout}");
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let diags = json_of(&stdout);
    let d = &diags[0]["diagnostics"];
    assert_eq!(d.as_array().unwrap().len(), 1, "{d}");
    (
        d[0]["label"].as_str().unwrap().to_string(),
        d[0]["help"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn graph_files_outside_the_root_are_refused_and_special_files_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::write(base.join("shared.json"), "{}").unwrap();
    std::fs::create_dir_all(base.join("graph")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", base.join("graph/link.json")).unwrap();
    std::os::unix::fs::symlink("../shared.json", base.join("graph/up.json")).unwrap();
    let fifo = base.join("graph/fifo.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(base.join("graph/big.json"), " ".repeat((1 << 20) + 1)).unwrap();
    let outside = "a graph reads only files under its root";
    for (schema, label, help) in [
        (
            "/proc/self/environ",
            "absolute paths are not taken: a graph's files live under its root",
            outside,
        ),
        (
            "/dev/zero",
            "absolute paths are not taken: a graph's files live under its root",
            outside,
        ),
        (
            "../shared.json",
            "the path goes above the graph's root through `..`",
            outside,
        ),
        (
            "link.json",
            "the path leads outside the graph's root (to `/etc/passwd`) through a symbolic link",
            outside,
        ),
        (
            "up.json",
            &format!(
                "the path leads outside the graph's root (to `{}`) through a symbolic link",
                base.canonicalize().unwrap().join("shared.json").display()
            ),
            outside,
        ),
        (
            "fifo.json",
            "it is not a regular file",
            "prompts and schemas are regular files of at most 1048576 bytes",
        ),
        (
            "big.json",
            "it has 1048577 bytes; at most 1048576 are read",
            "prompts and schemas are regular files of at most 1048576 bytes",
        ),
    ] {
        let file = graph_reading(base, schema, "");
        let (got_label, got_help) = refusal(&file);
        assert_eq!(got_label, label, "{schema}");
        assert!(got_help.starts_with(help), "{schema}: {got_help}");
    }
}

#[test]
fn allow_outside_root_reads_shared_files_but_still_no_special_ones() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::write(base.join("shared.json"), r#"{ "type": "object" }"#).unwrap();
    let allow = "allow_outside_root = true\n";
    let file = graph_reading(base, "../shared.json", allow);
    switchyard(&["validate", file.to_str().unwrap()])
        .run()
        .code(0);
    let abs = base.join("shared.json");
    let file = graph_reading(base, abs.to_str().unwrap(), allow);
    switchyard(&["validate", file.to_str().unwrap()])
        .run()
        .code(0);
    for (special, kernel) in [("/dev/zero", "/dev"), ("/proc/self/environ", "/proc")] {
        let file = graph_reading(base, special, allow);
        let (label, _) = refusal(&file);
        assert_eq!(
            label,
            format!("it is in `{kernel}`, the kernel's view of the system, not a file of a graph"),
        );
        // Nor in the text form, which quotes source lines.
        let out = switchyard(&["validate", file.to_str().unwrap()])
            .env("SWITCHYARD_PROBE_SECRET", "leaked-environment-7731")
            .run()
            .code(3);
        assert!(
            !out.stderr.contains("leaked-environment-7731"),
            "{}",
            out.stderr
        );
    }
}

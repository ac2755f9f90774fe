//! `/openapi.json` and `/docs`: the API described from its handlers, every operation
//! there (snapshot), and schemathesis (from PyPI) fuzzing the server with it: no
//! answer is a 5xx, and every answer's status, content type and body are those the
//! description gives.

use super::server::serve;
use crate::util::root;
use serde_json::Value as Json;
use std::time::Duration;

/// Each documented operation, `METHOD path: summary (statuses)`.
fn operations(api: &Json) -> String {
    let mut lines = Vec::new();
    for (path, item) in api["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let statuses: Vec<&str> = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            lines.push(format!(
                "{} {path}: {} ({}) [{}]",
                method.to_uppercase(),
                op["summary"].as_str().unwrap_or("?"),
                statuses.join(" "),
                op["operationId"].as_str().unwrap_or("?"),
            ));
        }
    }
    lines.join("\n")
}

#[tokio::test]
async fn the_api_is_described_from_its_handlers_and_schemathesis_finds_it_true() {
    let s = serve(&[
        "tests/fixtures/serve/three.toml",
        "tests/fixtures/serve_assistants",
    ])
    .start()
    .await;
    let h = s.http();
    let r = h.get("/openapi.json").await;
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/json"))
    );
    let api = r.json();
    assert_eq!(api["openapi"], "3.1.0");
    assert_eq!(api["info"]["title"], "Switchyard");
    // Every operation's id is its own.
    let ids: Vec<&str> = api["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|i| i.as_object().unwrap().values())
        .map(|op| op["operationId"].as_str().unwrap())
        .collect();
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "operation ids repeat: {ids:?}");
    insta::assert_snapshot!(operations(&api));
    // The page lists each path, and fetches nothing from elsewhere.
    let page = h.get("/docs").await;
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    for path in api["paths"].as_object().unwrap().keys() {
        assert!(
            page.text.contains(&format!("<code>{path}</code>")),
            "/docs lacks {path}"
        );
    }
    assert!(!page.text.contains("<script"), "the page runs no script");

    let schemathesis = root().join("target/py/bin/schemathesis");
    assert!(
        schemathesis.exists(),
        "`{}` is missing: run `bash .ci/setup` (it installs schemathesis from PyPI there)",
        schemathesis.display()
    );
    // Its cache of found crashes goes in a directory of the test's own, not the tree.
    let work = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(&schemathesis)
            .current_dir(work.path())
            .args([
                "run",
                &format!("{}/openapi.json", s.url),
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                "--max-examples",
                "10",
                "--seed",
                "7",
                "--workers",
                "1",
                "--request-timeout",
                "20",
                "--no-shrink",
                "--max-failures",
                "100",
            ])
            .env("SCHEMATHESIS_HOOKS", "")
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("schemathesis ends in time")
    .expect("schemathesis runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found the server and its description apart:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It tested every operation, and each phase passed.
    let tested = format!("Tested: {}", ids.len());
    assert!(
        text.contains(&tested),
        "not every operation tested:\n{text}"
    );
    for phase in ["Coverage", "Fuzzing", "Stateful"] {
        assert!(
            text.contains(&format!("✅ {phase}")),
            "{phase} did not pass:\n{text}"
        );
    }
}

//! The web page at `/` in a real browser: Playwright from npm drives Debian's chromium
//! (`tests/serve/page/*.mjs`; no browser is downloaded) against a `switchyard serve`
//! child process. The script prints what the page showed, one JSON line per step, and
//! saves screenshots under `target/page-screenshots/` (the test's artifacts).

use super::server::serve;
use crate::util::root;
use std::time::Duration;

/// Runs `tests/serve/page/<script>` against `url`; its lines.
async fn browse(script: &str, url: &str) -> Vec<String> {
    browse_with(script, url, &[]).await
}

async fn browse_with(script: &str, url: &str, env: &[(&str, &str)]) -> Vec<String> {
    let playwright = root().join("node_modules/playwright-core/package.json");
    assert!(
        playwright.exists(),
        "`{}` is missing: run `bash .ci/setup` (npm ci) for the page tests",
        playwright.display()
    );
    let shots = root().join("target/page-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let out = tokio::process::Command::new(root().join("node_modules/.bin/node"))
        .arg(root().join("tests/serve/page").join(script))
        .current_dir(root())
        .env("API_URL", url)
        .env("SHOTS", &shots)
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the browser script ends in time")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

#[tokio::test]
async fn the_page_starts_a_run_answers_its_interrupt_travels_back_and_forks() {
    // A graph that validates when the server starts, then is broken by an edit.
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(root().join("tests/fixtures/ui/approve.toml"))
        .unwrap()
        .replace("name = \"approve\"", "name = \"broken\"");
    std::fs::write(dir.path().join("broken.toml"), &good).unwrap();
    std::fs::create_dir(dir.path().join("schemas")).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/ui/schemas/confirm.json"),
        dir.path().join("schemas/confirm.json"),
    )
    .unwrap();
    let s = serve(&["tests/fixtures/ui", dir.path().to_str().unwrap()])
        .start()
        .await;
    let h = s.http();
    h.until("/assistants/broken", |a| a["metadata"]["valid"] == true)
        .await;
    std::fs::write(
        dir.path().join("broken.toml"),
        good.replace("entry = \"count\"", "entry = \"nowhere\""),
    )
    .unwrap();
    h.until("/assistants/broken", |a| a["metadata"]["valid"] == false)
        .await;

    // The page and its files come from the binary.
    let index = h.get("/").await;
    assert_eq!(index.status, 200);
    assert_eq!(
        index.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(index.text.contains(r#"<script src="/ui/app.js"></script>"#));
    assert!(!index.text.contains("http"), "nothing from the network");
    assert_eq!(index.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        index.header("content-security-policy"),
        Some(
            "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
        )
    );
    assert_eq!(
        h.get("/ui/app.js").await.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );

    let lines = browse("approve.mjs", &s.url).await;
    let text = lines
        .join("\n")
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(text);

    // A copy with no body copies the whole thread; an unknown checkpoint is named.
    h.post("/threads", serde_json::json!({ "thread_id": "c" }))
        .await;
    let ran = h
        .post(
            "/threads/c/runs/wait",
            serde_json::json!({ "assistant_id": "approve", "input": { "budget": 1 } }),
        )
        .await;
    assert_eq!(ran.status, 200, "{}", ran.text);
    let whole = h.post_raw("/threads/c/copy", "").await;
    assert_eq!(whole.status, 200, "{}", whole.text);
    let copy = whole.json()["thread_id"].as_str().unwrap().to_string();
    assert_ne!(copy, "c");
    let history = |t: String| {
        let h = &h;
        async move {
            let r = h
                .post(&format!("/threads/{t}/history"), serde_json::json!({}))
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["values"].clone())
                .collect::<Vec<_>>()
        }
    };
    let (original, copied) = (history("c".into()).await, history(copy).await);
    assert!(original.len() > 1, "{original:?}");
    assert_eq!(copied, original, "every checkpoint's state, copied");
    let missing = h
        .post(
            "/threads/c/copy",
            serde_json::json!({ "checkpoint_id": "00000000-0000-7000-8000-0000000003e7" }),
        )
        .await;
    assert_eq!(
        (missing.status, missing.json()),
        (
            404,
            serde_json::json!({ "detail": "thread `c` has no checkpoint number 999" })
        )
    );
}

/// Seed 000's browser agent, started from the page with scripted model answers: it
/// types a message into a shop's form and asks before the click that sends it. The
/// confirmation is answered on the page: a wrong reference is refused and the thread
/// waits still, then "Yes" sends the form.
#[tokio::test]
async fn seed_000_is_started_from_the_page_and_its_confirmation_answered_by_a_click() {
    use serde_json::json;
    let message = "Happy birthday, Ada!";
    let gift = super::browser::gift_agent(message).await;
    let (s, page, sent, llm) = (&gift.serve, &gift.page, &gift.sent, &gift.llm);
    let goal = format!("Send a gift card from {page} with the message '{message}'.");
    let lines = browse_with("browser_agent.mjs", &s.url, &[("GOAL", &goal)]).await;
    insta::assert_snapshot!(lines.join("\n"));
    assert_eq!(*sent.lock().unwrap(), [message], "sent once, after the Yes");
    assert_eq!(llm.seen().len(), 4);

    // The screenshot the page showed, as the API hands it out; only a hash names one.
    let h = s.http();
    let threads = h.post("/threads/search", json!({})).await.json();
    let shot = &threads[0]["values"]["last_screenshot"];
    assert_eq!(shot["mime_type"], "image/png", "{shot}");
    let png = h
        .get(&format!("/blobs/{}", shot["blob"].as_str().unwrap()))
        .await;
    assert_eq!(png.status, 200);
    assert_eq!(png.header("content-type"), Some("image/png"));
    // A tool's bytes are never run as a page of the server's origin.
    assert_eq!(png.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(
        png.header("content-security-policy"),
        Some("sandbox; default-src 'none'")
    );
    assert!(png.text.starts_with("\u{FFFD}PNG"), "a PNG");
    let none = h.get("/blobs/sha256:..%2F..%2Fetc%2Fpasswd").await;
    assert_eq!(
        (none.status, none.json()),
        (
            404,
            json!({ "detail": "no blob `sha256:../../etc/passwd`" })
        )
    );
}

/// A server whose authorization server wants a person: the page's step links to the
/// sign-in page, the person signs in in a new tab, and the run the page shows goes on.
#[tokio::test]
async fn a_sign_in_the_run_asks_for_is_a_link_on_the_page_and_the_run_goes_on() {
    let person = tokio::task::spawn_blocking(|| {
        crate::mcp::node_server("tests/servers/oauth_person.mjs", &[])
    })
    .await
    .unwrap();
    let s = serve(&["tests/fixtures/mcp/oauth/person.toml"])
        .env(
            "PERSON_MCP_URL",
            &format!("http://127.0.0.1:{}/mcp", person.port),
        )
        .start()
        .await;
    let lines = browse("sign_in.mjs", &s.url).await;
    insta::assert_snapshot!(lines.join("\n"));
    drop(person);
}

//! The web page at `/` in a real browser: Playwright from npm drives Debian's chromium
//! (`tests/serve/page/*.mjs`; no browser is downloaded) against a `switchyard serve`
//! child process. The script prints what the page showed, one JSON line per step, and
//! saves screenshots under `target/page-screenshots/` (the test's artifacts).

use super::server::serve;
use crate::util::root;
use serde_json::{Value as Json, json};
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
    h.post("/threads", json!({ "thread_id": "c" })).await;
    let ran = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "approve", "input": { "budget": 1 } }),
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
            let r = h.post(&format!("/threads/{t}/history"), json!({})).await;
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
            json!({ "checkpoint_id": "00000000-0000-7000-8000-0000000003e7" }),
        )
        .await;
    assert_eq!(
        (missing.status, missing.json()),
        (
            404,
            json!({ "detail": "thread `c` has no checkpoint number 999" })
        )
    );
}

/// Seed 000's browser agent, started from the page with scripted model answers: it
/// types a message into a shop's form and asks before the click that sends it. The
/// confirmation is answered on the page: a wrong reference is refused and the thread
/// waits still, then "Yes" sends the form.
#[tokio::test]
async fn seed_000_is_started_from_the_page_and_its_confirmation_answered_by_a_click() {
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

/// A chat page as LangGraph front ends are written (React and `useStream` from
/// LangGraph's React SDK, bundled from npm, served on 127.0.0.1 by the script) chats
/// with `chat_agent` in chromium: the reply streams in as text, one approval is shown
/// and answered, a message is typed while it waits, a reply is stopped and the next
/// message queued behind it, an answer is regenerated (2 of 2), an earlier message
/// edited (a fork), an image sent, and a reload shows the same conversation.
#[tokio::test]
async fn a_use_stream_chat_page_streams_approves_stops_regenerates_edits_and_reloads() {
    use crate::llm::server::{Answer, Reply, Server as Llm};
    let ws = tempfile::tempdir().unwrap();
    let path = |f: &str| ws.path().join(f).display().to_string();
    let text = |t: &str| Reply {
        content: Some(t.into()),
        tool_calls: Vec::new(),
    };
    let write = |f: &str, content: &str| {
        Answer::Reply(Reply {
            content: None,
            tool_calls: vec![(
                "write_file".into(),
                json!({ "path": path(f), "content": content }).to_string(),
            )],
        })
    };
    let story = "Once upon a time there was a graph that ran and ran ".repeat(8);
    let model = Llm::start(vec![
        Answer::Drip(
            Duration::from_millis(80),
            text("Hello! I can read the files in your workspace, and I ask before I write one."),
        ),
        write("plan.txt", "Friday"),
        Answer::Reply(text("Saved plan.txt.")),
        write("other.txt", "x"),
        Answer::Reply(text("Then I will not write it.")),
        Answer::Drip(Duration::from_millis(300), text(&story)),
        Answer::Reply(text("Hi.")),
        Answer::Reply(text("Hello there.")),
        Answer::Reply(text("Bye.")),
        Answer::Reply(text("A red dot.")),
    ])
    .await;
    let s = serve(&["graphs/chat_agent.toml"])
        .arg("--cors")
        .arg("*")
        .env("OPENAI_BASE_URL", model.url())
        .env("OPENAI_API_KEY", "test")
        .env("CHAT_AGENT_WORKSPACE", ws.path().to_str().unwrap())
        .start()
        .await;
    let page_dir = root().join("target/chat-page");
    let lines = browse_with(
        "chat.mjs",
        &s.url,
        &[
            ("PAGE_DIR", page_dir.to_str().unwrap()),
            ("IMAGE_BASE64", DOT_PNG),
        ],
    )
    .await;
    let mut steps: Vec<Json> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The reply grew on the page as it streamed, as text, never JSON.
    let streamed = steps.remove(0);
    assert_eq!(streamed["step"], "streamed");
    let seen: Vec<&str> = streamed["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let reply = "Hello! I can read the files in your workspace, and I ask before I write one.";
    assert!(seen.len() >= 2, "the reply appeared in pieces: {seen:?}");
    assert_eq!(seen.last(), Some(&reply));
    assert!(
        seen.windows(2)
            .all(|w| w[0].len() < w[1].len() && w[1].starts_with(w[0])),
        "{seen:?}"
    );
    // The thread the page made (its id is new each time).
    let reloaded = steps.iter_mut().find(|s| s["step"] == "reloaded").unwrap();
    let thread = reloaded["thread"].as_str().unwrap().to_string();
    reloaded.as_object_mut().unwrap().remove("thread");
    // The rest, with the workspace's path made stable.
    let rest: Vec<String> = steps
        .iter()
        .map(|s| s.to_string().replace(&path(""), "<ws>/"))
        .collect();
    insta::assert_snapshot!(rest.join("\n"));

    // What the tools did: the approved write only.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("plan.txt")).unwrap(),
        "Friday"
    );
    assert!(!ws.path().join("other.txt").exists());
    // Every scripted answer was asked for, the image as an image part.
    let seen = model.seen();
    assert_eq!(seen.len(), 10);
    let sent = seen[9].body["messages"].as_array().unwrap();
    assert_eq!(
        sent.last().unwrap()["content"],
        json!([
            { "type": "text", "text": "What is this?" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{DOT_PNG}") } },
        ])
    );
    // The stopped run was cancelled on the server, the others went through.
    let runs = s
        .http()
        .get(&format!("/threads/{thread}/runs"))
        .await
        .json();
    let mut statuses = super::server::statuses(&runs);
    statuses.sort();
    assert_eq!(
        statuses,
        [
            "interrupted",
            "success",
            "success",
            "success",
            "success",
            "success",
            "success",
            "success",
            "success",
            "success"
        ]
    );
}

/// A 1x1 PNG.
const DOT_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A graph that declares its inputs and its configurable values: the page's form lists
/// only the inputs, then the configuration (a choice for a string with `one_of`), and a
/// run started with a chosen value uses it.
#[tokio::test]
async fn the_run_form_lists_the_inputs_and_the_configuration_the_graph_declares() {
    let s = serve(&["tests/fixtures/serve_assistants/greet.toml"])
        .start()
        .await;
    let lines = browse("configure.mjs", &s.url).await;
    insta::assert_snapshot!(lines.join("\n"));
}

/// A graph edited while served: its page names the version and lists the edit's changes
/// as `switchyard diff` prints them.
#[tokio::test]
async fn a_reloaded_graphs_page_lists_what_the_edit_changed() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/diff/two_asks.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two_asks.toml");
    std::fs::write(&file, text.replace("VERSION", "one")).unwrap();
    let s = serve(&[dir.path().to_str().unwrap()])
        .arg("--watch")
        .arg("50ms")
        .start()
        .await;
    let h = s.http();
    let edited = dir.path().join("edited.tmp");
    std::fs::write(&edited, text.replace("VERSION", "two")).unwrap();
    std::fs::rename(&edited, &file).unwrap();
    h.until("/assistants/two_asks/details", |d| d["version"] == 2)
        .await;
    let lines = browse("changes.mjs", &s.url).await;
    insta::assert_snapshot!(lines.join("\n"), @r#"
    {"step":"changes","summary":"Version 2: 2 changes from the version before","changes":["~ node `done`: outcome: \"one\" -> \"two\"","~ node `second`: payload.q: \"'second one'\" -> \"'second two'\""]}
    {"step":"console","problems":[]}
    "#);
}

/// Branches that run together are drawn through a fork and a join bar, and the edges a
/// run took are highlighted through them.
#[tokio::test]
async fn a_run_through_parallel_branches_is_highlighted_through_the_bars() {
    let s = serve(&["tests/fixtures/render/forks.toml"]).start().await;
    let lines = browse("forks.mjs", &s.url).await;
    insta::assert_snapshot!(lines.join("\n"));
}

//! Seed 000, the browser agent, through the server: a thread keeps its browser while it
//! is paused, so text typed into a form before a confirmation is still in the field
//! when the confirmed click sends the form. (From the command line every resume starts
//! a fresh browser, and the text would be gone.) The model's answers come from the
//! scripted server, one per plan.

use super::server::serve;
use crate::llm::server::{Server as Llm, completion};
use crate::seeds_browser::web::{Request, Response, WebApp};
use serde_json::{Value as Json, json};
use std::sync::{Arc, Mutex};

fn decode(form: &str) -> String {
    let bytes = form.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..(i + 3).min(bytes.len())])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The shop with a gift-card form whose message the shop's server keeps.
pub(super) fn shop() -> (WebApp, Arc<Mutex<Vec<String>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let kept = sent.clone();
    let app = WebApp::start("browser_agent/shop", move |r: &Request| {
        match (r.method.as_str(), r.path()) {
            ("POST", "/gift") => {
                let mut sent = kept.lock().unwrap();
                sent.push(decode(&r.form("message").unwrap_or_default()));
                Some(Response::Redirect(format!("/gifts/{}", sent.len())))
            }
            ("GET", p) if p.starts_with("/gifts/") => {
                let sent = kept.lock().unwrap();
                let message = sent.last().cloned().unwrap_or_default();
                Some(Response::Html(
                    200,
                    format!(
                        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>Gift card sent – Corner Shop</title></head>\n<body>\n<h1>Gift card sent</h1>\n<p>Your message: {message}</p>\n</body>\n</html>\n"
                    ),
                ))
            }
            _ => None,
        }
    });
    (app, sent)
}

/// A planned action as the planner's schema has it.
pub(super) fn action(id: &str, kind: &str, fields: Json) -> String {
    let mut a = json!({
        "id": id, "kind": kind, "eid": null, "target": null, "text": null, "url": null,
        "direction": null, "seconds": null, "submit": null, "reason": "step"
    });
    for (k, v) in fields.as_object().unwrap() {
        a[k] = v.clone();
    }
    a.to_string()
}

/// The model's four answers that send a gift card from `page` with `message`: open the
/// page, type the message, click send (the action a person confirms), stop.
pub(super) async fn gift_llm(page: &str, message: &str) -> Llm {
    Llm::start(vec![
        completion(&action("a1", "navigate", json!({ "url": page })), 300, 40),
        completion(
            &action("a3", "type", json!({ "eid": "e6", "target": "Message", "text": message, "submit": false })),
            300,
            40,
        ),
        completion(
            &action("a5", "click", json!({ "eid": "e7", "target": "Send gift card", "reason": "Send the card with the message." })),
            300,
            40,
        ),
        completion(
            &action("a7", "stop", json!({ "text": "Sent the gift card with your message." })),
            300,
            40,
        ),
    ])
    .await
}

/// Seed 000 served beside the gift shop, the model scripted to send a card with
/// `message` (`gift_llm`); what the tests look at, and what must live as long.
pub(super) struct Gift {
    pub(super) serve: super::server::Serve,
    pub(super) llm: Llm,
    /// The shop's page the goal names.
    pub(super) page: String,
    /// The messages the shop was sent.
    pub(super) sent: Arc<Mutex<Vec<String>>>,
    pub(super) app: WebApp,
    _dir: tempfile::TempDir,
}

pub(super) async fn gift_agent(message: &str) -> Gift {
    let (app, sent) = shop();
    let page = format!("{}gift.html", app.url());
    let llm = gift_llm(&page, message).await;
    let dir = tempfile::tempdir().unwrap();
    let serve = serve(&["graphs/browser_agent.toml"])
        .env("OPENAI_BASE_URL", llm.url())
        .env(
            "PLAYWRIGHT_MCP_OUTPUT_DIR",
            dir.path().join("playwright").to_str().unwrap(),
        )
        .start()
        .await;
    Gift {
        serve,
        llm,
        page,
        sent,
        app,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_paused_thread_keeps_its_browser_and_the_text_typed_into_its_form() {
    let message = "Happy birthday, Ada!";
    let gift = gift_agent(message).await;
    let (s, page, sent, llm) = (&gift.serve, &gift.page, &gift.sent, &gift.llm);
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "gift" })).await;
    let paused = h
        .post(
            "/threads/gift/runs/wait",
            json!({
                "assistant_id": "browser_agent",
                "input": { "user_message": format!("Send a gift card from {page} with the message '{message}'.") },
            }),
        )
        .await
        .json();
    let interrupt = &paused["__interrupt__"][0]["value"];
    assert_eq!(interrupt["kind"], "confirm", "{paused}");
    assert_eq!(interrupt["reference"], "a5");
    assert!(
        paused["last_observation"]
            .as_str()
            .unwrap()
            .contains(&format!("[ref=e6]: {message}")),
        "the text is in the field before the pause: {}",
        paused["last_observation"]
    );
    assert_eq!(
        sent.lock().unwrap().len(),
        0,
        "nothing is sent before the confirmation"
    );

    // Confirmed through the API: the kept browser still shows the page, the form keeps
    // the text, and the click sends it.
    let done = h
        .post(
            "/threads/gift/runs/wait",
            json!({ "assistant_id": "browser_agent", "command": { "resume": { "reference": "a5", "confirmed": true } } }),
        )
        .await
        .json();
    assert_eq!(
        done["final_response"], "Sent the gift card with your message.",
        "{done}"
    );
    assert_eq!(*sent.lock().unwrap(), [message]);
    assert!(
        done["browser_tabs"]
            .as_str()
            .unwrap()
            .contains(&format!("]({page})")),
        "the browser still showed the form's page: {}",
        done["browser_tabs"]
    );
    // No page was opened again after the pause: the only navigation is the first.
    let navigations: Vec<String> = gift
        .app
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /gift.html"))
        .collect();
    assert_eq!(navigations, ["GET /gift.html"]);
    assert_eq!(llm.seen().len(), 4);
}

/// Seed 000's recorded question (the first run of the shopping scenario) replayed
/// through the server: the same answers, the same page, the same reply.
#[tokio::test]
async fn seed_000_answers_from_its_recording_through_the_server() {
    let (app, _) = shop();
    let dir = tempfile::tempdir().unwrap();
    let recording = std::fs::read_to_string(
        crate::util::root().join("tests/fixtures/seeds/browser_agent/shopping.1.llm.jsonl"),
    )
    .unwrap()
    .replace("127.0.0.1:APP_PORT", &format!("127.0.0.1:{}", app.port()));
    let replay = dir.path().join("replay.llm.jsonl");
    std::fs::write(&replay, recording).unwrap();
    let s = serve(&["graphs/browser_agent.toml"])
        .arg("--replay")
        .arg(replay.to_str().unwrap())
        .env(
            "PLAYWRIGHT_MCP_OUTPUT_DIR",
            dir.path().join("playwright").to_str().unwrap(),
        )
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "session-7" }))
        .await;
    let done = h
        .post(
            "/threads/session-7/runs/wait",
            json!({
                "assistant_id": "browser_agent",
                "input": { "user_message": format!("How much is the blue mug at {}?", app.url()) },
            }),
        )
        .await
        .json();
    assert_eq!(
        done["final_response"], "The blue mug costs $12.00, and 3 are in stock.",
        "{done}"
    );
    let state = h.get("/threads/session-7/state").await.json();
    assert_eq!(state["metadata"]["outcome"], "done");
    assert_eq!(
        state["values"]["steps"],
        json!([
            format!("navigate a1 ({}): ok", app.url()),
            "type a3 (Search products): ok",
            "click a5 (Blue mug): ok",
        ])
    );
}

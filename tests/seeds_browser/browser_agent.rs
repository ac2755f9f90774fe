//! Seed 000, the browser agent (`graphs/browser_agent.toml`), on the Corner Shop: a
//! small shop (`tests/fixtures/seeds/browser_agent/shop/`) whose orders and sign-in
//! live on its server, as a real shop's would.

use super::scenario::{Scenario, assert_blob, assert_trace, trace};
use super::web::{Request, Response, WebApp};
use serde_json::{Value as Json, json};
use std::sync::{Arc, Mutex};

/// What the shop's server keeps.
#[derive(Default)]
struct Shop {
    orders: Vec<String>,
    /// The code from the phone was entered.
    verified: bool,
    /// The person approved the sign-in on their phone.
    approved: bool,
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>{title}</title></head>\n<body>\n{body}\n</body>\n</html>\n"
    )
}

fn shop() -> (WebApp, Arc<Mutex<Shop>>) {
    let state = Arc::new(Mutex::new(Shop::default()));
    let shared = state.clone();
    let app = WebApp::start("browser_agent/shop", move |r: &Request| {
        let mut shop = shared.lock().unwrap();
        match (r.method.as_str(), r.path()) {
            ("POST", "/order") => {
                shop.orders.push(r.form("item").unwrap_or_default());
                Some(Response::Redirect(format!("/orders/{}", shop.orders.len())))
            }
            ("GET", p) if p.starts_with("/orders/") => Some(Response::Html(
                200,
                page(
                    "Order placed – Corner Shop",
                    &format!(
                        "<h1>Thank you!</h1>\n<p>Order {} is placed: Blue mug, $12.00.</p>\n<p><a href=\"/\">Back to the shop</a></p>",
                        &p["/orders/".len()..]
                    ),
                ),
            )),
            ("POST", "/verify") => {
                shop.verified |= r.form("code").as_deref() == Some("4821");
                Some(Response::Redirect("/account".into()))
            }
            ("GET", "/account") => Some(Response::Html(
                200,
                page(
                    "Your account – Corner Shop",
                    if shop.approved {
                        "<h1>Your account</h1>\n<p>Signed in as Ada Lovelace.</p>\n<p><a href=\"/\">Back to the shop</a></p>"
                    } else if shop.verified {
                        "<h1>Approve the sign-in</h1>\n<p>Approve this sign-in in the Corner Shop app on your phone, then come back.</p>\n<p><a href=\"/\">Back to the shop</a></p>"
                    } else {
                        "<h1>Sign in</h1>\n<p>We sent a 4-digit code to your phone.</p>\n<form method=\"post\" action=\"/verify\">\n  <input type=\"text\" name=\"code\" aria-label=\"Code\">\n  <button>Verify</button>\n</form>\n<p><a href=\"/\">Back to the shop</a></p>"
                    },
                ),
            )),
            _ => None,
        }
    });
    (app, state)
}

fn input(message: &str) -> String {
    json!({ "user_message": message }).to_string()
}

// --- Expected traces, piece by piece (see `scenario::trace`) ----------------------------

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|l| l.to_string()).collect()
}

/// maybe_observe taking the screenshot and the snapshot together.
fn observe(first_in_process: bool) -> Vec<String> {
    let mut v = lines(&["maybe_observe"]);
    if first_in_process {
        v.push("  server_started browser #0".into());
    }
    v.extend(lines(&[
        r#"  browser.browser_take_screenshot {"scale":"css"}"#,
        "  browser.browser_snapshot {}",
        "  -> plan_action",
    ]));
    v
}

/// plan_action answering after `replies` replies (the ones before were not valid).
fn plan(replies: u32) -> Vec<String> {
    let mut v = lines(&["plan_action"]);
    for n in 1..=replies {
        v.push(format!("  llm plan_action #{n} 300+40"));
    }
    v.push("  -> validate_action".into());
    v
}

/// A valid action the policy allows, executed with `call`, then observe again.
fn allowed(call: &str) -> Vec<String> {
    lines(&[
        "validate_action",
        "  -> policy_gate [default]",
        "policy_gate",
        "  -> execute_action [allow]",
        "execute_action",
        call,
        "  -> maybe_stop_or_continue",
        "maybe_stop_or_continue",
        "  -> maybe_observe [default]",
    ])
}

/// A stop action: allowed, nothing executed, finalize_done.
fn stopped() -> Vec<String> {
    lines(&[
        "validate_action",
        "  -> policy_gate [default]",
        "policy_gate",
        "  -> execute_action [allow]",
        "execute_action",
        "  (skipped)",
        "  -> maybe_stop_or_continue",
        "maybe_stop_or_continue",
        "  -> finalize_done [stop]",
        "finalize_done",
    ])
}

fn start(thread: &str, run: u32) -> Vec<String> {
    vec![
        format!("run_started {thread} run {run}"),
        "ingest_user_input".into(),
        "  -> look_before_reopen".into(),
        "look_before_reopen".into(),
    ]
}

/// A thread that never showed a page: nothing to look at, nothing to reopen.
fn nothing_to_reopen() -> Vec<String> {
    lines(&[
        "  (skipped)",
        "  -> reopen_page",
        "reopen_page",
        "  (skipped)",
        "  -> maybe_observe",
    ])
}

/// A fresh browser (every process of the command line starts one): it shows no page,
/// so `to` opens the page again.
fn fresh_browser(to: &str, url: &str) -> Vec<String> {
    lines(&[
        "  server_started browser #0",
        r#"  browser.browser_tabs {"action":"list"}"#,
        &format!("  -> {to}"),
        to,
        &format!(r#"  browser.browser_navigate {{"url":"{url}"}}"#),
    ])
}

fn concat(parts: Vec<Vec<String>>) -> Vec<String> {
    parts.concat()
}

#[track_caller]
fn assert_lines(got: &[String], want: &[String]) {
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_trace(got, &want);
}

/// A planned action as the schema has it: every field, null when unused.
fn action(id: &str, kind: &str, fields: Json) -> Json {
    let mut a = json!({
        "id": id, "kind": kind, "eid": null, "target": null, "text": null, "url": null,
        "direction": null, "seconds": null, "submit": null, "reason": null
    });
    for (k, v) in fields.as_object().unwrap() {
        a[k] = v.clone();
    }
    a
}

fn said(role: &str, content: &str) -> Json {
    json!({ "role": role, "content": content })
}

/// The assistant message plan_action adds: the action as the graph's `tojson` writes it
/// (minijinja's own filter, which Switchyard's environment keeps as it is).
fn planned(a: &Json) -> Json {
    let env = minijinja::Environment::new();
    let text = env
        .render_str(
            "Action {{ a.id }}: {{ a | tojson }}",
            minijinja::value::Serde(json!({ "a": a })),
        )
        .unwrap();
    said("assistant", &text)
}

/// The request plan_action sent, as recorded: n-th exchange of a recording.
fn recorded(s: &Scenario, file: &str, n: usize) -> Json {
    let path = crate::util::root()
        .join("tests/fixtures/seeds/browser_agent")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().nth(n).unwrap();
    serde_json::from_str(&s.app(line)).unwrap()
}

/// The screenshot reference in state names an image in the blob store, and the state
/// holds no image bytes.
#[track_caller]
fn assert_screenshot_by_reference(s: &Scenario, state: &Json) {
    assert_blob(s, &state["last_screenshot"]);
    // base64 of a PNG starts with iVBORw0KGgo: no image is inline anywhere.
    assert!(!state.to_string().contains("iVBORw0KGgo"));
}

/// One chat session (thread `session-7`): a question answered in the browser, then a
/// purchase the policy makes the user confirm. Proves: the chat history lives only in
/// state and carries over between runs of the same thread (the thread id is the session
/// id); the planner's output is checked against its schema (an invalid first reply is
/// sent back and corrected); observe takes the screenshot and the snapshot together,
/// after each action that may change the page; confirm pauses with {reference,
/// confirmed}, one pending interrupt at a time; a wrong reference is refused; declining
/// (on a fork) ends in finalize_cancelled and confirming executes the action
/// (finalize_done).
#[test]
fn a_session_asks_then_buys_after_the_user_confirms() {
    let (app, shop) = shop();
    let mut s = Scenario::new("browser_agent", "shopping", app.port());
    let graph = s.graph();
    let store = s.store();
    let url = app.url();

    // Run 1: a question. The first plan is not a valid action; the reply goes back.
    let question = format!("How much is the blue mug at {url}?");
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-7",
            "--input",
            &input(&question),
        ])
        .code(0);
    let first = trace(&out.events());
    assert_lines(
        &first,
        &concat(vec![
            start("session-7", 0),
            nothing_to_reopen(),
            observe(true),
            plan(2),
            allowed(&format!(r#"  browser.browser_navigate {{"url":"{url}"}}"#)),
            observe(false),
            plan(1),
            allowed(
                r#"  browser.browser_type {"element":"Search products","target":"e4","text":"mug","submit":true}"#,
            ),
            observe(false),
            plan(1),
            allowed(r#"  browser.browser_click {"element":"Blue mug","target":"f1e6"}"#),
            observe(false),
            plan(1),
            stopped(),
            lines(&[
                "server_stopped browser",
                r#"run_finished finished "done" after 28 steps, 1700 tokens: "The blue mug costs $12.00, and 3 are in stock.""#,
            ]),
        ]),
    );
    let correction = recorded(&s, "shopping.1.llm.jsonl", 1)["messages"].clone();
    assert_eq!(
        correction[3],
        said(
            "assistant",
            &format!(r#"{{"id": "a1", "kind": "open", "url": "{url}"}}"#)
        )
    );
    assert_eq!(
        correction[4],
        said(
            "user",
            "That reply is not valid: the reply does not fit the schema: \"eid\" is a required property; \"target\" is a required property; \"text\" is a required property; \"direction\" is a required property; \"seconds\" is a required property; \"submit\" is a required property; \"reason\" is a required property; at `/kind`: \"open\" is not one of \"click\", \"type\" or 5 other candidates. Reply again, with the problem fixed."
        )
    );

    // Run 2 on the same thread: the browser is fresh, so the mug's page is reopened;
    // buying needs the user's confirmation.
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-7",
            "--input",
            &input("Buy it, please."),
        ])
        .code(4);
    let buy = action(
        "a9",
        "click",
        json!({ "eid": "e7", "target": "Buy now", "reason": "The user wants to buy the blue mug." }),
    );
    let reason = "click on \"Buy now\" may be irreversible: The user wants to buy the blue mug.";
    let payload = json!({ "kind": "confirm", "reference": "a9", "reason": reason, "action": buy });
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-7", 1),
            fresh_browser("reopen_page", &format!("{url}mug.html")),
            lines(&["  -> maybe_observe"]),
            observe(false),
            plan(1),
            lines(&[
                "validate_action",
                "  -> policy_gate [default]",
                "policy_gate",
                "  -> confirm_interrupt [confirm]",
                "confirm_interrupt",
                &format!("interrupted confirm_interrupt {payload}"),
                "server_stopped browser",
                "run_finished interrupted null after 8 steps, 340 tokens: null",
            ]),
        ]),
    );
    assert!(
        out.stderr.starts_with("paused at `confirm_interrupt`; resume with:\n  switchyard resume graphs/browser_agent.toml --thread session-7 --payload '<JSON>' --store sqlite:"),
        "{}",
        out.stderr
    );
    let paused = s.state("session-7");
    assert_eq!(paused["status"], json!("interrupted"));
    assert_eq!(
        paused["pending"]["payload"], payload,
        "the one pending interrupt"
    );
    assert!(shop.lock().unwrap().orders.is_empty());

    // One pending interrupt at a time: no new run on a paused thread, and the answer
    // must name the pending action.
    let out = s
        .cli(&[
            "run",
            &graph,
            "--thread",
            "session-7",
            "--store",
            &store,
            "--input",
            &input("Hello?"),
        ])
        .code(1);
    assert_eq!(
        out.stderr,
        "error: thread `session-7` is paused at `confirm_interrupt`; resume it instead of starting a new run\n"
    );
    let out = s
        .cli(&[
            "resume",
            "--thread",
            "session-7",
            "--store",
            &store,
            "--payload",
            r#"{"reference": "a1", "confirmed": true}"#,
        ])
        .code(1);
    assert!(
        out.stderr.ends_with("error: the payload's reference `a1` does not match the pending interrupt's reference `a9`\n"),
        "{}",
        out.stderr
    );
    assert_eq!(
        s.state("session-7")["seq"],
        paused["seq"],
        "a refused answer changes nothing"
    );

    // Declining, on a copy of the thread: finalize_cancelled, nothing bought, no browser.
    let seq = paused["seq"].to_string();
    s.cli(&[
        "fork",
        "--thread",
        "session-7",
        "--at",
        &seq,
        "--into",
        "session-7-declined",
        "--store",
        &store,
    ])
    .code(0);
    let out = s
        .cli(&[
            "resume",
            "--thread",
            "session-7-declined",
            "--store",
            &store,
            "--json",
            "--payload",
            r#"{"reference": "a9", "confirmed": false}"#,
        ])
        .code(0);
    assert_trace(
        &trace(&out.events()),
        &[
            "run_started session-7-declined run 1 (resumed)",
            "resumed confirm_interrupt",
            "  -> finalize_cancelled [false]",
            "finalize_cancelled",
            r#"run_finished finished "cancelled" after 9 steps, 340 tokens: "Cancelled: you declined to click \"Buy now\" (click on \"Buy now\" may be irreversible: The user wants to buy the blue mug.).""#,
        ],
    );
    assert!(shop.lock().unwrap().orders.is_empty());

    // Confirming: the mug's page is reopened in the resume's fresh browser and the
    // confirmed click runs.
    let out = s
        .llm(&[
            "resume",
            "--thread",
            "session-7",
            "--payload",
            r#"{"reference": "a9", "confirmed": true}"#,
        ])
        .code(0);
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            lines(&[
                "run_started session-7 run 1 (resumed)",
                "resumed confirm_interrupt",
                "  -> look_before_execute [true]",
                "look_before_execute",
            ]),
            fresh_browser("reopen_before_execute", &format!("{url}mug.html")),
            lines(&[
                "  -> execute_action",
                "execute_action",
                r#"  browser.browser_click {"element":"Buy now","target":"e7"}"#,
                "  -> maybe_stop_or_continue",
                "maybe_stop_or_continue",
                "  -> maybe_observe [default]",
            ]),
            observe(false),
            plan(1),
            stopped(),
            lines(&[
                "server_stopped browser",
                r#"run_finished finished "done" after 19 steps, 680 tokens: "Done: you bought the blue mug for $12.00 (order 1).""#,
            ]),
        ]),
    );
    assert_eq!(shop.lock().unwrap().orders, ["blue-mug"]);
    assert_eq!(
        app.requests(),
        [
            "GET /",
            "GET /search.html?q=mug",
            "GET /mug.html",
            "GET /mug.html",
            "GET /mug.html",
            "POST /order",
            "GET /orders/1"
        ]
    );

    // The state: the chat history of both requests, and nothing else holds it.
    let end = s.state("session-7");
    assert_eq!(end["status"], json!("finished"));
    assert_eq!(end["outcome"], json!("done"));
    let state = &end["state"];
    let navigate = action(
        "a1",
        "navigate",
        json!({ "url": url, "reason": "Open the shop first." }),
    );
    let search = action(
        "a3",
        "type",
        json!({ "eid": "e4", "target": "Search products", "text": "mug", "submit": true, "reason": "Search the shop for the mug." }),
    );
    let open = action(
        "a5",
        "click",
        json!({ "eid": "f1e6", "target": "Blue mug", "reason": "Open the mug's page to see its price." }),
    );
    let answer = action(
        "a7",
        "stop",
        json!({ "text": "The blue mug costs $12.00, and 3 are in stock.", "reason": "The mug's page shows its price." }),
    );
    let done = action(
        "a11",
        "stop",
        json!({ "text": "Done: you bought the blue mug for $12.00 (order 1).", "reason": "The order page confirms the purchase." }),
    );
    let messages = json!([
        said("user", &question),
        planned(&navigate),
        said("user", "Action a1 (navigate) done."),
        planned(&search),
        said("user", "Action a3 (type) done."),
        planned(&open),
        said("user", "Action a5 (click) done."),
        planned(&answer),
        said("user", "Buy it, please."),
        planned(&buy),
        said("user", "Action a9 (click) done."),
        planned(&done),
    ]);
    assert_eq!(state["messages"], messages);
    // Each plan sends exactly that history, between the system prompt and the prompt.
    let last = recorded(&s, "shopping.3.llm.jsonl", 0)["messages"].clone();
    let history = &last.as_array().unwrap()[1..last.as_array().unwrap().len() - 1];
    assert_eq!(history, &messages.as_array().unwrap()[..11]);
    assert_screenshot_by_reference(&s, state);
    // The resume's browser was a fresh one: it showed no page, so the mug's was opened.
    let tabs = state["browser_tabs"].as_str().unwrap();
    assert!(
        tabs.contains("(about:blank)") && !tabs.contains("mug.html"),
        "{tabs}"
    );
    let mut rest = state.clone();
    for key in [
        "messages",
        "last_screenshot",
        "last_observation",
        "last_result",
        "browser_tabs",
    ] {
        rest.as_object_mut().unwrap().remove(key);
    }
    assert_eq!(
        rest,
        json!({
            "last_user_message": "Buy it, please.",
            "planned_action": done,
            "steps": [
                format!("navigate a1 ({url}): ok"),
                "type a3 (Search products): ok",
                "click a5 (Blue mug): ok",
                "confirmed click a9",
                "click a9 (Buy now): ok"
            ],
            "failures": [],
            "tool_steps": 1,
            "invalid_actions": 0,
            "needs_observe": false,
            "final_response": "Done: you bought the blue mug for $12.00 (order 1).",
            "user_message": "Buy it, please.",
            "session_id": "session-7",
            "page_url": format!("{url}orders/1"),
            "MAX_TOOL_STEPS": 25,
            "target_line": null,
            "action_error": null,
            "policy": { "decision": "allow", "reason": "stopping does nothing in the browser", "rule": "finish" },
            "confirmation": { "reference": "a9", "confirmed": true },
            "manual_reply": null,
            "executed": false
        })
    );
    assert!(
        state["last_observation"]
            .as_str()
            .unwrap()
            .contains("Order 1 is placed: Blue mug, $12.00."),
        "{}",
        state["last_observation"]
    );
    s.finish();
}

/// A sign-in only the user can finish. Proves: a need_user action pauses with a manual
/// interrupt (`{kind: manual, text}`), resumed once with free text (the code, which the
/// agent then types) and once with `{done, message}` (after the user approved on their
/// phone); each resume starts a fresh browser, reopens the page and observes it again.
#[test]
fn a_manual_step_pauses_and_resumes_with_text_or_done() {
    let (app, shop) = shop();
    let mut s = Scenario::new("browser_agent", "sign_in", app.port());
    let graph = s.graph();
    let url = app.url();
    let request = format!("Sign me in to my account at {url}account");

    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-8",
            "--input",
            &input(&request),
        ])
        .code(4);
    let ask_code = "Please tell me the 4-digit code the shop sent to your phone.";
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-8", 0),
            nothing_to_reopen(),
            observe(true),
            plan(1),
            allowed(&format!(
                r#"  browser.browser_navigate {{"url":"{url}account"}}"#
            )),
            observe(false),
            plan(1),
            lines(&[
                "validate_action",
                "  -> manual_interrupt [need_user]",
                "manual_interrupt",
                &format!(r#"interrupted manual_interrupt {{"kind":"manual","text":"{ask_code}"}}"#),
                "server_stopped browser",
                "run_finished interrupted null after 13 steps, 680 tokens: null",
            ]),
        ]),
    );

    // Free text: the code. The account page is reopened, observed, the code typed.
    let out = s
        .llm(&["resume", "--thread", "session-8", "--payload", r#""4821""#])
        .code(4);
    let ask_approval = "Please approve this sign-in in the Corner Shop app on your phone, then tell me when you are done.";
    let reopen = |first: &str| {
        concat(vec![
            lines(&[
                first,
                "resumed manual_interrupt",
                "  -> look_before_reopen",
                "look_before_reopen",
            ]),
            fresh_browser("reopen_page", &format!("{url}account")),
            lines(&["  -> maybe_observe"]),
        ])
    };
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            reopen("run_started session-8 run 0 (resumed)"),
            observe(false),
            plan(1),
            allowed(
                r#"  browser.browser_type {"element":"Code","target":"e5","text":"4821","submit":true}"#,
            ),
            observe(false),
            plan(1),
            lines(&[
                "validate_action",
                "  -> manual_interrupt [need_user]",
                "manual_interrupt",
                &format!(
                    r#"interrupted manual_interrupt {{"kind":"manual","text":"{ask_approval}"}}"#
                ),
                "server_stopped browser",
                "run_finished interrupted null after 25 steps, 1360 tokens: null",
            ]),
        ]),
    );
    // The prompt after the answer keeps the task and shows the answer.
    let prompt = recorded(&s, "sign_in.2.llm.jsonl", 0)["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(
        prompt.starts_with(&format!(
            "Task: {request}\nThe user's latest answer: 4821\n\nCurrent page"
        )),
        "{prompt}"
    );

    // The person approves on their phone, then answers {done, message}.
    shop.lock().unwrap().approved = true;
    let out = s
        .llm(&[
            "resume",
            "--thread",
            "session-8",
            "--payload",
            r#"{"done": true, "message": "Approved it on my phone."}"#,
        ])
        .code(0);
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            reopen("run_started session-8 run 0 (resumed)"),
            observe(false),
            plan(1),
            stopped(),
            lines(&[
                "server_stopped browser",
                r#"run_finished finished "done" after 34 steps, 1700 tokens: "You are signed in as Ada Lovelace.""#,
            ]),
        ]),
    );

    let state = s.state("session-8")["state"].clone();
    let code = action(
        "a6",
        "type",
        json!({ "eid": "e5", "target": "Code", "text": "4821", "submit": true, "reason": "Enter the code the user gave me." }),
    );
    assert_eq!(
        state["messages"],
        json!([
            said("user", &request),
            planned(&action(
                "a1",
                "navigate",
                json!({ "url": format!("{url}account"), "reason": "Open the account page." })
            )),
            said("user", "Action a1 (navigate) done."),
            planned(&action("a3", "need_user", json!({ "reason": ask_code }))),
            said("assistant", ask_code),
            said("user", "4821"),
            planned(&code),
            said("user", "Action a6 (type) done."),
            planned(&action(
                "a8",
                "need_user",
                json!({ "reason": ask_approval })
            )),
            said("assistant", ask_approval),
            said("user", "Done. Approved it on my phone."),
            planned(&action(
                "a11",
                "stop",
                json!({ "text": "You are signed in as Ada Lovelace.", "reason": "The account page shows the user signed in." })
            )),
        ])
    );
    assert_eq!(
        state["steps"],
        json!([
            format!("navigate a1 ({url}account): ok"),
            "manual step a3: 4821",
            "type a6 (Code): ok",
            "manual step a8: Done. Approved it on my phone."
        ])
    );
    assert_eq!(
        state["manual_reply"],
        json!({ "done": true, "message": "Approved it on my phone." })
    );
    assert_eq!(
        state["final_response"],
        json!("You are signed in as Ada Lovelace.")
    );
    assert_screenshot_by_reference(&s, &state);
    let shop = shop.lock().unwrap();
    assert!(shop.verified && shop.approved);
    s.finish();
}

/// Proves: validate_action checks each action against the current snapshot (an unknown
/// ref, a disabled element, typing into something not editable), feeds the reason back
/// to the planner without observing again, and the third invalid action ends in
/// finalize_blocked.
#[test]
fn three_invalid_actions_end_in_finalize_blocked() {
    let (app, _shop) = shop();
    let mut s = Scenario::new("browser_agent", "blocked", app.port());
    let graph = s.graph();
    let url = app.url();
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-9",
            "--input",
            &input(&format!("Buy a gift card at {url}")),
        ])
        .code(0);
    let rejected = lines(&["validate_action", "  -> plan_action [invalid]"]);
    let last = "element e8 is not editable (- link \\\"Blue mug\\\")";
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-9", 0),
            nothing_to_reopen(),
            observe(true),
            plan(1),
            allowed(&format!(r#"  browser.browser_navigate {{"url":"{url}"}}"#)),
            observe(false),
            plan(1),
            rejected.clone(),
            plan(1),
            rejected,
            plan(1),
            lines(&[
                "validate_action",
                "  -> finalize_blocked [blocked]",
                "finalize_blocked",
                "server_stopped browser",
                &format!(
                    r#"run_finished finished "blocked" after 17 steps, 1360 tokens: "Stopped after 3 invalid actions. The last one: {last}""#
                ),
            ]),
        ]),
    );
    let state = s.state("session-9")["state"].clone();
    let why = [
        "unknown eid e99: it is not in the current snapshot",
        "element e11 is disabled",
        "element e8 is not editable (- link \"Blue mug\")",
    ];
    assert_eq!(
        state["failures"],
        json!([
            format!("invalid action a3 (click): {}", why[0]),
            format!("invalid action a5 (click): {}", why[1]),
            format!("invalid action a7 (type): {}", why[2]),
        ])
    );
    assert_eq!(
        state["steps"],
        json!([
            format!("navigate a1 ({url}): ok"),
            format!("rejected click a3: {}", why[0]),
            format!("rejected click a5: {}", why[1]),
            format!("rejected type a7: {}", why[2]),
        ])
    );
    let feedback: Vec<Json> = state["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str().unwrap().contains("is invalid"))
        .cloned()
        .collect();
    assert_eq!(
        feedback,
        [("a3", 0), ("a5", 1), ("a7", 2)]
            .map(|(id, n)| said(
                "user",
                &format!(
                    "Action {id} is invalid: {}. Choose a valid action from the current snapshot.",
                    why[n]
                )
            ))
            .to_vec()
    );
    assert_eq!(state["invalid_actions"], json!(3));
    assert_eq!(state["tool_steps"], json!(1));
    assert_eq!(state["action_error"], json!(why[2]));
    s.finish();
}

/// Proves: the step limit counts every node of the graph (`--max-steps` for this run)
/// and goes to finalize_limit through `on_limit`; the seed's own count of browser
/// actions (`MAX_TOOL_STEPS`) ends there too.
#[test]
fn the_step_limits_end_in_finalize_limit() {
    let (app, _shop) = shop();
    let mut s = Scenario::new("browser_agent", "limit", app.port());
    let graph = s.graph();
    let url = app.url();
    let request = format!("Find the return policy at {url}");
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-10",
            "--max-steps",
            "15",
            "--input",
            &input(&request),
        ])
        .code(0);
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-10", 0),
            nothing_to_reopen(),
            observe(true),
            plan(1),
            allowed(&format!(r#"  browser.browser_navigate {{"url":"{url}"}}"#)),
            observe(false),
            plan(1),
            allowed(r#"  browser.browser_press_key {"key":"PageDown"}"#),
            lines(&[
                "limit_reached max_steps -> finalize_limit",
                "finalize_limit",
                "server_stopped browser",
                r#"run_finished finished "limit" after 16 steps, 680 tokens: "Stopped at the step limit after 2 browser actions (16 steps). Last step: scroll a3 (down): ok""#,
            ]),
        ]),
    );
    let end = s.state("session-10");
    assert_eq!(end["outcome"], json!("limit"));
    assert_eq!(end["step"], json!(16));

    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-11",
            "--input",
            &json!({ "user_message": request }).to_string(),
            "--context",
            &json!({ "MAX_TOOL_STEPS": 1 }).to_string(),
        ])
        .code(0);
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-11", 0),
            nothing_to_reopen(),
            observe(true),
            plan(1),
            lines(&[
                "validate_action",
                "  -> policy_gate [default]",
                "policy_gate",
                "  -> execute_action [allow]",
                "execute_action",
                &format!(r#"  browser.browser_navigate {{"url":"{url}"}}"#),
                "  -> maybe_stop_or_continue",
                "maybe_stop_or_continue",
                "  -> finalize_limit [limit]",
                "finalize_limit",
                "server_stopped browser",
                &format!(
                    r#"run_finished finished "limit" after 10 steps, 340 tokens: "Stopped at the step limit after 1 browser action (10 steps). Last step: navigate a1 ({url}): ok""#
                ),
            ]),
        ]),
    );
    s.finish();
}

/// Proves: the policy gate's deny ends the run in finalize_denied before anything runs
/// in the browser.
#[test]
fn a_navigation_the_policy_denies_ends_in_finalize_denied() {
    let (app, _shop) = shop();
    let mut s = Scenario::new("browser_agent", "denied", app.port());
    let graph = s.graph();
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "session-12",
            "--input",
            &input("Show me the file file:///etc/hostname"),
        ])
        .code(0);
    let response = "I did not navigate file:///etc/hostname: only http(s) pages may be opened, not file:///etc/hostname.";
    assert_lines(
        &trace(&out.events()),
        &concat(vec![
            start("session-12", 0),
            nothing_to_reopen(),
            observe(true),
            plan(1),
            lines(&[
                "validate_action",
                "  -> policy_gate [default]",
                "policy_gate",
                "  -> finalize_denied [deny]",
                "finalize_denied",
                "server_stopped browser",
                &format!(
                    r#"run_finished finished "denied" after 8 steps, 340 tokens: "{response}""#
                ),
            ]),
        ]),
    );
    let state = s.state("session-12")["state"].clone();
    assert_eq!(
        state["policy"],
        json!({ "decision": "deny", "reason": "only http(s) pages may be opened, not file:///etc/hostname", "rule": "web_only" })
    );
    assert_eq!(state["final_response"], json!(response));
    assert_eq!(state["tool_steps"], json!(0));
    assert_eq!(state["page_url"], json!("about:blank"));
    assert!(app.requests().is_empty());
    s.finish();
}

/// A replay whose recorded prompt differs from what the graph now sends fails the run,
/// naming the node and the message that differs (then regenerate the recordings, see
/// the module docs).
#[test]
fn a_replay_of_a_changed_prompt_fails_naming_the_node() {
    let (app, _shop) = shop();
    let s = Scenario::new("browser_agent", "denied", app.port());
    let recording = std::fs::read_to_string(
        crate::util::root().join("tests/fixtures/seeds/browser_agent/denied.1.llm.jsonl"),
    )
    .unwrap();
    let stale = s.app(&recording).replace(
        "Show me the file file:///etc/hostname",
        "Show me the file file:///etc/hosts",
    );
    let replay = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(replay.path(), stale).unwrap();
    let graph = s.graph();
    let store = s.store();
    let replay = replay.path().display().to_string();
    let out = s
        .cli(&[
            "run",
            &graph,
            "--thread",
            "session-13",
            "--store",
            &store,
            "--replay",
            &replay,
            "--input",
            &input("Show me the file file:///etc/hostname"),
        ])
        .code(1);
    assert!(
        out.stderr.ends_with(
            "error: node `plan_action` failed: replay: request 1 of node `plan_action` does not match the recording: message 2 differs: the request has `{\"role\":\"user\",\"content\":\"Show me the file file:///etc/hostname\"}`, the recording `{\"role\":\"user\",\"content\":\"Show me the file file:///etc/hosts\"}`\n"
        ),
        "{:?}",
        &out.stderr[out.stderr.len().saturating_sub(400)..]
    );
    assert_eq!(s.state("session-13")["status"], json!("failed"));
}

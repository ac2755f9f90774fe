//! Seed 002, `graphs/tool_agent.toml`: model -> tools -> model over the reference
//! filesystem server, confined to a fresh workspace per test through
//! `TOOL_AGENT_WORKSPACE` (the server's `args` read it). The model's tool arguments are
//! structured JSON checked against each tool's inputSchema; `ask_human` pauses the run;
//! `--stream` streams the model's text as `text_delta` events.

use super::harness::{Scenario, path, tool_calls, trace};
use serde_json::json;
use std::path::{Path, PathBuf};

async fn scenario(name: &'static str) -> (Scenario, PathBuf) {
    let mut s = Scenario::new("tool_agent", name).await;
    let workspace = s.dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    s.env("TOOL_AGENT_WORKSPACE", &workspace);
    (s, workspace)
}

#[track_caller]
fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The files under `dir`, as sorted relative paths.
fn files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The agent reads the notes and lists the workspace in one turn (two calls the model
/// asks for at once, run as a map, their results in the order asked), creates a
/// folder and writes two files; the model's words stream as `text_delta` events while
/// it chooses each call.
#[tokio::test]
async fn writes_files_and_streams_its_words() {
    let (mut s, ws) = scenario("writes_files").await;
    std::fs::write(ws.join("notes.txt"), "Shopping: oat milk, eggs, bread\n").unwrap();
    let ran = s
        .run(
            json!({ "user_message": "Turn the shopping items in notes.txt into a checklist in lists/groceries.md, and add a README.md that says what the lists folder holds." }),
            &["--stream"],
        )
        .await;
    ran.code(0);
    let answer = "Created lists/groceries.md with a checklist of oat milk, eggs and bread (from notes.txt), and README.md, which says that lists/ holds checklists.";
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "done", "response": answer })
    );

    // What the agent wrote, and nothing else.
    assert_eq!(files(&ws), ["README.md", "lists/groceries.md", "notes.txt"]);
    assert_eq!(
        read(&ws, "lists/groceries.md"),
        "# Groceries\n\n- [ ] oat milk\n- [ ] eggs\n- [ ] bread\n"
    );
    assert_eq!(
        read(&ws, "README.md"),
        "# Workspace\n\n`lists/` holds checklists, one Markdown file per list.\n"
    );
    assert_eq!(read(&ws, "notes.txt"), "Shopping: oat milk, eggs, bread\n");

    // Structured arguments, passed to the server as the model wrote them.
    let calls: Vec<_> = tool_calls(&ran.events)
        .into_iter()
        .map(|(tool, args, _, error)| (tool, args, error))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "read_text_file".into(),
                json!({ "path": "notes.txt" }),
                false
            ),
            ("list_directory".into(), json!({ "path": "." }), false),
            ("create_directory".into(), json!({ "path": "lists" }), false),
            (
                "write_file".into(),
                json!({ "path": "lists/groceries.md", "content": "# Groceries\n\n- [ ] oat milk\n- [ ] eggs\n- [ ] bread\n" }),
                false
            ),
            (
                "write_file".into(),
                json!({ "path": "README.md", "content": "# Workspace\n\n`lists/` holds checklists, one Markdown file per list.\n" }),
                false
            ),
        ]
    );

    // Streaming: the text the model sends along with each call, as it comes, in pieces.
    let deltas: Vec<&str> = ran
        .events
        .iter()
        .filter(|e| e["event"] == "text_delta")
        .map(|e| {
            assert_eq!(e["node"], "model");
            e["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        deltas,
        [
            "I will read the ",
            "notes and look at ",
            "the workspace first.",
            "The items are oat ",
            "milk, eggs and bread. ",
            "The lists folder does ",
            "not exist yet, so ",
            "I create it.",
            "Now the checklist.",
            "And the README that ",
            "says what the lists ",
            "folder holds.",
        ]
    );
    // Each call's words stream before the call runs.
    let t = trace(&ran.events);
    let text = t
        .iter()
        .position(|l| l.starts_with("text model: The items"))
        .unwrap();
    let call = t
        .iter()
        .position(|l| l.starts_with("tool fs/create_directory"))
        .unwrap();
    assert!(text < call, "{t:#?}");

    let state = s.state().await;
    assert_eq!(state["state"]["final_response"], answer);
    // The two calls of the first turn, and their results in the order asked.
    assert_eq!(
        state["state"]["messages"][1],
        json!({ "role": "assistant", "content": "I will read the notes and look at the workspace first.\nCalling read_text_file, list_directory with [{\"path\": \"notes.txt\"}, {\"path\": \".\"}]" })
    );
    assert_eq!(
        state["state"]["messages"][2],
        json!({ "role": "user", "content": "Results, in order: [{\"content\": \"Shopping: oat milk, eggs, bread\\n\"}, {\"content\": \"[FILE] notes.txt\"}]" })
    );
    assert_eq!(
        state["state"]["messages"][3],
        json!({ "role": "assistant", "content": "The items are oat milk, eggs and bread. The lists folder does not exist yet, so I create it.\nCalling create_directory with [{\"path\": \"lists\"}]" })
    );
    assert_eq!(
        state["state"]["messages"][4],
        json!({ "role": "user", "content": "Results, in order: [{\"content\": \"Successfully created directory lists\"}]" })
    );
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}

/// A bad argument goes back to the model, never to the server and never a crash: a call
/// that does not fit the tool's inputSchema is refused at the model node and the model
/// asked again; a call the server rejects comes back as its error, in its place among the
/// results.
#[tokio::test]
async fn bad_arguments_are_reported_back_to_the_model() {
    let (mut s, ws) = scenario("bad_argument").await;
    let ran = s
        .run(
            json!({ "user_message": "Write 'hello' to greeting.txt, then change it to 'hello, world'." }),
            &[],
        )
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "done", "response": "greeting.txt now says \"hello, world\". My first edit did not match the file's text, so I rewrote the file." })
    );
    assert_eq!(read(&ws, "greeting.txt"), "hello, world");

    // The call without `content` never reached the server: the model node checked it
    // against write_file's inputSchema and asked again (attempt 2).
    let t = trace(&ran.events);
    assert_eq!(
        t.iter()
            .filter(|l| l.starts_with("llm model"))
            .map(|l| l.split(" tokens").next().unwrap())
            .collect::<Vec<_>>(),
        [
            "llm model attempt=1",
            "llm model attempt=2",
            "llm model attempt=1",
            "llm model attempt=1",
            "llm model attempt=1"
        ]
    );
    assert_eq!(
        tool_calls(&ran.events),
        [
            (
                "write_file".into(),
                json!({ "path": "greeting.txt", "content": "hello" }),
                1,
                false
            ),
            (
                "edit_file".into(),
                json!({ "path": "greeting.txt", "edits": [{ "oldText": "helo", "newText": "hello, world" }] }),
                1,
                true
            ),
            (
                "write_file".into(),
                json!({ "path": "greeting.txt", "content": "hello, world" }),
                1,
                false
            ),
        ]
    );
    // What the model was told about the call that did not fit (from the recording, which
    // holds the requests exactly as sent).
    let recording = std::fs::read_to_string(
        crate::util::root().join("tests/fixtures/seeds/tool_agent/bad_argument.llm.jsonl"),
    )
    .unwrap();
    let second: serde_json::Value =
        serde_json::from_str(recording.lines().nth(1).unwrap()).unwrap();
    let sent = second["messages"].as_array().unwrap();
    assert_eq!(
        sent[sent.len() - 1],
        json!({ "role": "tool", "tool_call_id": "call_1", "content": "Not called: the arguments of `write_file` do not fit its schema: \"content\" is a required property. Call again, with the problem fixed." })
    );
    // The server's refusal stood in the call's place among the results, and went back
    // to the model with them.
    assert_eq!(
        path(&ran.events),
        [
            "ingest_user_input",
            "model",
            "tools",
            "model",
            "tools",
            "model",
            "tools",
            "model",
            "record_answer",
            "done"
        ]
    );
    let state = s.state().await;
    assert_eq!(
        state["state"]["messages"][4],
        json!({ "role": "user", "content": "Results, in order: [{\"error\": \"`edit_file` reported an error: Could not find exact match for edit:\\nhelo\"}]" })
    );
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}

/// `ask_human` pauses mid-task (exit 4, the question as the interrupt's payload); the
/// thread waits in the store; a resume with the person's answer goes on from there.
#[tokio::test]
async fn ask_human_pauses_and_resumes_with_the_answer() {
    let (mut s, ws) = scenario("ask_human").await;
    let ran = s
        .run(
            json!({ "user_message": "Save my meeting notes to a file: 'Decided to ship on Friday.'" }),
            &[],
        )
        .await;
    ran.code(4);
    let question = json!({ "kind": "ask_human", "question": "Which file should I save the meeting notes to?" });
    assert_eq!(
        trace(&ran.events)[10..],
        [
            format!("interrupted ask_human {question}"),
            "server_stopped fs".into(),
            "run_finished interrupted outcome=null steps=3 tokens=371".into(),
        ]
    );
    assert!(
        ran.stderr.starts_with("paused at `ask_human`; resume with:\n  switchyard resume graphs/tool_agent.toml --thread ask_human --payload '<JSON>' --store sqlite:"),
        "{}",
        ran.stderr
    );
    let paused = s.state().await;
    assert_eq!(paused["status"], "interrupted");
    assert_eq!(paused["pending"]["node"], "ask_human");
    assert_eq!(paused["pending"]["payload"], question);
    assert_eq!(files(&ws), Vec::<String>::new());

    // An answer that does not fit the resume schema changes nothing.
    let refused = s.resume(Some(json!({ "reply": "x" })), &[]).await;
    refused.code(1);
    assert!(
        refused
            .stderr
            .starts_with("error: the payload does not fit the resume schema of `ask_human`: "),
        "{}",
        refused.stderr
    );
    assert_eq!(s.state().await["seq"], paused["seq"]);

    let ran = s
        .resume(Some(json!({ "answer": "meetings/2025-06-30.md" })), &[])
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "done", "response": "Saved the meeting notes to meetings/2025-06-30.md." })
    );
    assert_eq!(
        path(&ran.events),
        [
            "ask_human",
            "model",
            "tools",
            "model",
            "tools",
            "model",
            "record_answer",
            "done"
        ]
    );
    assert_eq!(files(&ws), ["meetings/2025-06-30.md"]);
    assert_eq!(
        read(&ws, "meetings/2025-06-30.md"),
        "# Meeting 2025-06-30\n\nDecided to ship on Friday.\n"
    );
    let state = s.state().await;
    assert_eq!(
        state["state"]["messages"].as_array().unwrap()[1..3],
        [
            json!({ "role": "assistant", "content": "Which file should I save the meeting notes to?" }),
            json!({ "role": "user", "content": "meetings/2025-06-30.md" }),
        ]
    );
    assert_eq!(
        state["state"]["human_reply"],
        json!({ "answer": "meetings/2025-06-30.md" })
    );
    insta::assert_snapshot!(s.report(&trace(&ran.events)).await);
    s.finish();
}

/// A request the recording does not hold (here: another task, as after a prompt edit)
/// fails the run at once, naming the node and what differs; nothing is called.
#[tokio::test]
async fn a_request_the_recording_does_not_hold_names_the_node() {
    let mut s = Scenario::replaying("tool_agent", "writes_files").await;
    let ws = s.dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    s.env("TOOL_AGENT_WORKSPACE", &ws);
    let ran = s
        .run(json!({ "user_message": "Delete everything." }), &[])
        .await;
    ran.code(1);
    assert_eq!(
        ran.stderr,
        "error: node `model` failed: replay: request 1 of node `model` does not match the \
         recording: message 2 differs: the request has `{\"role\":\"user\",\"content\":\"Delete \
         everything.\"}`, the recording `{\"role\":\"user\",\"content\":\"Turn the shopping items \
         in notes.txt into a checklist in lists/groceries.md, and add a README....`\n"
    );
    assert_eq!(tool_calls(&ran.events), []);
}

//! A thread across pauses, processes and stores: what SQLite keeps, history and
//! forks, graphs edited between runs, claims, records refused or kept by no store.

use super::*;
use switchyard::store::{Checkpoint, Checkpoints, Snapshot, StoreError};

fn temp_copy_of_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/fixtures/run");
    for sub in ["", "prompts", "schemas"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    dir
}

#[tokio::test]
async fn checkpoints_in_sqlite_survive_the_process_and_refuse_an_edited_path() {
    let dir = temp_copy_of_fixtures();
    let file = dir.path().join("agent.toml");
    let db = dir.path().join("state/checkpoints.db");
    let open = || -> Arc<dyn Store> { Arc::new(SqliteStore::open(&db).unwrap()) };
    let load = || Arc::new(switchyard::load_graph(&file).unwrap());
    let r = Runner::new(load(), open())
        .with_llm(typing_then_stop())
        .with_tools(Arc::new(browser()));
    let out = r.start("s", json!({ "goal": "g" })).await.unwrap();
    assert!(matches!(out, Outcome::Interrupted { .. }));
    drop(r);

    // An edit elsewhere in the graph does not touch the pending path.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("payments are off limits", "no payments"),
    )
    .unwrap();
    let r = Runner::new(load(), open());
    assert_eq!(
        r.threads().state("s", None).await.unwrap().1.status,
        Status::Interrupted
    );
    // An edit of the pending interrupt does.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("kind = \"'confirm'\"", "kind = \"'approve'\""),
    )
    .unwrap();
    let r = Runner::new(load(), open())
        .with_llm(typing_then_stop())
        .with_tools(Arc::new(browser()));
    let answer = json!({ "reference": "a1", "confirmed": true });
    let err = r
        .resume("s", Some(answer.clone()), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the graph file changed since thread `s` paused: the pending node `confirm` (its keys, edges, prompt or schema files) was edited; resume with --force to go on anyway"
    );
    assert_eq!(
        r.threads()
            .history("s")
            .await
            .unwrap()
            .last()
            .unwrap()
            .status,
        Status::Interrupted
    );
    // The scripted planner answers `a1` first again: skip it, the plan already ran.
    let llm = ScriptedLlm::new().script(
        "plan",
        [json!({ "id": "a2", "kind": "stop", "target": "" })],
    );
    let r = Runner::new(load(), open())
        .with_llm(llm)
        .with_tools(Arc::new(browser()));
    let out = r.resume("s", Some(answer), true).await.unwrap();
    assert_eq!(
        out,
        finished("done", "done after 1 tool steps: type:search", 6)
    );
}

#[tokio::test]
async fn history_lists_every_checkpoint_and_fork_goes_on_from_any() {
    let r = runner("count");
    r.start("t", json!({ "goal": 4 })).await.unwrap();
    let history = r.threads().history("t").await.unwrap();
    let lines: Vec<String> = history
        .iter()
        .map(|c| {
            format!(
                "{} {} {}->{} {}",
                c.seq,
                c.step,
                c.node.as_deref().unwrap_or("-"),
                c.next.as_deref().unwrap_or("-"),
                c.status.name()
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            "0 0 -->inc running",
            "1 0 -->inc running",
            "2 1 inc->check running",
            "3 2 check->inc running",
            "4 3 inc->even running",
            "5 4 even->check running",
            "6 5 check->inc running",
            "7 6 inc->check running",
            "8 7 check->inc running",
            "9 8 inc->even running",
            "10 9 even->check running",
            "11 10 check->done running",
            "12 11 done->- finished",
        ]
    );
    // The run's input checkpoint holds the state the run found (none), its next the
    // input's.
    assert_eq!(history[0].source, Source::Input);
    assert_eq!(history[0].writes, []);
    assert_eq!(history[1].source, Source::Loop);
    assert_eq!(
        history.iter().map(|c| c.parent).collect::<Vec<_>>(),
        [
            None,
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            Some(4),
            Some(5),
            Some(6),
            Some(7),
            Some(8),
            Some(9),
            Some(10),
            Some(11)
        ]
    );
    assert_eq!(
        r.threads().state("t", Some(6)).await.unwrap().0,
        json!({ "goal": 4, "n": 2, "total": 3, "checks": 2, "evens": [2] })
    );
    r.threads().fork("t", 6, "t2").await.unwrap();
    assert_eq!(
        r.threads().state("t2", None).await.unwrap().0,
        r.threads().state("t", Some(6)).await.unwrap().0
    );
    let out = r.resume("t2", None, false).await.unwrap();
    assert_eq!(out, finished("done", "n=4 total=10 checks=4 evens=2", 11));
    assert_eq!(
        r.threads().history("t").await.unwrap(),
        history,
        "the original thread is untouched"
    );
    let err = r.threads().fork("t", 99, "t3").await.unwrap_err();
    assert_eq!(err.to_string(), "thread `t` has no checkpoint 99");
    let err = r.threads().fork("t", 1, "t2").await.unwrap_err();
    assert_eq!(err.to_string(), "thread `t2` already exists");
}

#[tokio::test]
async fn a_message_written_again_by_id_after_a_resume_replaces_its_old_self() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    for name in ["memory", "sqlite"] {
        let open = || -> Arc<dyn Store> {
            match name {
                "memory" => memory.clone(),
                _ => Arc::new(SqliteStore::open(&db).unwrap()),
            }
        };
        let out = Runner::new(graph("messages_by_id"), open())
            .start("t", json!({}))
            .await
            .unwrap();
        assert!(
            matches!(out, Outcome::Interrupted { .. }),
            "{name}: {out:?}"
        );
        // Resumed by a runner (and for SQLite a store) that has not seen the thread.
        let r = Runner::new(graph("messages_by_id"), open());
        let out = r.resume("t", Some(json!("Bo")), false).await.unwrap();
        assert_eq!(out, finished("done", "3 messages", 4), "{name}");
        let (state, _) = r.threads().state("t", None).await.unwrap();
        let state = crate::util::without_made_ids(state);
        let first = state["messages"][0]["content"].as_str().unwrap();
        assert!(first.len() > 256, "{name}: {first}");
        assert_eq!(
            state["messages"],
            json!([
                { "id": "a", "role": "user", "content": first },
                { "id": "b", "role": "assistant", "content": "and your name?" },
                { "role": "user", "content": "Bo" }
            ]),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_field_whose_type_was_edited_refuses_resume_unless_forced() {
    let dir = temp_copy_of_fixtures();
    let file = dir.path().join("answer.toml");
    let db = dir.path().join("c.db");
    let open = || -> Arc<dyn Store> { Arc::new(SqliteStore::open(&db).unwrap()) };
    let load = || Arc::new(switchyard::load_graph(&file).unwrap());
    let r = Runner::new(load(), open());
    r.start("t", json!({ "name": "Bo" })).await.unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "[state.name]\ntype = \"string\"",
            "[state.name]\ntype = \"int\"",
        ),
    )
    .unwrap();
    let r = Runner::new(load(), open());
    // The thread can still be read...
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0,
        json!({ "name": "Bo" })
    );
    // ...but not resumed as if nothing had changed.
    let err = r.resume("t", Some(json!(7)), false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the graph file changed since thread `t` paused: field `name` is now `int`, and the thread holds a string `\"Bo\"`; resume with --force to go on anyway"
    );
    let out = r.resume("t", Some(json!(7)), true).await.unwrap();
    assert_eq!(out, finished("done", "hello 7", 2));
}

#[tokio::test]
async fn a_large_value_still_text_is_checked_against_an_edited_type_as_a_parsed_one() {
    // Past 256 bytes a resumed thread's value stays text until read, and its type is
    // checked by reading the text. A snapshot under the edited graph (a person's update
    // made after the edit) is what gives a resume such text to check.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tags.toml");
    let db = dir.path().join("c.db");
    let run = |ty: &str| {
        let graph = format!(
            "[graph]\nname = \"tags\"\nentry = \"ask\"\n\n[state.tags]\ntype = \"{ty}\"\n\n\
             [state.note]\ntype = \"string?\"\n\n[state.answer]\ntype = \"json?\"\n\n\
             [nodes.ask]\nkind = \"interrupt\"\naccept_any = true\n\
             payload = {{ question = \"'go?'\" }}\noutput = \"answer\"\nnext = \"done\"\n\n\
             [nodes.done]\nkind = \"finalize\"\noutcome = \"done\"\n\
             response = \"{{{{ tags | length }}}} tags\"\n"
        );
        std::fs::write(&file, graph).unwrap();
        Runner::new(
            Arc::new(switchyard::load_graph(&file).unwrap()),
            Arc::new(SqliteStore::open(&db).unwrap()),
        )
    };
    let tags: Vec<String> = (0..40).map(|i| format!("tag number {i}")).collect();
    for thread in ["t", "u"] {
        let out = run("list<string>")
            .start(thread, json!({ "tags": tags }))
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Interrupted { .. }), "{out:?}");
    }
    run("list<int>")
        .threads()
        .update("t", json!({ "note": "edited" }), None)
        .await
        .unwrap();
    let err = run("list<int>")
        .resume("t", Some(json!(1)), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the graph file changed since thread `t` paused: field `tags` is now `list<int>`, and the thread holds a list `[\"tag number 0\",\"tag number 1\",\"tag number 2\",\"tag number...`; resume with --force to go on anyway"
    );
    run("list<string>?")
        .threads()
        .update("u", json!({ "note": "edited" }), None)
        .await
        .unwrap();
    let out = run("list<string>?")
        .resume("u", Some(json!(1)), false)
        .await
        .unwrap();
    assert_eq!(out, finished("done", "40 tags", 2));
}

#[tokio::test]
async fn a_store_with_odd_records_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let r = Runner::new(graph("answer"), Arc::new(SqliteStore::open(&db).unwrap()));
    r.start("t", json!({})).await.unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE checkpoints SET pending = NULL WHERE status = 'interrupted'",
        [],
    )
    .unwrap();
    let err = r.resume("t", Some(json!("x")), false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "checkpoint store: a record of thread `t` is corrupt: checkpoint 2 is interrupted and has no pending interrupt"
    );
    conn.execute("UPDATE checkpoints SET seq = -1 WHERE seq = 0", [])
        .unwrap();
    let err = r.resume("t", Some(json!("x")), false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "checkpoint store: a record of thread `t` is corrupt: `seq` is -1"
    );
}

#[tokio::test]
async fn two_processes_appending_to_one_thread_get_a_clear_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let a = SqliteStore::open(&db).unwrap();
    let r = Runner::new(graph("answer"), Arc::new(SqliteStore::open(&db).unwrap()));
    r.start("t", json!({})).await.unwrap();
    let mut record = a.latest("t").await.unwrap().unwrap();
    record.seq -= 1;
    let err = a.append(record).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread `t` is being run by another process (its checkpoint 1 was just written); wait for it, or stop it first"
    );
}

#[tokio::test]
async fn a_new_run_on_a_thread_does_not_inherit_the_last_runs_limit() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let r = Runner::new(graph("count"), store.clone()).with_max_steps(Some(3));
    let out = r.start("t", json!({ "goal": 30 })).await.unwrap();
    assert_eq!(
        out,
        Outcome::Finished {
            outcome: "limit".into(),
            response: None,
            steps: 3
        }
    );
    let r = Runner::new(graph("count"), store);
    assert_eq!(
        r.start("t", json!({ "goal": 5 })).await.unwrap(),
        finished("done", "n=5 total=15 checks=4 evens=1", 8)
    );
}

#[tokio::test]
async fn a_thread_whose_reducer_was_edited_can_still_be_read() {
    let dir = temp_copy_of_fixtures();
    let file = dir.path().join("count.toml");
    let db = dir.path().join("c.db");
    let open = || -> Arc<dyn Store> { Arc::new(SqliteStore::open(&db).unwrap()) };
    let load = || Arc::new(switchyard::load_graph(&file).unwrap());
    Runner::new(load(), open())
        .start("t", json!({ "goal": 4 }))
        .await
        .unwrap();
    // `evens` was a list the run appended numbers to; now it merges objects, which a
    // recorded number is not: replay keeps the value the write left.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "[state.evens]\ntype = \"list<int>\"\nreducer = \"append\"",
            "[state.evens]\ntype = \"json\"\nreducer = \"merge\"",
        )
        .replace("evens={{ evens | length }}", "evens={{ evens }}")
        .replace("set = { evens = \"n\" }", "set = { evens = \"{'n': n}\" }"),
    )
    .unwrap();
    let (state, _) = Runner::new(load(), open())
        .threads()
        .state("t", None)
        .await
        .unwrap();
    assert_eq!(
        state["evens"],
        json!(4),
        "the last recorded write, as it was"
    );
}

#[tokio::test]
async fn a_claim_keeps_other_drivers_out_until_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let a = SqliteStore::open(&db).unwrap();
    let b = SqliteStore::open(&db).unwrap();
    let held = a.claim("t").await.unwrap();
    let err = b.claim("t").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "thread `t` is being run by process {}; wait for it to pause or finish, or stop it (Ctrl-C) first",
            std::process::id()
        )
    );
    // Another thread is free.
    drop(b.claim("u").await.unwrap());
    drop(held);
    drop(b.claim("t").await.unwrap());
}

#[tokio::test]
async fn a_run_given_up_by_its_caller_lets_go_of_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let r = Runner::new(graph("count"), Arc::new(SqliteStore::open(&db).unwrap()));
    // The caller stops waiting (a timeout, a dropped request): the future is dropped
    // mid-run.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        r.start("t", json!({ "goal": 20000 })),
    )
    .await;
    assert!(gave_up.is_err(), "the run should still have been going");
    let r = Runner::new(graph("count"), Arc::new(SqliteStore::open(&db).unwrap()));
    let out = r.resume("t", None, false).await.unwrap();
    assert_eq!(
        out,
        finished(
            "done",
            "n=20000 total=200010000 checks=20000 evens=10000",
            50001
        )
    );
}

#[tokio::test]
async fn a_refused_write_takes_back_the_nodes_earlier_writes_in_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let stores: [(&str, Arc<dyn Store>); 3] = [
        ("none", Arc::new(NoStore::new())),
        ("memory", Arc::new(MemoryStore::new())),
        (
            "sqlite",
            Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap()),
        ),
    ];
    for (name, store) in stores {
        let r = Runner::new(graph("undo"), store.clone());
        let out = r.start("t", json!({})).await.unwrap();
        // Every reducer's write is gone: the replaced message, the appended items,
        // the sum, the merged keys, the new name.
        assert_eq!(
            out,
            finished("reported", "a x 1 11False hi write", 2),
            "{name}"
        );
        if name != "none" {
            let (state, _) = r.threads().state("t", None).await.unwrap();
            assert_eq!(
                state,
                json!({
                    "name": "a",
                    "tags": ["x"],
                    "count": 1,
                    "meta": { "keep": 1, "change": 1 },
                    "messages": [{ "id": "m1", "role": "user", "content": "hi" }],
                    "bad": 0,
                    "raw": "not a number"
                }),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn a_store_that_keeps_nothing_runs_the_same_and_keeps_no_thread() {
    // The same run, event for event, with and without records.
    let mut lines = Vec::new();
    for store in [
        Arc::new(NoStore::new()) as Arc<dyn Store>,
        Arc::new(MemoryStore::new()),
    ] {
        let mut r = Runner::new(graph("routes"), store);
        let rx = r.events();
        r.start("t", json!({ "n": 1 })).await.unwrap();
        drop(r);
        lines.push(event_lines(rx).await);
    }
    assert_eq!(lines[0], lines[1]);
    assert_eq!(lines[0].len(), 10);

    // Nothing is kept: the thread has no state, and a pause cannot be resumed.
    let r = Runner::new(graph("routes"), Arc::new(NoStore::new()));
    r.start("t", json!({ "n": 1 })).await.unwrap();
    assert_eq!(
        r.threads().state("t", None).await.unwrap_err().to_string(),
        "thread `t` has no checkpoints"
    );
    let r = Runner::new(graph("pauses"), Arc::new(NoStore::new()))
        .with_tools(Arc::new(failing_fetch()));
    let out = r.start("p", json!({})).await.unwrap();
    assert!(matches!(out, Outcome::Interrupted { .. }), "{out:?}");
    assert_eq!(
        r.resume("p", None, false).await.unwrap_err().to_string(),
        "thread `p` has no checkpoints"
    );
}

/// A store that keeps nothing, and counts the records and snapshots it is handed.
#[derive(Default)]
struct Counting {
    records: std::sync::atomic::AtomicUsize,
    snapshots: std::sync::atomic::AtomicUsize,
}

// Only the role a runner uses: a double writes what it is asked for.
#[async_trait::async_trait]
impl Checkpoints for Counting {
    fn keeps_records(&self) -> bool {
        false
    }
    async fn append(&self, _: Checkpoint) -> Result<(), StoreError> {
        self.records
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    async fn put_snapshot(&self, _: Snapshot) -> Result<(), StoreError> {
        self.snapshots
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    async fn load(&self, _: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }
    async fn truncate(&self, _: &str, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
    async fn prune(&self, _: Checkpoint) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// A store whose claim of the thread lapses (another process took it over) once the
/// first tool call was made: it lets one fence through and refuses the next.
#[derive(Default)]
struct Lapsing {
    fences: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Checkpoints for Lapsing {
    async fn append(&self, _: Checkpoint) -> Result<(), StoreError> {
        Ok(())
    }
    async fn load(&self, _: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }
    async fn truncate(&self, _: &str, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
    async fn prune(&self, _: Checkpoint) -> Result<u64, StoreError> {
        Ok(0)
    }
    async fn fence(&self, thread: &str) -> Result<switchyard::store::Fence, StoreError> {
        match self
            .fences
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        {
            0 => Ok(switchyard::store::Fence::default()),
            _ => Err(StoreError::ClaimLost {
                thread: thread.to_string(),
            }),
        }
    }
}

/// Before each tool call the runner asks the store whether the thread is still this
/// process's: once its claim lapsed, the call is not made and the node fails saying
/// why (a real store then refuses the step's checkpoint too, ending the run).
#[tokio::test]
async fn a_run_whose_claim_lapsed_makes_no_further_tool_call() {
    let tools = Arc::new(ScriptedTools::new().tool("mark", |_| ok(json!("marked"))));
    let r = Runner::new(graph("two_calls"), Arc::new(Lapsing::default())).with_tools(tools.clone());
    let err = r.start("t", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `second` failed: `mark`: thread `t` was taken over by another process: this process's claim of it lapsed (it was stopped or cut off from the database for longer than the claim's lease), so it stops here without calling a tool or writing a checkpoint"
    );
    assert_eq!(*tools.calls.lock().unwrap(), [r#"mark({"key":1})"#]);
}

/// A store whose claims are confirmed with a new token each time (a double: Postgres
/// renews under one token), so a test can tell which confirmation a call went under.
#[derive(Default)]
struct Renewing {
    fences: std::sync::atomic::AtomicI64,
}

#[async_trait::async_trait]
impl Checkpoints for Renewing {
    async fn append(&self, _: Checkpoint) -> Result<(), StoreError> {
        Ok(())
    }
    async fn load(&self, _: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }
    async fn truncate(&self, _: &str, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
    async fn prune(&self, _: Checkpoint) -> Result<u64, StoreError> {
        Ok(0)
    }
    async fn fence(&self, _: &str) -> Result<switchyard::store::Fence, StoreError> {
        let n = self
            .fences
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        Ok(switchyard::store::Fence {
            token: Some(n),
            until: Some(std::time::Instant::now() + std::time::Duration::from_secs(60)),
        })
    }
}

/// A tool client that could not send its first call in time (its `send_by` passed):
/// records each request's key and token, and whether it was sent.
#[derive(Default)]
struct LateOnce {
    requests: std::sync::Mutex<Vec<(String, Option<i64>, bool)>>,
}

#[async_trait::async_trait]
impl switchyard::tool::ToolClient for LateOnce {
    async fn list_tools(
        &self,
        _: &switchyard::graph::Server,
    ) -> Result<Vec<switchyard::tool::ToolInfo>, switchyard::tool::ToolError> {
        Ok(Vec::new())
    }
    async fn call(
        &self,
        request: &switchyard::tool::ToolRequest,
    ) -> Result<switchyard::tool::ToolReply, switchyard::tool::ToolError> {
        let mut requests = self.requests.lock().unwrap();
        let sent = !requests.is_empty();
        assert!(
            request.send_by.is_some(),
            "the claim's instant is handed on"
        );
        requests.push((request.idempotency_key.clone(), request.fencing_token, sent));
        if !sent {
            return Err(switchyard::tool::ToolError {
                message: "not sent in time".into(),
                transient: false,
                asked: None,
                unsent: true,
            });
        }
        ok(json!("marked"))
    }
}

/// A call the tool client could not send while the claim surely held is not counted as
/// made: the runner confirms the claim again and makes it under the new confirmation,
/// once, and the node goes on.
#[tokio::test]
async fn a_call_not_sent_in_time_is_made_once_the_claim_is_confirmed_again() {
    let tools = Arc::new(LateOnce::default());
    let r =
        Runner::new(graph("two_calls"), Arc::new(Renewing::default())).with_tools(tools.clone());
    let out = r.start("t", json!({})).await.unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    let key = |step| format!("t/0/{step}/0");
    assert_eq!(
        *tools.requests.lock().unwrap(),
        [
            (key(1), Some(1), false),
            (key(1), Some(2), true),
            (key(2), Some(3), true)
        ]
    );
}

#[tokio::test]
async fn a_store_that_keeps_no_records_is_handed_none() {
    let store = Arc::new(Counting::default());
    let r = Runner::new(graph("routes"), store.clone());
    let out = r.start("t", json!({ "n": 2 })).await.unwrap();
    assert_eq!(
        out,
        finished("zero", "classify count_down:1 count_down:0", 4)
    );
    // No record is built, none is handed over, and no snapshot either.
    assert_eq!(
        (
            store.records.load(std::sync::atomic::Ordering::SeqCst),
            store.snapshots.load(std::sync::atomic::Ordering::SeqCst)
        ),
        (0, 0)
    );
    // A store that keeps records gets the run's input checkpoint, the input's and one
    // per step.
    let kept = Arc::new(MemoryStore::new());
    Runner::new(graph("routes"), kept.clone())
        .start("t", json!({ "n": 2 }))
        .await
        .unwrap();
    assert_eq!(kept.load("t").await.unwrap().len(), 6);
}

#[tokio::test]
async fn a_run_from_an_earlier_checkpoint_forks_the_thread_there_in_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let stores: [(&str, Arc<dyn Store>); 2] = [
        ("memory", Arc::new(MemoryStore::new())),
        (
            "sqlite",
            Arc::new(SqliteStore::open(&dir.path().join("b.db")).unwrap()),
        ),
    ];
    for (name, store) in stores {
        let r = Runner::new(graph("count"), store.clone());
        r.start("t", json!({ "goal": 4 })).await.unwrap();
        let first = r.threads().history("t").await.unwrap();
        let end = r.threads().state("t", None).await.unwrap().0;
        // Going on again from a checkpoint in the middle of the run (regenerate): a
        // branch from there, in a run of its own, to the same end.
        let out = r
            .run(
                "t",
                Go::From {
                    at: 6,
                    go: Box::new(Go::resume(None)),
                },
            )
            .await
            .unwrap();
        assert_eq!(
            out,
            finished("done", "n=4 total=10 checks=4 evens=2", 11),
            "{name}"
        );
        let history = r.threads().history("t").await.unwrap();
        assert_eq!(&history[..13], &first[..], "{name}: the first branch stays");
        let branch: Vec<(u64, Option<u64>, u64, u64)> = history[13..]
            .iter()
            .map(|c| (c.seq, c.parent, c.run, c.step))
            .collect();
        assert_eq!(
            branch,
            [
                (13, Some(6), 1, 6),
                (14, Some(13), 1, 7),
                (15, Some(14), 1, 8),
                (16, Some(15), 1, 9),
                (17, Some(16), 1, 10),
                (18, Some(17), 1, 11),
            ],
            "{name}"
        );
        assert_eq!(r.threads().state("t", None).await.unwrap().0, end, "{name}");
        // A new input from the thread's first checkpoint (an edit of the first
        // message): the state the first run found, with the new input.
        let out = r
            .run(
                "t",
                Go::From {
                    at: 0,
                    go: Box::new(Go::Start(json!({ "goal": 1 }))),
                },
            )
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Finished { .. }), "{name}: {out:?}");
        let history = r.threads().history("t").await.unwrap();
        let fork = &history[19..];
        assert_eq!(
            (fork[0].source, fork[0].parent, fork[0].run),
            (Source::Input, Some(0), 2),
            "{name}"
        );
        let latest = r.threads().state("t", None).await.unwrap();
        assert_eq!(latest.0["goal"], 1, "{name}");
        assert_eq!(latest.1.seq, history.last().unwrap().seq, "{name}");
        // Every checkpoint's state, on whichever branch, as history lists it.
        let states = listed_as_read(&r, name).await;
        assert_eq!(
            states[history.len() - 13].0,
            end,
            "{name}: the first branch's end"
        );
        // The thread read again (another process): its latest branch.
        let again = Runner::new(graph("count"), store.clone());
        assert_eq!(
            again.threads().state("t", None).await.unwrap(),
            latest,
            "{name}"
        );
        let err = r
            .run(
                "t",
                Go::From {
                    at: 99,
                    go: Box::new(Go::resume(None)),
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "thread `t` has no checkpoint 99", "{name}");
        // A copy of a checkpoint on a branch: that branch only, numbered again.
        r.threads().fork("t", 15, "copy").await.unwrap();
        let copy = r.threads().history("copy").await.unwrap();
        assert_eq!(
            copy.iter().map(|c| (c.seq, c.parent)).collect::<Vec<_>>(),
            (0..10u64)
                .map(|s| (s, s.checked_sub(1)))
                .collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            r.threads().state("copy", None).await.unwrap().0,
            r.threads().state("t", Some(15)).await.unwrap().0,
            "{name}"
        );
        // Two more branches from checkpoint 6 (three in all, two of them after other
        // records): every state as reading its checkpoint alone gives it.
        for _ in 0..2 {
            let go = Go::From {
                at: 6,
                go: Box::new(Go::resume(None)),
            };
            r.run("t", go).await.unwrap();
        }
        listed_as_read(&r, name).await;
    }
}

/// Every state the history of thread `t` lists, each checked against its checkpoint's
/// state read alone.
async fn listed_as_read(r: &Runner, name: &str) -> Vec<(Json, switchyard::store::Checkpoint)> {
    let history = r.threads().history("t").await.unwrap();
    let states = r.threads().states("t", None, 1000).await.unwrap();
    assert_eq!(states.len(), history.len(), "{name}");
    for (state, record) in &states {
        assert_eq!(
            *state,
            r.threads().state("t", Some(record.seq)).await.unwrap().0,
            "{name}: checkpoint {}",
            record.seq
        );
    }
    states
}

#[tokio::test]
async fn a_pruned_thread_branches_and_lists_its_history_page_by_page() {
    let r = runner("count");
    r.start("t", json!({ "goal": 2 })).await.unwrap();
    r.run(
        "t",
        Go::From {
            at: 4,
            go: Box::new(Go::resume(None)),
        },
    )
    .await
    .unwrap();
    // A page of the history ends where `before` says, whatever branch its
    // checkpoints are on, each with the state of its own branch.
    let all = r.threads().states("t", None, usize::MAX).await.unwrap();
    for before in [3u64, 9, 12] {
        let page = r.threads().states("t", Some(before), 3).await.unwrap();
        let expected: Vec<_> = all
            .iter()
            .filter(|(_, c)| c.seq < before)
            .take(3)
            .cloned()
            .collect();
        assert_eq!(page, expected, "before {before}");
    }
    // Pruned, the thread keeps its latest checkpoint only (the other branch goes); a
    // run from a checkpoint after it branches as on any thread.
    let latest = r.threads().state("t", None).await.unwrap();
    r.threads().prune("t").await.unwrap();
    assert_eq!(r.threads().history("t").await.unwrap().len(), 1);
    assert_eq!(r.threads().state("t", None).await.unwrap().0, latest.0);
    r.start("t", json!({ "goal": 3 })).await.unwrap();
    let history = r.threads().history("t").await.unwrap();
    let input = history
        .iter()
        .find(|c| c.source == Source::Loop && c.node.is_none())
        .unwrap();
    let end = r.threads().state("t", None).await.unwrap().0;
    r.run(
        "t",
        Go::From {
            at: input.seq,
            go: Box::new(Go::resume(None)),
        },
    )
    .await
    .unwrap();
    assert_eq!(r.threads().state("t", None).await.unwrap().0, end);
    let after = r.threads().history("t").await.unwrap();
    let first = &after[history.len()];
    assert_eq!(first.parent, Some(input.seq));
    for (state, c) in r.threads().states("t", None, usize::MAX).await.unwrap() {
        assert_eq!(
            state,
            r.threads().state("t", Some(c.seq)).await.unwrap().0,
            "{}",
            c.seq
        );
    }
}

#[tokio::test]
async fn messages_without_ids_are_given_the_ids_of_where_they_were_written() {
    let run_once = || async {
        let store = Arc::new(MemoryStore::new());
        let r = Runner::new(graph("message_ids"), store.clone());
        r.start(
            "t",
            json!({ "messages": [{ "role": "user", "content": "hi" }] }),
        )
        .await
        .unwrap();
        let run = store.load("t").await.unwrap()[0].run;
        (r.threads().state("t", None).await.unwrap().0, run)
    };
    let (state, run) = run_once().await;
    let messages = state["messages"].as_array().unwrap();
    let ids: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 5);
    // The step's first assistant message is its reply: the id its streamed text had.
    assert_eq!(ids[2], switchyard::run::reply_id("t", run, 1));
    assert_eq!(ids[4], "mine");
    for (i, id) in ids[..4].iter().enumerate() {
        assert!(
            id.len() == 36 && &id[14..15] == "8",
            "a made id is a UUID of version 8: {id}"
        );
        assert!(!ids[i + 1..].contains(id), "{ids:?}");
    }
    assert_eq!(
        crate::util::without_made_ids(state.clone())["messages"],
        json!([
            { "role": "user", "content": "hi" },
            { "role": "tool", "content": "looked up", "tool_call_id": "c1" },
            { "role": "assistant", "content": "hello" },
            { "role": "assistant", "content": "anything else?" },
            { "id": "mine", "role": "assistant", "content": "kept" }
        ])
    );
    // The same run writes the same ids: a replay reads the state it recorded.
    assert_eq!(run_once().await.0, state);
}

#[tokio::test]
async fn a_goto_that_would_skip_a_required_policy_is_refused() {
    let r = Runner::new(graph("agent"), Arc::new(MemoryStore::new()));
    let go = |node: &str| switchyard::run::Go::StartAt {
        input: json!({}),
        node: node.into(),
    };
    assert_eq!(
        r.check("t", go("act")).await.unwrap_err().to_string(),
        "command.goto is refused: from `act` the run could reach side-effecting `act` without passing a policy node, and the graph sets `require_policy`"
    );
    assert_eq!(
        r.check("t", go("actt")).await.unwrap_err().to_string(),
        "command.goto is refused: `actt` is not a node of the graph; did you mean `act`?"
    );
    // The policy guards every way on from it; the end runs nothing.
    r.check("t", go("gate")).await.unwrap();
    r.check("t", go("__end__")).await.unwrap();
}

/// `graphs/remember.toml`: what one thread puts in the builtin store, another thread
/// (another runner, another process for SQLite) reads, in every store that keeps
/// items; the items are the store's, beside the threads' checkpoints.
#[tokio::test]
async fn a_graph_remembers_across_threads_through_the_builtin_store() {
    type Open = Box<dyn Fn() -> Arc<dyn Store>>;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remember.db");
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let stores: [(&str, Open); 2] = [
        ("memory", Box::new(move || memory.clone())),
        (
            "sqlite",
            Box::new(move || Arc::new(SqliteStore::open(&db).unwrap())),
        ),
    ];
    let graph = Arc::new(switchyard::load_graph(&root().join("graphs/remember.toml")).unwrap());
    for (name, open) in stores {
        let run = |thread: &'static str, input: serde_json::Value| {
            let store = open();
            let graph = graph.clone();
            async move {
                let out = Runner::new(graph, store.clone())
                    .with_items(store, None)
                    .start(thread, input)
                    .await
                    .unwrap();
                match out {
                    Outcome::Finished { response, .. } => response.unwrap_or_default(),
                    other => panic!("{other:?}"),
                }
            }
        };
        assert_eq!(
            run("a", json!({"user": "ann"})).await,
            "I do not know your favourite colour yet.",
            "{name}"
        );
        assert_eq!(
            run("b", json!({"user": "ann", "colour": "teal"})).await,
            "I will remember teal.",
            "{name}"
        );
        assert_eq!(
            run("c", json!({"user": "ann"})).await,
            "Your favourite colour is teal.",
            "{name}"
        );
        assert_eq!(
            run("d", json!({"user": "bo"})).await,
            "I do not know your favourite colour yet.",
            "{name}"
        );
        let kept = open().items_under("", 0, None).await.unwrap();
        assert_eq!(
            kept.iter()
                .map(|i| (
                    i.namespace.joined(),
                    i.key.as_str(),
                    serde_json::Value::Object(i.value.clone())
                ))
                .collect::<Vec<_>>(),
            [(
                "users.ann".to_string(),
                "favourite_colour",
                json!({"colour": "teal"})
            )],
            "{name}"
        );
    }
}

/// A runner whose store keeps no items says so when a node reads the builtin store.
#[tokio::test]
async fn the_builtin_store_on_a_store_that_keeps_nothing_fails_its_node_saying_why() {
    let graph = Arc::new(switchyard::load_graph(&root().join("graphs/remember.toml")).unwrap());
    let err = Runner::new(graph, Arc::new(NoStore::new()))
        .with_items(Arc::new(NoStore::new()), None)
        .start("t", json!({"user": "ann"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `recall` failed: `get` on server `memory`: the store `none` keeps no items: use `--store memory`, `sqlite:PATH` or `postgres://...` to keep them"
    );
}

/// The builtin store's tools embed what they put and rank a `search` with a `query`
/// when the runner is given an index, as the server's store API does.
#[tokio::test]
async fn the_builtin_stores_search_ranks_by_meaning_with_an_index() {
    use switchyard::graph::{Server, ServerTransport};
    use switchyard::run::StoreTools;
    use switchyard::store::{Embed, Index};
    use switchyard::tool::{ToolClient, ToolRequest};
    struct Letters;
    #[async_trait::async_trait]
    impl Embed for Letters {
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
            Ok(texts
                .iter()
                .map(|t| {
                    let n = |c: char| t.chars().filter(|x| *x == c).count() as f32;
                    vec![n('a'), n('b'), n('c'), t.chars().count() as f32]
                })
                .collect())
        }
    }
    let index = Index {
        embed: Arc::new(Letters),
        fields: vec!["text".into()],
    };
    let tools = StoreTools::new(
        Arc::new(MemoryStore::new()),
        Some(index),
        Arc::new(switchyard::tool::NoTools),
    );
    let server = Server {
        name: "memory".into(),
        transport: ServerTransport::Store,
        roots: Vec::new(),
        sampling: false,
        protocol: Default::default(),
    };
    let call = |tool: &str, args: serde_json::Value| {
        ToolRequest::new(server.clone(), tool, args, "t/0/1/1")
    };
    for (key, text) in [("far", "ccc"), ("near", "aaa"), ("none", "")] {
        let mut value = json!({"text": text});
        if text.is_empty() {
            value = json!({"other": 1});
        }
        tools
            .call(&call(
                "put",
                json!({"namespace": ["n"], "key": key, "value": value}),
            ))
            .await
            .unwrap();
    }
    let found = tools
        .call(&call(
            "search",
            json!({"namespace_prefix": ["n"], "query": "a"}),
        ))
        .await
        .unwrap();
    assert_eq!(
        found.content,
        json!([
            {"namespace": ["n"], "key": "near", "value": {"text": "aaa"}, "score": 1.0},
            {"namespace": ["n"], "key": "far", "value": {"text": "ccc"}, "score": 0.5},
            {"namespace": ["n"], "key": "none", "value": {"other": 1}}
        ])
    );
}

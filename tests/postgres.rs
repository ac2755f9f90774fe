//! The Postgres store against a real cluster that the tests start themselves
//! (`tests/servers/postgres.sh`: Debian's postgresql, initdb in a temporary directory,
//! removed when the test binary exits), or the server `$SWITCHYARD_TEST_POSTGRES`
//! names. Each test gets a database of its own. The store suite it passes is the one
//! in `store.rs`.

use std::sync::{Arc, OnceLock};
use switchyard::store::Store;
use switchyard::store::{Catalog, Checkpoints};
use switchyard::store::{PostgresStore, StoreError};

/// The URL of the cluster's `postgres` database, the cluster started on first use.
fn cluster() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| std::env::var("SWITCHYARD_TEST_POSTGRES").unwrap_or_else(|_| own_cluster()))
}

/// A cluster of its own (for a test that restarts it), and the URL of its `postgres`
/// database; removed when the test binary exits.
pub(crate) fn own_cluster() -> String {
    let out = std::process::Command::new("bash")
        .arg(crate::util::root().join("tests/servers/postgres.sh"))
        .arg(std::process::id().to_string())
        // The tests check behaviour, not power-loss safety.
        .args(["-c", "fsync=off"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "the test cluster did not start");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Restarts the cluster of `url` (one `own_cluster` made): every connection is cut,
/// and the server is back within a second or so.
pub(crate) fn restart(url: &str) {
    let dir = url
        .split("host=")
        .nth(1)
        .and_then(|h| h.split('&').next())
        .expect("a socket directory");
    let script = format!(
        "bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); as=(); [ \"$(id -u)\" -eq 0 ] && as=(runuser -u postgres --); \"${{as[@]}}\" \"$bin/pg_ctl\" -D {dir}/data -m fast -w restart >/dev/null"
    );
    let status = std::process::Command::new("bash")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success(), "the cluster did not restart");
}

/// A new, empty database on the test cluster, and its URL.
pub(crate) fn database() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    database_on(cluster(), &name)
}

/// A database on a cluster of its own (for a test that restarts it): the cluster's
/// URL, to restart it, and the database's.
pub(crate) fn own_database() -> (String, String) {
    let cluster = own_cluster();
    let db = database_on(&cluster, "own");
    (cluster, db)
}

/// A new, empty database `name` on the cluster of `admin`, and its URL.
fn database_on(admin: &str, name: &str) -> String {
    let admin = admin.to_string();
    let create = format!("CREATE DATABASE {name}");
    // On a thread of its own: the client blocks on a runtime of its own, which an
    // async test's runtime would not allow.
    let url = admin.clone();
    std::thread::spawn(move || {
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to the test cluster {url}: {e}"))
            .batch_execute(&create)
            .unwrap();
    })
    .join()
    .unwrap();
    admin.replacen("/postgres?", &format!("/{name}?"), 1)
}

/// A raw connection to `url`, to look at or spoil what the store wrote.
pub(crate) fn connect(url: &str) -> Raw {
    Raw(url.to_string())
}

/// A raw connection's calls, each on a connection of its own made on a thread of its
/// own: the client blocks on a runtime of its own, which an async test's runtime would
/// not allow.
pub(crate) struct Raw(String);

type Params<'a> = &'a [&'a (dyn postgres::types::ToSql + Sync)];

impl Raw {
    fn on<T: Send>(&self, f: impl FnOnce(&mut postgres::Client) -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| f(&mut postgres::Client::connect(&self.0, postgres::NoTls).unwrap()))
                .join()
                .unwrap()
        })
    }

    pub(crate) fn batch_execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        self.on(|c| c.batch_execute(sql))
    }

    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        self.on(|c| c.query(sql, params))
    }

    pub(crate) fn query_one(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<postgres::Row, postgres::Error> {
        self.on(|c| c.query_one(sql, params))
    }
}

#[tokio::test]
async fn a_new_database_becomes_a_store_once_however_many_open_it_at_once() {
    let url = database();
    let opened: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PostgresStore::open(&url))
        })
        .collect();
    for o in opened {
        let store = o.join().unwrap().unwrap();
        assert_eq!(store.layout_version().await.unwrap(), 7);
    }
    let tables: Vec<String> = connect(&url)
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'switchyard' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "assistant_versions",
            "assistants",
            "checkpoints",
            "claims",
            "crons",
            "graphs",
            "items",
            "layout",
            "llm_cache",
            "run_events",
            "runs",
            "snapshots",
            "threads"
        ]
    );
}

#[test]
fn a_schema_that_is_not_a_store_or_of_a_newer_layout_is_refused_and_left_alone() {
    let url = database();
    let mut raw = connect(&url);
    raw.batch_execute("CREATE SCHEMA switchyard; CREATE TABLE switchyard.orders (id INT); INSERT INTO switchyard.orders VALUES (7)")
        .unwrap();
    let err = PostgresStore::open(&url).err().unwrap();
    assert!(matches!(err, StoreError::PostgresForeign { .. }), "{err:?}");
    let shown = url.clone();
    assert_eq!(
        err.to_string(),
        format!(
            "the schema `switchyard` of {shown} is not a Switchyard store (it holds the tables `orders`); it is left as it is: give --store another database"
        )
    );
    let n: i32 = raw
        .query_one("SELECT id FROM switchyard.orders", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 7);

    // A store that a newer Switchyard made.
    let url = database();
    PostgresStore::open(&url).unwrap();
    connect(&url)
        .batch_execute("UPDATE switchyard.layout SET version = 9")
        .unwrap();
    let err = PostgresStore::open(&url).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint store {url} has layout version 9, and this Switchyard reads version 7; use another database"
        )
    );
    let v: i32 = connect(&url)
        .query_one("SELECT version FROM switchyard.layout", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, 9, "left as it was");
}

#[test]
fn an_unreachable_database_is_an_error_naming_it_without_its_password() {
    let err = PostgresStore::open("postgres://me:hunter2@/nowhere?host=/nonexistent&port=1")
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.starts_with("checkpoint store postgres://me:***@/nowhere?host=/nonexistent&port=1: error connecting to server"),
        "{text}"
    );
    assert!(!text.contains("hunter2"));
    let err = PostgresStore::open("postgres://[bad").err().unwrap();
    assert_eq!(
        err.to_string(),
        "checkpoint store postgres://[bad: invalid connection string: invalid value for option `host`"
    );
}

/// Milliseconds left of the (one) claim's lease, on the database's clock.
fn lease_left(url: &str) -> i64 {
    connect(url)
        .query_one(
            "SELECT until_ms - (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT FROM switchyard.claims",
            &[],
        )
        .unwrap()
        .get(0)
}

/// Waits up to 10 s for `done`, failing with `what`.
async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn claim_rows(url: &str) -> i64 {
    connect(url)
        .query_one("SELECT count(*) FROM switchyard.claims", &[])
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_claim_holds_across_stores_and_goes_with_its_holder() {
    let url = database();
    let a = PostgresStore::open(&url).unwrap();
    let b = PostgresStore::open(&url).unwrap();
    let held = a.claim("t").await.unwrap();
    let refused = format!(
        "thread `t` is being run by process {}; wait for it to pause or finish, or stop it (Ctrl-C) first",
        std::process::id()
    );
    assert_eq!(b.claim("t").await.unwrap_err().to_string(), refused);
    // A second claim through the same store is refused too.
    assert_eq!(a.claim("t").await.unwrap_err().to_string(), refused);
    b.claim("u").await.unwrap().release().await;
    held.release().await;
    let again = b.claim("t").await.unwrap();
    assert_eq!(claim_rows(&url), 1);
    // Dropped unreleased (a run's task cancelled): released soon all the same.
    drop(again);
    eventually("the claim was never released", || async {
        a.claim("t").await.map(drop).is_ok()
    })
    .await;
    eventually("claims left", || async { claim_rows(&url) == 0 }).await;
}

/// A process that dies holding a claim leaves its row: a process of the same machine
/// sees the holder is gone and takes the thread at once; one of another machine waits
/// for the lease to run out.
#[tokio::test]
async fn a_dead_holders_claim_is_taken_at_once_on_its_machine_and_after_its_lease_elsewhere() {
    let url = database();
    let a = PostgresStore::open(&url).unwrap();
    let b = PostgresStore::open(&url).unwrap();
    // This machine as a claim names it.
    let held = a.claim("probe").await.unwrap();
    let here: String = connect(&url)
        .query_one("SELECT holder FROM switchyard.claims", &[])
        .unwrap()
        .get(0);
    held.release().await;
    let left = |thread: &str, holder: &str, pid: i64| {
        connect(&url)
            .query(
                "INSERT INTO switchyard.claims (thread, holder, pid, since_ms, token, until_ms)
                 VALUES ($1, $2, $3, 0, nextval('switchyard.claim_tokens'), 9000000000000)",
                &[&thread, &holder, &pid],
            )
            .unwrap();
    };
    // Left by a process of this machine that has exited.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = i64::from(child.id());
    child.wait().unwrap();
    left("t", &here, dead);
    b.claim("t").await.unwrap().release().await;
    // Left by another machine's process: refused while its lease runs, taken after.
    left("u", "elsewhere", 77);
    assert_eq!(
        b.claim("u").await.unwrap_err().to_string(),
        "thread `u` is being run by process 77; wait for it to pause or finish, or stop it (Ctrl-C) first"
    );
    connect(&url)
        .batch_execute("UPDATE switchyard.claims SET until_ms = 0 WHERE thread = 'u'")
        .unwrap();
    b.claim("u").await.unwrap().release().await;
}

/// A holder stopped past its lease (SIGSTOP, a paused VM) keeps its thread while its
/// presence lasts; once that is gone too (a Postgres restart meanwhile) its thread is
/// taken over, and it wakes to find it may neither call a tool (`fence`) nor write a
/// checkpoint, and its release leaves the new holder's claim alone.
#[tokio::test]
async fn a_claim_that_lapsed_and_was_taken_over_fences_its_old_holder_out() {
    use switchyard::store::Claim;
    let url = database();
    // Leases long enough that no renewal comes during the test.
    let long = std::time::Duration::from_secs(60);
    let a = PostgresStore::open(&url).unwrap().with_claim_lease(long);
    let b = PostgresStore::open(&url).unwrap();
    let held: Claim = a.claim("t").await.unwrap();
    a.append(crate::store::record("t", 0, "n", serde_json::json!(0)))
        .await
        .unwrap();
    // A call under the claim carries its token, and may be sent for nine tenths of a
    // lease from before the renewal.
    let asked = std::time::Instant::now();
    let fence = a.fence("t").await.unwrap();
    let (Some(old_token), Some(until)) = (fence.token, fence.until) else {
        panic!("a claimed thread's fence names its token and instant: {fence:?}");
    };
    assert!(until >= asked + long * 9 / 10 && until <= std::time::Instant::now() + long * 9 / 10);
    // A holder that stopped renewing (stopped, not dead) keeps its thread while its
    // presence lasts: never doubled.
    connect(&url)
        .batch_execute("UPDATE switchyard.claims SET until_ms = 0")
        .unwrap();
    assert!(matches!(
        b.claim("t").await,
        Err(StoreError::Claimed { .. })
    ));
    // Its presence gone too (a Postgres restart while it was stopped): taken over.
    connect(&url)
        .batch_execute("UPDATE switchyard.claims SET presence = 0")
        .unwrap();
    let taken = b.claim("t").await.unwrap();
    // The takeover's token is higher: a tool that keeps the highest refuses the old.
    assert!(b.fence("t").await.unwrap().token > Some(old_token));
    let lost = "thread `t` was taken over by another process: this process's claim of it lapsed (it was stopped or cut off from the database for longer than the claim's lease), so it stops here without calling a tool or writing a checkpoint";
    assert_eq!(a.fence("t").await.unwrap_err().to_string(), lost);
    assert!(matches!(
        a.append(crate::store::record("t", 1, "n", serde_json::json!(1)))
            .await,
        Err(StoreError::ClaimLost { .. })
    ));
    assert_eq!(b.load("t").await.unwrap().len(), 1);
    // Fenced at commit too, before it knew: a store that had not asked.
    let c = PostgresStore::open(&url).unwrap().with_claim_lease(long);
    let c_held = c.claim("v").await.unwrap();
    connect(&url)
        .batch_execute("UPDATE switchyard.claims SET until_ms = 0, presence = 0 WHERE thread = 'v'")
        .unwrap();
    let v_taken = b.claim("v").await.unwrap();
    assert_eq!(
        c.append(crate::store::record("v", 0, "n", serde_json::json!(0)))
            .await
            .unwrap_err()
            .to_string(),
        lost.replace("`t`", "`v`")
    );
    assert!(b.load("v").await.unwrap().is_empty());
    // The old holders' releases leave the new claims in place.
    held.release().await;
    c_held.release().await;
    assert_eq!(claim_rows(&url), 2);
    b.append(crate::store::record("t", 1, "n", serde_json::json!(1)))
        .await
        .unwrap();
    taken.release().await;
    v_taken.release().await;
    assert_eq!(claim_rows(&url), 0);
}

/// A claim is renewed while held, so a holder that is alive keeps its thread however
/// long its run; and a claim survives a Postgres restart, its holder going on.
#[tokio::test]
async fn a_claim_is_renewed_while_held_and_survives_a_postgres_restart() {
    let (cluster, url) = own_database();
    let lease = std::time::Duration::from_millis(400);
    let a = PostgresStore::open(&url).unwrap().with_claim_lease(lease);
    let b = PostgresStore::open(&url).unwrap();
    let held = a.claim("t").await.unwrap();
    a.append(crate::store::record("t", 0, "n", serde_json::json!(0)))
        .await
        .unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(matches!(
        b.claim("t").await,
        Err(StoreError::Claimed { .. })
    ));
    assert!(lease_left(&url) > 0, "the lease was not renewed");
    restart(&cluster);
    a.fence("t").await.unwrap();
    a.append(crate::store::record("t", 1, "n", serde_json::json!(1)))
        .await
        .unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(
        lease_left(&url) > 0,
        "the lease was not renewed after the restart"
    );
    assert!(matches!(
        b.claim("t").await,
        Err(StoreError::Claimed { .. })
    ));
    held.release().await;
    assert_eq!(b.load("t").await.unwrap().len(), 2);
}

/// A run whose lease ran out is taken over only when nobody holds its thread's claim.
#[tokio::test]
async fn a_run_is_taken_over_only_once_its_threads_claim_is_free() {
    use switchyard::store::{RunQueue, RunRecord, RunStatus};
    let url = database();
    let store = PostgresStore::open(&url).unwrap();
    let run = RunRecord {
        id: "r".into(),
        thread: "t".into(),
        assistant: "g".into(),
        status: RunStatus::Running,
        created_ms: 1,
        updated_ms: 1,
        metadata: serde_json::json!({}),
        kwargs: serde_json::json!({}),
        multitask_strategy: "reject".into(),
        error: None,
        first_seq: None,
    };
    store.put_run(&run).await.unwrap();
    let graphs = ["g".to_string()];
    let claim = store.claim("t").await.unwrap();
    assert!(
        store
            .claim_run("w", &graphs, 10, 20)
            .await
            .unwrap()
            .is_none()
    );
    claim.release().await;
    let (taken, over) = store
        .claim_run("w", &graphs, 10, 20)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.id.as_str(), over), ("r", true));
}

#[tokio::test]
async fn a_corrupt_row_is_an_error_naming_the_thread_not_a_panic() {
    let url = database();
    let store = PostgresStore::open(&url).unwrap();
    store
        .append(crate::store::record("a", 0, "n", serde_json::json!(1)))
        .await
        .unwrap();
    connect(&url)
        .batch_execute(
            "UPDATE switchyard.checkpoints SET writes = '[{\"field\": ' , status = 'odd'",
        )
        .unwrap();
    let err = store.load("a").await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("checkpoint store: a record of thread `a` is corrupt: `writes`: "),
        "{err}"
    );
    connect(&url)
        .batch_execute(
            "UPDATE switchyard.checkpoints SET writes = '[]', status = 'running', seq = 1",
        )
        .unwrap();
    assert_eq!(
        store.load("a").await.unwrap_err().to_string(),
        "checkpoint store: a record of thread `a` is corrupt: record 0 is missing"
    );
    let _: Arc<dyn Store> = Arc::new(store);
}

#[tokio::test]
async fn a_store_of_layout_1_is_brought_forward_with_every_record_following_the_one_before() {
    // Layout 1 (and 2) as it was: no `parent`, claims without leases, no items.
    let url = database();
    let records: Vec<_> = (0..3)
        .map(|seq| crate::store::record("t", seq, "n", serde_json::json!(seq)))
        .collect();
    {
        let store = PostgresStore::open(&url).unwrap();
        store.append_all(records.clone()).await.unwrap();
    }
    connect(&url)
        .batch_execute(
            "ALTER TABLE switchyard.checkpoints DROP COLUMN parent, DROP COLUMN usage;
             ALTER TABLE switchyard.claims DROP COLUMN token, DROP COLUMN until_ms, DROP COLUMN presence;
             DROP SEQUENCE switchyard.claim_tokens;
             DROP INDEX switchyard.runs_in_flight, switchyard.runs_pending_by_thread;
             DROP TABLE switchyard.items;
             DROP TABLE switchyard.crons;
             DROP TABLE switchyard.assistants, switchyard.assistant_versions;
             INSERT INTO switchyard.claims (thread, holder, pid, since_ms) VALUES ('t', 'old', 1, 0);
             UPDATE switchyard.layout SET version = 1",
        )
        .unwrap();
    let store = PostgresStore::open(&url).unwrap();
    assert_eq!(store.layout_version().await.unwrap(), 7);
    // A claim of layout 1 or 2 (an advisory lock's note) has lapsed.
    store.claim("t").await.unwrap().release().await;
    // Layouts before 7 kept no usage.
    let unused: Vec<_> = records
        .into_iter()
        .map(|r| switchyard::store::Checkpoint {
            usage: Default::default(),
            ..r
        })
        .collect();
    assert_eq!(store.load("t").await.unwrap(), unused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_wait_their_turn_for_a_pooled_connection_and_then_fail_saying_so() {
    let url = database();
    let store = Arc::new(PostgresStore::open(&url).unwrap());
    // Another client holds a lock on `runs` in an open transaction: each call reading
    // runs waits for it, holding one of the pool's 8 connections.
    let (locked, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (tell, wait) = locked;
    let (let_go, until) = release;
    let admin = url.clone();
    let holder = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        let mut t = c.transaction().unwrap();
        t.batch_execute("LOCK TABLE switchyard.runs IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        tell.send(()).unwrap();
        let _ = until.recv();
        t.rollback().unwrap();
    });
    wait.recv().unwrap();
    let calls: Vec<_> = (0..9)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.get_run(&format!("run-{i}")).await })
        })
        .collect();
    // The ninth waits 10 s for a connection, then fails; the others answer when the
    // lock goes.
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let_go.send(()).unwrap();
    holder.join().unwrap();
    let mut answered = 0;
    let mut refused = Vec::new();
    for call in calls {
        match call.await.unwrap() {
            Ok(None) => answered += 1,
            Ok(Some(run)) => panic!("no run was written: {run:?}"),
            Err(e) => refused.push(e.to_string()),
        }
    }
    assert_eq!(answered, 8);
    assert_eq!(
        refused,
        [format!(
            "checkpoint store {}: all 8 connections of the pool were busy for 10 s: the database answers more slowly than calls come",
            PostgresStore::shown(&url)
        )]
    );
    // The pool is whole again.
    assert_eq!(store.get_run("run-0").await.unwrap(), None);
}

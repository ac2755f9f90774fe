//! The long-term store's latency on each store (`cargo bench --bench items`; one
//! store: `-- memory`, `-- sqlite` or `-- postgres`), in process, through the same
//! calls the server's `/store` API and the builtin `store` tools make
//! (`store::item_ops`): 1,000 items in 100 namespaces (`["users", "uN"]`, ten keys
//! each), then, each timed one at a time and reported as the median and the 99th
//! percentile:
//!
//! - a put of an item that is there (an upsert) and of a new one;
//! - a get;
//! - a search of one namespace (ten items) and a search of all 1,000 under `["users"]`
//!   with a filter that keeps ten;
//! - a listing of the namespaces (100).
//!
//! SQLite is a file in a temporary directory (`--durability normal`, as the server's
//! default); Postgres a throwaway cluster (`tests/servers/postgres.sh`: fsync and
//! synchronous_commit on, a Unix socket).

#[path = "shared/serve.rs"]
mod serve;

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::store::{
    Items, Listing, MemoryStore, PostgresStore, Put, Search, SqliteStore, item_ops,
};

const NAMESPACES: usize = 100;
const KEYS: usize = 10;
const ROUNDS: usize = 2_000;

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    if wanted("memory") {
        rt.block_on(measure("memory", Arc::new(MemoryStore::new())));
    }
    if wanted("sqlite") {
        let store = SqliteStore::open(&dir.path().join("items.db")).unwrap();
        rt.block_on(measure("sqlite", Arc::new(store)));
    }
    if wanted("postgres") {
        let db = serve::postgres_database(&serve::postgres_cluster(), "items");
        let store = PostgresStore::open(&db).unwrap();
        rt.block_on(measure("postgres", Arc::new(store)));
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn put(ns: usize, key: usize, n: usize) -> Put {
    Put {
        namespace: vec!["users".into(), format!("u{ns}")],
        key: format!("k{key}"),
        value: json!({"n": n, "theme": "dark", "note": "x".repeat(100)})
            .as_object()
            .unwrap()
            .clone(),
        ttl_minutes: None,
        index: Default::default(),
    }
}

async fn measure(name: &str, items: Arc<dyn Items>) {
    let items = &*items;
    for ns in 0..NAMESPACES {
        for key in 0..KEYS {
            item_ops::put(items, put(ns, key, ns * KEYS + key), None, now_ms())
                .await
                .unwrap();
        }
    }
    let report = |what: &str, mut times: Vec<Duration>| {
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!(
            "{name:<8} {what:<44} p50 {:>8.1} us   p99 {:>8.1} us",
            at(0.5),
            at(0.99)
        );
    };
    let mut times = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let p = put(i % NAMESPACES, i % KEYS, i);
        let t = Instant::now();
        item_ops::put(items, p, None, now_ms()).await.unwrap();
        times.push(t.elapsed());
    }
    report("put (an item that is there)", std::mem::take(&mut times));
    for i in 0..ROUNDS {
        let p = put(i % NAMESPACES, KEYS + i, i);
        let t = Instant::now();
        item_ops::put(items, p, None, now_ms()).await.unwrap();
        times.push(t.elapsed());
    }
    report("put (a new item)", std::mem::take(&mut times));
    for i in 0..ROUNDS {
        let labels = vec!["users".to_string(), format!("u{}", i % NAMESPACES)];
        let t = Instant::now();
        let got = item_ops::get(items, labels, &format!("k{}", i % KEYS), true, now_ms())
            .await
            .unwrap();
        times.push(t.elapsed());
        assert!(got.is_some());
    }
    report("get", std::mem::take(&mut times));
    for i in 0..ROUNDS / 4 {
        let search = Search {
            prefix: vec!["users".into(), format!("u{}", i % NAMESPACES)],
            limit: 10,
            ..Search::default()
        };
        let t = Instant::now();
        let found = item_ops::search(items, &search, None, true, now_ms())
            .await
            .unwrap();
        times.push(t.elapsed());
        assert_eq!(found.len(), 10);
    }
    report(
        "search one namespace (10 of its items)",
        std::mem::take(&mut times),
    );
    let all = (NAMESPACES * KEYS) + ROUNDS;
    for _ in 0..ROUNDS / 20 {
        let search = Search {
            prefix: vec!["users".into()],
            filter: json!({"n": {"$gte": 990}, "theme": "dark"})
                .as_object()
                .unwrap()
                .clone(),
            limit: 10,
            offset: 0,
            query: None,
        };
        let t = Instant::now();
        let found = item_ops::search(items, &search, None, false, now_ms())
            .await
            .unwrap();
        times.push(t.elapsed());
        assert_eq!(found.len(), 10);
    }
    report(
        &format!("search {all} items with a filter (10 kept)"),
        std::mem::take(&mut times),
    );
    for _ in 0..ROUNDS / 20 {
        let listing = Listing {
            prefix: vec!["users".into()],
            limit: 1000,
            ..Listing::default()
        };
        let t = Instant::now();
        let found = item_ops::namespaces(items, &listing, now_ms())
            .await
            .unwrap();
        times.push(t.elapsed());
        assert_eq!(found.len(), NAMESPACES);
    }
    report("list namespaces (100)", times);
}

//! The long-term store (LangGraph's `BaseStore`, "memory across threads"): JSON objects
//! under a key in a namespace, a path of labels such as `["users", "u1"]`, which any
//! client, and any thread's runs, read and write. Every store keeps them beside its
//! threads ([`Items`]); what a search or a listing means (filters, order, paging,
//! depth) is decided here, once for every store, over the rows a store hands back.

use super::StoreError;
use async_trait::async_trait;
use serde_json::{Map, Value as Json};
use std::cmp::Ordering;

/// An item: a JSON object under `key` in `namespace`.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub namespace: Namespace,
    pub key: String,
    pub value: Map<String, Json>,
    /// Unix milliseconds: the first put, and the last.
    pub created_ms: u64,
    pub updated_ms: u64,
    /// When it is gone (Unix milliseconds), and by how much a read that refreshes it
    /// puts that off: both none for an item that does not expire.
    pub expires_ms: Option<u64>,
    pub ttl_ms: Option<u64>,
    /// The vectors of its indexed texts, for semantic search (see `index.rs`); none
    /// when it was put without embedding.
    pub vectors: Vec<Vec<f32>>,
}

impl Item {
    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|e| e <= now_ms)
    }
}

/// A namespace: one or more labels, none empty and none with a period (the period
/// joins them in a stored row and in a `GET` request's query).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Namespace(Vec<String>);

impl Namespace {
    /// `labels` as a namespace, or why they are not one.
    pub fn new(labels: Vec<String>) -> Result<Self, String> {
        if labels.is_empty() {
            return Err("a namespace has at least one label".into());
        }
        Self::prefix(labels)
    }

    /// `labels` as the start of namespaces: none (every namespace) or more.
    pub fn prefix(labels: Vec<String>) -> Result<Self, String> {
        for (i, label) in labels.iter().enumerate() {
            if label.is_empty() {
                return Err(format!(
                    "namespace label {} is empty; labels are non-empty and without periods",
                    i + 1
                ));
            }
            if label.contains('.') {
                return Err(format!(
                    "namespace label `{label}` holds a period; labels are non-empty and without periods"
                ));
            }
        }
        Ok(Namespace(labels))
    }

    /// The labels joined by periods, as a store keeps them: `users.u1`.
    pub fn joined(&self) -> String {
        self.0.join(".")
    }

    /// A namespace a store kept (see [`Namespace::joined`]).
    pub fn from_joined(text: &str) -> Self {
        Namespace(text.split('.').map(str::to_string).collect())
    }

    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// Whether `self` starts with `prefix`, `*` in it matching any label.
    fn starts_with(&self, prefix: &[String]) -> bool {
        prefix.len() <= self.0.len() && labels_match(&self.0[..prefix.len()], prefix)
    }

    fn ends_with(&self, suffix: &[String]) -> bool {
        suffix.len() <= self.0.len() && labels_match(&self.0[self.0.len() - suffix.len()..], suffix)
    }
}

fn labels_match(labels: &[String], pattern: &[String]) -> bool {
    labels.iter().zip(pattern).all(|(l, p)| p == "*" || l == p)
}

/// The items a store keeps: the rows; what a search means is [`Search`]'s.
#[async_trait]
pub trait Items: Send + Sync {
    /// Writes `item` in place of any under its namespace and key, keeping the first
    /// put's `created_ms`.
    async fn put_item(&self, item: &Item) -> Result<(), StoreError>;
    /// The item under `namespace` (joined) and `key`, expired or not.
    async fn get_item(&self, namespace: &str, key: &str) -> Result<Option<Item>, StoreError>;
    /// Removes it; none there is no error.
    async fn delete_item(&self, namespace: &str, key: &str) -> Result<(), StoreError>;
    /// The items alive at `now_ms` whose namespace (joined) is `prefix` or starts with
    /// `prefix` and a period (every namespace when `prefix` is empty), in the order the
    /// items were first put (a put again keeps an item's place), as LangGraph's server
    /// lists them; only `page` of them when given.
    async fn items_under(
        &self,
        prefix: &str,
        now_ms: u64,
        page: Option<Page>,
    ) -> Result<Vec<Item>, StoreError>;
    /// The namespaces (joined) under `prefix`, as for [`Items::items_under`], that hold
    /// an item alive at `now_ms`, each once, in any order.
    async fn item_namespaces(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError>;
    /// Puts off the expiry of the item under `namespace` and `key` to `expires_ms`, if it
    /// still has a TTL (one put again without one meanwhile keeps none).
    async fn refresh_item(
        &self,
        namespace: &str,
        key: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError>;
    /// Removes every item expired at `now_ms`; how many.
    async fn delete_expired_items(&self, now_ms: u64) -> Result<u64, StoreError>;
}

/// A page of rows: `offset` skipped, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub offset: usize,
    pub limit: usize,
}

/// A search: items under a namespace prefix that fit a filter, a page of them.
#[derive(Debug, Clone, Default)]
pub struct Search {
    pub prefix: Vec<String>,
    /// Field of the value -> a value it equals, or `{"$op": value}` with `$eq`, `$ne`,
    /// `$gt`, `$gte`, `$lt`, `$lte` (see [`Search::check`]).
    pub filter: Map<String, Json>,
    pub limit: usize,
    pub offset: usize,
    /// Semantic search: the items ranked by their similarity to it (with an index).
    pub query: Option<String>,
}

impl Search {
    /// Why the filter cannot be applied: an operator it does not know.
    pub fn check(&self) -> Result<(), String> {
        for condition in self.filter.values() {
            if let Some(ops) = operators(condition) {
                for op in ops.keys() {
                    if !matches!(op.as_str(), "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte") {
                        return Err(format!(
                            "filter operator `{op}` is not one of $eq, $ne, $gt, $gte, $lt, $lte"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The page of `items` (the live items under the prefix's fixed part, as
    /// [`Items::items_under`] hands them, in its order) this search asks for: those
    /// whose namespace fits the prefix's `*`s and whose value fits the filter, `offset`
    /// skipped, at most `limit`.
    pub fn page(&self, items: Vec<Item>) -> Vec<Item> {
        self.matching(items)
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }

    /// The items whose namespace fits the prefix's `*`s and whose value fits the
    /// filter, in their order.
    fn matching(&self, mut items: Vec<Item>) -> Vec<Item> {
        items.retain(|i| i.namespace.starts_with(&self.prefix) && self.fits(&i.value));
        items
    }

    fn fits(&self, value: &Map<String, Json>) -> bool {
        self.filter.iter().all(|(field, condition)| {
            let have = value.get(field).unwrap_or(&Json::Null);
            match operators(condition) {
                Some(ops) => ops.iter().all(|(op, want)| compare(op, have, want)),
                None => have == condition,
            }
        })
    }
}

/// A condition's operators, when it is an object of `$` keys (`{"$gt": 3}`); an
/// object with other keys is a value to equal.
fn operators(condition: &Json) -> Option<&Map<String, Json>> {
    condition
        .as_object()
        .filter(|o| !o.is_empty() && o.keys().all(|k| k.starts_with('$')))
}

fn compare(op: &str, have: &Json, want: &Json) -> bool {
    let order = || match (have, want) {
        (Json::Number(a), Json::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Json::String(a), Json::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match op {
        "$eq" => have == want,
        "$ne" => have != want,
        "$gt" => order() == Some(Ordering::Greater),
        "$gte" => matches!(order(), Some(Ordering::Greater | Ordering::Equal)),
        "$lt" => order() == Some(Ordering::Less),
        "$lte" => matches!(order(), Some(Ordering::Less | Ordering::Equal)),
        _ => false,
    }
}

/// A listing of namespaces: those that start with `prefix` and end with `suffix`
/// (`*` matching any label), cut to `max_depth` labels, each once, in order.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub prefix: Vec<String>,
    pub suffix: Vec<String>,
    pub max_depth: Option<usize>,
    pub limit: usize,
    pub offset: usize,
}

impl Listing {
    /// The page of `namespaces` (those that hold items) this listing asks for.
    pub fn page(&self, namespaces: &[Namespace]) -> Vec<Namespace> {
        let mut found: Vec<Namespace> = namespaces
            .iter()
            .filter(|n| n.starts_with(&self.prefix) && n.ends_with(&self.suffix))
            .map(|n| match self.max_depth {
                Some(d) if d < n.0.len() => Namespace(n.0[..d].to_vec()),
                _ => n.clone(),
            })
            .collect();
        found.sort();
        found.dedup();
        found
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }

    /// The part of the prefix before any `*`: what a store can narrow its rows by.
    pub fn fixed_prefix(&self) -> String {
        fixed(&self.prefix)
    }
}

impl Search {
    /// See [`Listing::fixed_prefix`].
    pub fn fixed_prefix(&self) -> String {
        fixed(&self.prefix)
    }
}

fn fixed(prefix: &[String]) -> String {
    prefix
        .iter()
        .take_while(|l| *l != "*")
        .cloned()
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether `namespace` (joined) is under `prefix` (joined): the same, or below it.
pub(crate) fn under(namespace: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || namespace == prefix
        || namespace
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The range of joined namespaces under `prefix` (not empty) for an index scan:
/// from `prefix.` to `prefix/` (`/` follows `.`), and `prefix` itself.
pub(crate) fn range_of(prefix: &str) -> (String, String) {
    (format!("{prefix}."), format!("{prefix}/"))
}

/// Why a request of the long-term store was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// The request is wrong: a namespace, a TTL or a filter that cannot be.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The embeddings endpoint failed or answered what cannot be used.
    #[error("cannot embed for semantic search: {0}")]
    Embed(String),
}

/// A put: `value` under `key` in `namespace`, kept for `ttl_minutes` after its last
/// put or refreshing read when given.
#[derive(Debug, Clone)]
pub struct Put {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Map<String, Json>,
    pub ttl_minutes: Option<f64>,
    /// What is embedded for semantic search, when the store has an index.
    pub index: crate::store::index::Fields,
}

/// What the server's store API and the builtin `store` server's tools do, over any
/// store's [`Items`]: namespaces checked, TTLs counted and refreshed, expired items
/// gone. `now_ms` is the time of the request.
pub mod ops {
    use super::*;

    fn namespace(labels: Vec<String>) -> Result<Namespace, ItemError> {
        Namespace::new(labels).map_err(ItemError::Invalid)
    }

    /// Writes the item, its texts embedded through `index` when there is one.
    pub async fn put(
        items: &dyn Items,
        put: Put,
        index: Option<&crate::store::index::Index>,
        now_ms: u64,
    ) -> Result<(), ItemError> {
        let namespace = namespace(put.namespace)?;
        let ttl_ms = match put.ttl_minutes {
            None => None,
            // At most what a store's signed milliseconds hold (a century or a million
            // years: kept until then).
            Some(m) if m.is_finite() && m > 0.0 => {
                Some(((m * 60_000.0).round().max(1.0) as u64).min(i64::MAX as u64 / 2))
            }
            Some(m) => {
                return Err(ItemError::Invalid(format!(
                    "ttl is minutes to keep the item, more than 0; {m} is not"
                )));
            }
        };
        if let crate::store::index::Fields::These(paths) = &put.index {
            crate::store::index::check_paths(paths).map_err(ItemError::Invalid)?;
        }
        let vectors = match index {
            Some(index) => index
                .vectors(&put.value, &put.index)
                .await
                .map_err(ItemError::Embed)?,
            None => Vec::new(),
        };
        // Expired items go when new ones come, so the table holds what can be read.
        items.delete_expired_items(now_ms).await?;
        items
            .put_item(&Item {
                namespace,
                key: put.key,
                value: put.value,
                created_ms: now_ms,
                updated_ms: now_ms,
                expires_ms: ttl_ms.map(|t| now_ms.saturating_add(t)),
                ttl_ms,
                vectors,
            })
            .await?;
        Ok(())
    }

    /// The item, none when there is none or it expired; its expiry put off by its
    /// TTL when `refresh`.
    pub async fn get(
        items: &dyn Items,
        labels: Vec<String>,
        key: &str,
        refresh: bool,
        now_ms: u64,
    ) -> Result<Option<Item>, ItemError> {
        let joined = namespace(labels)?.joined();
        let Some(mut item) = items.get_item(&joined, key).await? else {
            return Ok(None);
        };
        // Left for the next put's sweep: deleting it here could remove an item put
        // again meanwhile.
        if item.expired(now_ms) {
            return Ok(None);
        }
        if refresh {
            put_off(items, &mut item, now_ms).await?;
        }
        Ok(Some(item))
    }

    pub async fn delete(
        items: &dyn Items,
        labels: Vec<String>,
        key: &str,
    ) -> Result<(), ItemError> {
        let joined = namespace(labels)?.joined();
        Ok(items.delete_item(&joined, key).await?)
    }

    /// A page of items, each with its score when the search has a query and the
    /// store an index (ranked by it: see `index::rank`); their expiry put off when
    /// `refresh`.
    pub async fn search(
        items: &dyn Items,
        search: &Search,
        index: Option<&crate::store::index::Index>,
        refresh: bool,
        now_ms: u64,
    ) -> Result<Vec<(Item, Option<f64>)>, ItemError> {
        Namespace::prefix(search.prefix.clone()).map_err(ItemError::Invalid)?;
        search.check().map_err(ItemError::Invalid)?;
        let prefix = search.fixed_prefix();
        let query = search.query.as_deref().filter(|q| !q.is_empty());
        let mut page = match (query, index) {
            (Some(query), Some(index)) => {
                let query = index.query(query).await.map_err(ItemError::Embed)?;
                let rows = items.items_under(&prefix, now_ms, None).await?;
                let ranked = crate::store::index::rank(search.matching(rows), &query);
                ranked
                    .into_iter()
                    .skip(search.offset)
                    .take(search.limit)
                    .collect()
            }
            // With no filter and no `*`, every row under the prefix is a match: the
            // store pages them itself rather than handing them all back.
            _ if search.filter.is_empty() && !search.prefix.iter().any(|l| l == "*") => {
                let page = Page {
                    offset: search.offset,
                    limit: search.limit,
                };
                unscored(items.items_under(&prefix, now_ms, Some(page)).await?)
            }
            _ => {
                let rows = items.items_under(&prefix, now_ms, None).await?;
                unscored(search.page(rows))
            }
        };
        if refresh {
            for (item, _) in &mut page {
                put_off(items, item, now_ms).await?;
            }
        }
        Ok(page)
    }

    fn unscored(items: Vec<Item>) -> Vec<(Item, Option<f64>)> {
        items.into_iter().map(|i| (i, None)).collect()
    }

    pub async fn namespaces(
        items: &dyn Items,
        listing: &Listing,
        now_ms: u64,
    ) -> Result<Vec<Namespace>, ItemError> {
        for labels in [&listing.prefix, &listing.suffix] {
            Namespace::prefix(labels.clone()).map_err(ItemError::Invalid)?;
        }
        let found: Vec<Namespace> = items
            .item_namespaces(&listing.fixed_prefix(), now_ms)
            .await?
            .iter()
            .map(|n| Namespace::from_joined(n))
            .collect();
        Ok(listing.page(&found))
    }

    async fn put_off(items: &dyn Items, item: &mut Item, now_ms: u64) -> Result<(), ItemError> {
        if let Some(ttl) = item.ttl_ms {
            let expires = now_ms.saturating_add(ttl);
            items
                .refresh_item(&item.namespace.joined(), &item.key, expires)
                .await?;
            item.expires_ms = Some(expires);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(ns: &[&str], key: &str, value: Json, created_ms: u64) -> Item {
        Item {
            namespace: Namespace(ns.iter().map(|s| s.to_string()).collect()),
            key: key.into(),
            value: value.as_object().unwrap().clone(),
            created_ms,
            updated_ms: created_ms,
            expires_ms: None,
            ttl_ms: None,
            vectors: Vec::new(),
        }
    }

    #[test]
    fn filters_compare_numbers_and_strings_and_equal_anything_else() {
        let items = vec![
            item(&["a"], "1", json!({"i": 1, "s": "x", "o": {"b": 1}}), 1),
            item(&["a"], "2", json!({"i": 2.5, "s": "y"}), 2),
            item(&["a", "b"], "3", json!({"i": 3}), 3),
        ];
        let keys = |filter: Json| {
            let search = Search {
                filter: filter.as_object().unwrap().clone(),
                limit: 10,
                ..Search::default()
            };
            search
                .page(items.clone())
                .into_iter()
                .map(|i| i.key)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(json!({"i": {"$gt": 1, "$lte": 3}})), ["2", "3"]);
        assert_eq!(keys(json!({"s": {"$gte": "y"}})), ["2"]);
        assert_eq!(keys(json!({"i": {"$ne": 1}})), ["2", "3"]);
        assert_eq!(keys(json!({"o": {"b": 1}})), ["1"]);
        // A field an item lacks is null: it equals null and compares with nothing.
        assert_eq!(keys(json!({"s": null})), ["3"]);
        assert_eq!(keys(json!({"s": {"$lt": "z"}})), ["1", "2"]);
    }

    #[test]
    fn listings_cut_to_a_depth_and_match_stars() {
        let items: Vec<Namespace> = [
            item(&["users", "u1"], "k", json!({}), 1),
            item(&["users", "u1", "notes"], "k", json!({}), 2),
            item(&["users", "u2"], "k", json!({}), 3),
            item(&["docs"], "k", json!({}), 4),
        ]
        .into_iter()
        .map(|i| i.namespace)
        .collect();
        let list = |prefix: &[&str], suffix: &[&str], max_depth| {
            Listing {
                prefix: prefix.iter().map(|s| s.to_string()).collect(),
                suffix: suffix.iter().map(|s| s.to_string()).collect(),
                max_depth,
                limit: 100,
                offset: 0,
            }
            .page(&items)
            .into_iter()
            .map(|n| n.joined())
            .collect::<Vec<_>>()
        };
        assert_eq!(
            list(&[], &[], None),
            ["docs", "users.u1", "users.u1.notes", "users.u2"]
        );
        assert_eq!(list(&[], &[], Some(1)), ["docs", "users"]);
        assert_eq!(
            list(&["users", "*"], &[], Some(2)),
            ["users.u1", "users.u2"]
        );
        assert_eq!(list(&[], &["u1"], None), ["users.u1"]);
    }

    #[test]
    fn a_namespace_is_under_its_prefix_and_not_under_a_longer_label() {
        assert!(under("users.u1", "users"));
        assert!(under("users", "users"));
        assert!(!under("users2", "users"));
        assert!(under("x", ""));
        let (from, to) = range_of("users");
        assert!(from.as_str() <= "users.u1" && "users.u1" < to.as_str());
        assert!(!("users0" >= from.as_str() && "users0" < to.as_str()));
    }
}

//! Keeping a store's size bounded: threads that ended long ago are deleted (a
//! server's `--thread-ttl`, `switchyard prune --ended-before`); a long thread's history
//! is pruned to its latest checkpoint by `Threads::prune`.

use super::{Status, Store, StoreError};

/// Deletes the threads whose latest checkpoint finished or failed before `before_ms`
/// (Unix milliseconds), but those being run right now (claimed) and those `keep`
/// names (a server's threads with runs waiting). Returns the threads deleted.
pub async fn delete_ended<'k>(
    store: &dyn Store,
    before_ms: u64,
    keep: impl Fn(String) -> futures_util::future::BoxFuture<'k, bool>,
) -> Result<Vec<String>, StoreError> {
    let mut deleted = Vec::new();
    for thread in store.ended_before(before_ms).await? {
        if keep(thread.clone()).await {
            continue;
        }
        let Ok(claim) = store.claim(&thread).await else {
            continue;
        };
        // Looked at again under the claim: a run may have gone on with it since.
        let still_ended = store.latest(&thread).await?.is_some_and(|l| {
            matches!(l.status, Status::Finished | Status::Failed) && l.at_ms < before_ms
        });
        if still_ended && !keep(thread.clone()).await {
            store.delete_thread(&thread).await?;
            deleted.push(thread);
        }
        claim.release().await;
    }
    Ok(deleted)
}

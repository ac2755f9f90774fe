//! [`StopHandle`]: a request to stop a run at its next node boundary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Asks a run to stop at the next node boundary. A node waiting to try again (an LLM
/// or tool call's retry) stops waiting: the run stops before that node, which a resume
/// runs again.
#[derive(Clone, Default, Debug)]
pub struct StopHandle(Arc<StopInner>);

#[derive(Default, Debug)]
struct StopInner {
    asked: AtomicBool,
    wake: tokio::sync::Notify,
}

impl StopHandle {
    pub fn stop(&self) {
        self.0.asked.store(true, Ordering::SeqCst);
        self.0.wake.notify_waiters();
    }

    pub(crate) fn take(&self) -> bool {
        self.0.asked.swap(false, Ordering::SeqCst)
    }

    /// Whether a stop was asked (and not yet honoured).
    pub fn is_asked(&self) -> bool {
        self.0.asked.load(Ordering::SeqCst)
    }

    /// Waits until a stop is asked.
    pub async fn asked(&self) {
        loop {
            let woken = self.0.wake.notified();
            tokio::pin!(woken);
            // Registered before looking, so a stop between the two is not missed.
            woken.as_mut().enable();
            if self.is_asked() {
                return;
            }
            woken.await;
        }
    }
}

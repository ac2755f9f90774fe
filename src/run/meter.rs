//! What a run uses of its `[budget]` besides tokens: model replies, tool calls and
//! dollars, counted where the node kinds reach the model and the tools, so that no
//! kind counts for itself (and none can forget to).

use crate::graph::Server;
use crate::llm::{DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest};
use crate::spec::Price;
use crate::store::Usage;
use crate::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A run's counts so far. Atomic: a mapped node's items and parallel branches call at
/// once.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    model_calls: AtomicU64,
    tool_calls: AtomicU64,
    /// Dollars in billionths, so that sums are exact and atomic.
    nano_usd: AtomicU64,
}

impl Meter {
    pub(super) fn from_usage(u: &Usage) -> Self {
        Meter {
            model_calls: AtomicU64::new(u.model_calls),
            tool_calls: AtomicU64::new(u.tool_calls),
            nano_usd: AtomicU64::new((u.usd * 1e9).round() as u64),
        }
    }

    pub(super) fn usage(&self) -> Usage {
        Usage {
            model_calls: self.model_calls.load(Ordering::Relaxed),
            tool_calls: self.tool_calls.load(Ordering::Relaxed),
            usd: self.nano_usd.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// The model client, counting each reply and what its tokens cost.
pub(super) struct MeteredLlm {
    pub(super) inner: Arc<dyn LlmClient>,
    pub(super) meter: Arc<Meter>,
    pub(super) prices: Arc<HashMap<String, Price>>,
}

#[async_trait::async_trait]
impl LlmClient for MeteredLlm {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let reply = self.inner.complete(request, deltas).await?;
        self.meter.model_calls.fetch_add(1, Ordering::Relaxed);
        if let Some(price) = self.prices.get(&request.model) {
            let usd = price.usd(reply.tokens_in, reply.tokens_out);
            self.meter
                .nano_usd
                .fetch_add((usd * 1e9).round() as u64, Ordering::Relaxed);
        }
        Ok(reply)
    }

    fn endpoint(&self) -> Option<String> {
        self.inner.endpoint()
    }
}

/// The tool client, counting each call that was sent (answered or not: a tool may
/// have acted before its answer was lost).
pub(super) struct MeteredTools {
    pub(super) inner: Arc<dyn ToolClient>,
    pub(super) meter: Arc<Meter>,
}

#[async_trait::async_trait]
impl ToolClient for MeteredTools {
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        self.inner.list_tools(server).await
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        let reply = self.inner.call(request).await;
        if !matches!(&reply, Err(e) if e.unsent) {
            self.meter.tool_calls.fetch_add(1, Ordering::Relaxed);
        }
        reply
    }

    async fn shutdown(&self) {
        self.inner.shutdown().await;
    }
}

/// `llm` and `tools` counting into `meter`, by `prices`.
pub(super) fn metered(
    llm: &Arc<dyn LlmClient>,
    tools: &Arc<dyn ToolClient>,
    meter: &Arc<Meter>,
    prices: &Arc<HashMap<String, Price>>,
) -> (Arc<dyn LlmClient>, Arc<dyn ToolClient>) {
    (
        Arc::new(MeteredLlm {
            inner: llm.clone(),
            meter: meter.clone(),
            prices: prices.clone(),
        }),
        Arc::new(MeteredTools {
            inner: tools.clone(),
            meter: meter.clone(),
        }),
    )
}

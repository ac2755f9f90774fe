//! [`Embeddings`]: an OpenAI-compatible `/embeddings` endpoint as the long-term store's
//! [`Embed`] port, for semantic search (`switchyard serve --embeddings MODEL`).

use super::{OpenAiClient, SetupError};
use crate::spec::Provider;
use crate::store::Embed;
use async_trait::async_trait;

/// How long one request to the endpoint may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A model of an OpenAI-compatible endpoint that turns texts into vectors.
pub struct Embeddings {
    client: OpenAiClient,
    model: String,
}

impl Embeddings {
    /// `model` at the endpoint `base_url_var` names (OpenAI's when unset), with the
    /// key in `key_var` (none when unset).
    pub fn from_env(model: &str, base_url_var: &str, key_var: &str) -> Result<Self, SetupError> {
        Ok(Embeddings {
            client: OpenAiClient::from_env(base_url_var, key_var, Provider::OpenAi)?,
            model: model.to_string(),
        })
    }
}

#[async_trait]
impl Embed for Embeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let at = || format!("model `{}` at {}", self.model, self.client.base_url());
        // A hung endpoint must not hold a put (or a run's store tool) for ever.
        match tokio::time::timeout(TIMEOUT, self.client.embed(&self.model, texts)).await {
            Ok(answer) => answer.map_err(|e| format!("{}: {e}", at())),
            Err(_) => Err(format!("{}: no answer in {} s", at(), TIMEOUT.as_secs())),
        }
    }
}

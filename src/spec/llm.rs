//! What a graph file says of its model endpoint and sampling: the [`Provider`] named in
//! `[llm] provider`, and a node's [`Sampling`] settings. The llm port (`crate::llm`)
//! decides what each provider is sent.

use super::Sp;
use serde::{Deserialize, Serialize};

/// Which OpenAI-compatible server an endpoint is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI itself, and anything that speaks its current API (the default).
    #[default]
    OpenAi,
    /// Azure OpenAI: a deployment URL with `?api-version=`, the key in `api-key`.
    Azure,
    Ollama,
    Vllm,
    LlamaCpp,
    LiteLlm,
    /// Anthropic's own Messages API (`/v1/messages`), not its OpenAI-compatible one.
    Anthropic,
}

impl Provider {
    pub const NAMES: [&'static str; 7] = [
        "openai",
        "azure",
        "ollama",
        "vllm",
        "llamacpp",
        "litellm",
        "anthropic",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "openai" => Provider::OpenAi,
            "azure" => Provider::Azure,
            "ollama" => Provider::Ollama,
            "vllm" => Provider::Vllm,
            "llamacpp" => Provider::LlamaCpp,
            "litellm" => Provider::LiteLlm,
            "anthropic" => Provider::Anthropic,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Reads a provider name as written in `[llm] provider`.
pub fn parse_provider(s: &Sp<String>) -> Result<Provider, String> {
    Provider::parse(s.get_ref()).ok_or_else(|| {
        crate::suggestion::help_for(s.get_ref(), Provider::NAMES).unwrap_or_else(|| {
            format!(
                "providers are {}",
                Provider::NAMES.map(|n| format!("`{n}`")).join(", ")
            )
        })
    })
}

/// A node's sampling settings: the reply's token limit, the reasoning effort, a seed,
/// nucleus sampling, stop sequences. The endpoint's [`Provider`] decides under
/// which name (and whether) each is sent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

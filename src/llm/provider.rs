//! [`Provider`]: which OpenAI-compatible server an endpoint is, and what its requests
//! may carry. Each server takes a different part of OpenAI's request: a field one
//! refuses with a 400 another ignores or needs. A node says what it wants (a reply of at
//! most N tokens, a seed); the provider decides how, and whether, that is sent. What is
//! not sent and matters is enforced here instead: a required tool call is checked
//! whatever the server did with `tool_choice`.

use crate::spec::Provider;

// The names a graph file may write, and their parsing, are the spec's
// (`spec/llm.rs`); what each provider is sent is decided here.
impl Provider {
    /// The reply's token limit goes as `max_completion_tokens` (OpenAI's current name,
    /// which its reasoning models require; vLLM takes both and prefers it), else as
    /// `max_tokens` (Ollama ignores the other name, older llama.cpp servers too, and
    /// LiteLLM renames `max_tokens` itself for the models that need it).
    pub fn max_completion_tokens(self) -> bool {
        matches!(self, Provider::OpenAi | Provider::Azure | Provider::Vllm)
    }

    /// Sends `tool_choice`. Ollama ignores it: nothing is sent, and the node refuses a
    /// reply without a call as it always does when a call is required.
    pub fn tool_choice(self) -> bool {
        !matches!(self, Provider::Ollama)
    }

    /// Sends `parallel_tool_calls` (when the node sets it). Ollama ignores it.
    pub fn parallel_tool_calls(self) -> bool {
        !matches!(self, Provider::Ollama)
    }

    /// Sends the key as `api-key` rather than `Authorization: Bearer`.
    pub fn api_key_header(self) -> bool {
        matches!(self, Provider::Azure)
    }
}

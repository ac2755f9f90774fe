//! [`OpenAiClient`]: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
//! vLLM, llama.cpp's server, LiteLLM), through async-openai.

use super::http::{self, HttpFailure};
use super::redact::Redactor;
use super::wire::{Assembler, Chunk, Completion};
use super::{DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest, SetupError, ToolChoice};
use crate::spec::Provider;
use async_openai::config::OpenAIConfig;
use async_openai::error::{OpenAIError, WrappedError};
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionToolChoiceOption, ChatCompletionTools, CreateChatCompletionRequest,
    FunctionObject, ResponseFormat, ResponseFormatJsonSchema, StopConfiguration, ToolChoiceOptions,
};
use futures_util::StreamExt;
use std::fmt;

/// The endpoint every request goes to when the environment names none.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A chat-completions client for one endpoint. It sends one HTTP request per
/// [`LlmClient::complete`]: no retries of its own (see `http.rs`), and the API
/// key appears in no error it returns.
pub struct OpenAiClient {
    client: async_openai::Client<OpenAIConfig>,
    base_url: String,
    redactor: Redactor,
    provider: Provider,
}

impl OpenAiClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:11434/v1`), with `api_key` sent
    /// as a bearer token (an empty key for servers that need none). `key_var` names
    /// where the key came from, for error messages.
    pub fn new(base_url: &str, api_key: &str, key_var: &str) -> Result<Self, SetupError> {
        Self::for_provider(base_url, api_key, key_var, Provider::OpenAi)
    }

    /// [`OpenAiClient::new`] for a server of `provider`: its requests carry what that
    /// server takes, and Azure's key goes in its `api-key` header.
    pub fn for_provider(
        base_url: &str,
        api_key: &str,
        key_var: &str,
        provider: Provider,
    ) -> Result<Self, SetupError> {
        // async-openai builds the header with `unwrap`; check first so a bad key is an
        // error, not a panic.
        if reqwest::header::HeaderValue::from_str(&format!("Bearer {api_key}")).is_err() {
            return Err(SetupError::BadKey {
                var: key_var.into(),
            });
        }
        // A query string (Azure's `api-version`, a proxy's token) belongs after the
        // path async-openai appends: it is kept apart and put back on every request.
        let (base, query) = match base_url.split_once('?') {
            Some((b, q)) => (b, Some(q.to_string())),
            None => (base_url, None),
        };
        let base_url = base.trim_end_matches('/').to_string();
        let mut redactor = Redactor::new(api_key);
        if let Some(q) = &query {
            redactor = redactor.with(q);
            for pair in q.split('&') {
                if let Some((_, v)) = pair.split_once('=')
                    && v.len() >= 4
                {
                    redactor = redactor.with(v);
                }
            }
        }
        // The process-wide TLS provider; an error means one is installed already, and
        // that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(crate::tool::USER_AGENT)
            .build()
            .map_err(|e| SetupError::Http(e.to_string()))?;
        // Org and project come from nowhere but here: async-openai would otherwise read
        // them from the environment.
        let config = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(api_key)
            .with_org_id("")
            .with_project_id("");
        let auth = if api_key.is_empty() {
            http::Auth::None
        } else if provider.api_key_header() {
            http::Auth::ApiKey(api_key.to_string())
        } else {
            http::Auth::Bearer
        };
        let client = async_openai::Client::with_config(config)
            .with_http_service(http::service(http, auth, query));
        Ok(OpenAiClient {
            client,
            base_url,
            redactor,
            provider,
        })
    }

    /// A client for the endpoint named by the environment variables `base_url_var`
    /// (default endpoint: OpenAI's) and `key_var` (unset: no key).
    pub fn from_env(
        base_url_var: &str,
        key_var: &str,
        provider: Provider,
    ) -> Result<Self, SetupError> {
        let base_url = endpoint_from_env(base_url_var, DEFAULT_BASE_URL)?;
        let key = std::env::var(key_var).unwrap_or_default();
        Self::for_provider(&base_url, &key, key_var, provider)
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The request in async-openai's types.
    fn body(&self, request: &LlmRequest) -> Result<CreateChatCompletionRequest, LlmError> {
        let messages = request
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                serde_json::from_value::<ChatCompletionRequestMessage>(m.clone()).map_err(|e| {
                    LlmError::Request(format!("message {} is not a chat message: {e}", i + 1))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let response_format = request.schema.as_ref().map(|s| ResponseFormat::JsonSchema {
            json_schema: ResponseFormatJsonSchema {
                description: None,
                name: schema_name(&request.node),
                schema: (**s).clone(),
                strict: Some(request.strict),
            },
        });
        let tools: Vec<ChatCompletionTools> = request
            .tools
            .iter()
            .map(|t| {
                ChatCompletionTools::Function(ChatCompletionTool {
                    function: FunctionObject {
                        name: t.name.clone(),
                        description: (!t.description.is_empty()).then(|| t.description.clone()),
                        parameters: Some(t.parameters.clone()),
                        // MCP input schemas are rarely strict-mode schemas; the node
                        // checks the arguments against them itself.
                        strict: None,
                    },
                })
            })
            .collect();
        let with_tools = !tools.is_empty();
        let p = self.provider;
        let s = &request.sampling;
        let reasoning_effort = match &s.reasoning_effort {
            Some(e) => Some(
                serde_json::from_value(serde_json::Value::String(e.clone()))
                    .map_err(|_| LlmError::Request(format!("`{e}` is not a reasoning effort")))?,
            ),
            _ => None,
        };
        let (max_tokens, max_completion_tokens) = match s.max_tokens {
            Some(m) if p.max_completion_tokens() => (None, Some(m)),
            m => (m, None),
        };
        #[allow(deprecated)]
        Ok(CreateChatCompletionRequest {
            model: request.model.clone(),
            messages,
            response_format,
            // A server that ignores `tool_choice` is not sent it: the node refuses a
            // reply without a call all the same when one is required.
            tool_choice: (with_tools && p.tool_choice()).then(|| {
                ChatCompletionToolChoiceOption::Mode(match request.tool_choice {
                    ToolChoice::Auto => ToolChoiceOptions::Auto,
                    ToolChoice::Required => ToolChoiceOptions::Required,
                })
            }),
            parallel_tool_calls: request
                .parallel_tool_calls
                .filter(|_| with_tools && p.parallel_tool_calls()),
            tools: with_tools.then_some(tools),
            temperature: request.temperature.map(|t| t as f32),
            top_p: s.top_p.map(|t| t as f32),
            seed: s.seed.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
            stop: match s.stop.as_slice() {
                [] => None,
                [one] => Some(StopConfiguration::String(one.clone())),
                many => Some(StopConfiguration::StringArray(many.to_vec())),
            },
            max_tokens,
            max_completion_tokens,
            reasoning_effort,
            stream: request.stream.then_some(true),
            stream_options: request.stream.then_some(ChatCompletionStreamOptions {
                include_usage: Some(true),
                include_obfuscation: None,
            }),
            ..CreateChatCompletionRequest::default()
        })
    }

    /// The vectors of `texts` from the endpoint's `/embeddings`, in their order.
    pub(crate) async fn embed(
        &self,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        #[derive(serde::Deserialize)]
        struct Answer {
            data: Vec<Vector>,
        }
        #[derive(serde::Deserialize)]
        struct Vector {
            index: usize,
            embedding: Vec<f32>,
        }
        let request =
            serde_json::json!({"model": model, "input": texts, "encoding_format": "float"});
        let mut answer: Answer = self
            .client
            .embeddings()
            .create_byot(request)
            .await
            .map_err(|e| self.error(e))?;
        answer.data.sort_by_key(|v| v.index);
        Ok(answer.data.into_iter().map(|v| v.embedding).collect())
    }

    /// An async-openai error as an [`LlmError`], the key taken out of every text.
    fn error(&self, e: OpenAIError) -> LlmError {
        let r = |s: &str| self.redactor.apply(s);
        match e {
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                // The whole body is redacted before it is cut to an excerpt: a cut
                // through an echoed key would leave its start unrecognised.
                Ok(f) => LlmError::Status {
                    status: f.status,
                    message: r(&failure_message(&r(&f.body))),
                    retry_after: f.retry_after,
                },
                Err(other) => LlmError::Connection(r(&other.to_string())),
            },
            OpenAIError::Reqwest(e) if e.is_builder() => LlmError::Request(r(&e.to_string())),
            // async-openai decodes JSON itself; a reqwest error past the builder is the
            // transport's, a body that broke off included (reqwest calls it decoding).
            OpenAIError::Reqwest(e) => LlmError::Connection(r(&error_chain(&e))),
            OpenAIError::ApiError(a) => LlmError::Status {
                status: a.status_code.as_u16(),
                message: r(&a.api_error.to_string()),
                retry_after: None,
            },
            OpenAIError::JSONDeserialize(e, content) => {
                LlmError::Protocol(r(&format!("{e} in `{}`", excerpt(&r(&content)))))
            }
            OpenAIError::StreamError(e) => LlmError::Connection(r(&e.to_string())),
            OpenAIError::InvalidArgument(s) => LlmError::Request(r(&s)),
            other => LlmError::Protocol(r(&other.to_string())),
        }
    }
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl LlmClient for OpenAiClient {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let body = self.body(request)?;
        let chat = self.client.chat();
        if !request.stream {
            let completion: Completion = chat.create_byot(body).await.map_err(|e| self.error(e))?;
            return completion.into_reply();
        }
        let mut stream = chat
            .create_stream_byot::<_, Chunk>(body)
            .await
            .map_err(|e| self.error(e))?;
        let mut assembler = Assembler::default();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.error(e))?;
            if let Some(message) = chunk.error_message() {
                return Err(LlmError::Stream(self.redactor.apply(&message)));
            }
            if let Some(text) = assembler.push(chunk) {
                deltas(&text);
            }
        }
        assembler.finish()
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.base_url.clone())
    }
}

/// The endpoint `base_url_var` names (`default` when it is unset), trimmed: an
/// `http://` or `https://` URL. Set but empty is a mistake (a template that left it
/// blank), not a wish for the public endpoint.
pub(super) fn endpoint_from_env(base_url_var: &str, default: &str) -> Result<String, SetupError> {
    let base_url = match std::env::var(base_url_var) {
        Ok(u) if u.trim().is_empty() => {
            return Err(SetupError::EmptyUrl {
                var: base_url_var.into(),
            });
        }
        Ok(u) => u,
        Err(_) => default.to_string(),
    };
    let trimmed = base_url.trim();
    if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
        return Err(SetupError::BadUrl {
            var: base_url_var.into(),
            // Its query may hold a token: never shown.
            url: match trimmed.split_once('?') {
                Some((b, _)) => format!("{b}?[redacted]"),
                None => trimmed.to_string(),
            },
        });
    }
    Ok(trimmed.to_string())
}

/// A `response_format` name: letters, digits, `_` and `-`, at most 64.
pub(super) fn schema_name(node: &str) -> String {
    let name: String = node
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(64)
        .collect();
    if name.is_empty() {
        "output".into()
    } else {
        name
    }
}

/// The server's own words from an error body: OpenAI's `{ "error": { "message" } }`,
/// else the start of the body.
fn failure_message(body: &str) -> String {
    match serde_json::from_str::<WrappedError>(body) {
        Ok(w) => w.error.to_string(),
        Err(_) if body.trim().is_empty() => "(no message)".into(),
        Err(_) => excerpt(body),
    }
}

pub(super) fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// A transport error with its causes, which say what actually failed (refused,
/// reset, DNS).
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let message = s.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = s.source();
    }
    text
}

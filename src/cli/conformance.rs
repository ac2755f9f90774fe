//! The client side of the MCP conformance suite (`npx @modelcontextprotocol/conformance
//! client --command "switchyard mcp-conformance-client"`): the suite appends the URL and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO` and gives the credentials a
//! scenario hands out in `MCP_CONFORMANCE_CONTEXT`, which become the server's OAuth
//! settings as a graph would write them.

use super::exit;
use anyhow::Context;
use switchyard::graph::{Server, ServerTransport};
use switchyard::tool::{ToolClient, ToolRequest};

#[derive(clap::Args)]
pub(crate) struct ConformanceArgs {
    url: String,
}

pub(crate) fn client(args: ConformanceArgs) -> anyhow::Result<u8> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: serde_json::Value = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(c) => serde_json::from_str(&c).context("MCP_CONFORMANCE_CONTEXT is not JSON")?,
        Err(_) => serde_json::Value::Null,
    };
    let said = |k: &str| context.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let oauth = switchyard::spec::OAuth {
        client_credentials: scenario.starts_with("auth/client-credentials"),
        client_id: said("client_id"),
        client_secret: said("client_secret"),
        private_key: said("private_key_pem"),
        signing_algorithm: said("signing_algorithm"),
        scopes: Vec::new(),
        // The suite's name for this client, taken by servers that accept one.
        client_metadata_url: Some("https://conformance-test.local/client-metadata.json".into()),
        // Cross-app access: the person's ID token and their identity provider.
        identity: match (said("idp_id_token"), said("idp_token_endpoint")) {
            (Some(id_token), Some(token_endpoint)) => Some(switchyard::spec::IdentityAssertion {
                token_endpoint,
                client_id: said("idp_client_id"),
                id_token,
            }),
            _ => None,
        },
        // Workload identity federation: the JWT the scenario issued this workload.
        workload: said("valid_jwt").map(switchyard::spec::WorkloadToken::Value),
    };
    let server = Server {
        name: "conformance".into(),
        transport: ServerTransport::Http {
            url: args.url,
            headers: Vec::new(),
            oauth,
        },
        roots: Vec::new(),
        sampling: false,
        // The protocol of the scenario's server, as the suite says it.
        protocol: match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() {
            Ok("2025-11-25") | Err(_) => switchyard::spec::Protocol::Initialize,
            Ok(_) => switchyard::spec::Protocol::Auto,
        },
    };
    let client = super::mcp_client(&std::env::current_dir()?);
    let result = super::runtime()?.block_on(async {
        let result = async {
            let tools = client.list_tools(&server).await?;
            println!("{} tools", tools.len());
            // A scenario that asks for input (an elicitation sent on its own, or in an
            // `input_required` result, SEP-2322): accepted with nothing filled in,
            // which is what a person does who takes the server's defaults.
            let asks = ["elicitation", "sep-2322"];
            let answer = asks.iter().any(|a| scenario.starts_with(a)).then(|| {
                std::sync::Arc::new(serde_json::json!({ "action": "accept", "content": {} }))
            });
            // The calls the scenario hands out (`toolCalls`: a tool and its arguments),
            // as a graph's nodes would make them; the calls two scenarios describe
            // (none: tools are listed and their schemas kept, no `$ref` fetched; the
            // focal tool's schema echoed back as it was listed); else every tool, with
            // arguments made from its schema: scenarios check what happens on a call
            // (a result, more scope asked for, a stream resumed).
            let schema_of = |name: &str| {
                tools
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| t.input_schema.clone())
            };
            let calls: Vec<(String, serde_json::Value)> =
                match context.get("toolCalls").and_then(|c| c.as_array()) {
                    _ if scenario == "json-schema-ref-no-deref" => Vec::new(),
                    _ if scenario == "json-schema-2020-12-preservation" => {
                        vec![(
                            "json_schema_echo".into(),
                            serde_json::json!({ "schema": schema_of("json_schema_2020_12_tool") }),
                        )]
                    }
                    Some(calls) => calls
                        .iter()
                        .filter_map(|c| {
                            let name = c.get("name")?.as_str()?.to_string();
                            let arguments = c
                                .get("arguments")
                                .cloned()
                                .unwrap_or_else(|| serde_json::json!({}));
                            Some((name, arguments))
                        })
                        .collect(),
                    None => tools
                        .iter()
                        .map(|t| {
                            (
                                t.name.clone(),
                                switchyard::mcp::example_arguments(&t.input_schema),
                            )
                        })
                        .collect(),
                };
            for (name, arguments) in calls {
                let request = ToolRequest {
                    answer: answer.clone(),
                    ..ToolRequest::new(
                        server.clone(),
                        name.clone(),
                        arguments,
                        format!("conformance/{name}"),
                    )
                };
                let reply = client.call(&request).await?;
                println!("{name}: {}", reply.content);
            }
            Ok::<_, switchyard::tool::ToolError>(())
        }
        .await;
        client.shutdown().await;
        result
    });
    result?;
    Ok(exit::OK)
}

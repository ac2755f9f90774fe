//! `switchyard tools`: starts a graph's MCP servers and lists their tools, with the
//! schemas of what they take and give.

use super::exit;
use super::flags::ReportFormat;
use std::io::Write;
use std::path::PathBuf;
use switchyard::tool::ToolClient;

#[derive(clap::Args)]
pub(crate) struct ToolsArgs {
    /// The graph file whose servers to start.
    file: PathBuf,
    /// Only this server.
    #[arg(long)]
    server: Option<String>,
    /// How to print the tools.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

pub(crate) fn tools(args: ToolsArgs) -> anyhow::Result<u8> {
    let path = &args.file;
    let only = args.server.as_deref();
    let graph = match super::load_graph(path)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let servers: Vec<_> = match only {
        Some(name) => match graph.server(name) {
            Ok(server) => vec![server],
            Err(help) => {
                let help = help.map(|h| format!("; {h}")).unwrap_or_default();
                anyhow::bail!("`{}` has no server `{name}`{help}", path.display());
            }
        },
        None => graph.servers.iter().collect(),
    };
    let client = super::graph_tools(&graph.root);
    let listed = super::runtime()?.block_on(async {
        let mut listed = Vec::new();
        for server in &servers {
            match client.list_tools(server).await {
                Ok(tools) => listed.push((server.name.clone(), tools)),
                Err(e) => {
                    client.shutdown().await;
                    return Err(anyhow::anyhow!(e));
                }
            }
        }
        client.shutdown().await;
        Ok(listed)
    })?;
    let mut out = std::io::stdout().lock();
    match args.format {
        ReportFormat::Text => {
            for (server, tools) in &listed {
                let s = if tools.len() == 1 { "" } else { "s" };
                writeln!(out, "{server}: {} tool{s}", tools.len())?;
                for t in tools {
                    writeln!(out, "  {}", t.name)?;
                    if !t.description.is_empty() {
                        writeln!(out, "    {}", t.description.replace('\n', "\n    "))?;
                    }
                    writeln!(out, "    input: {}", t.input_schema)?;
                    // What `output` receives: the structured result when the tool
                    // promises one, else its content parts turned into values.
                    match &t.output_schema {
                        Some(s) => writeln!(out, "    result: {s}")?,
                        None => writeln!(
                            out,
                            "    result: its content (text parsed as JSON when it is JSON; images as blob references)"
                        )?,
                    }
                }
            }
        }
        ReportFormat::Json => {
            let json: Vec<_> = listed
                .iter()
                .map(|(server, tools)| {
                    serde_json::json!({
                        "server": server,
                        "tools": tools.iter().map(|t| serde_json::json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": t.input_schema,
                            "output_schema": t.output_schema,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &json)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(exit::OK)
}

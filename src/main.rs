//! The `switchyard` command: parses the command line, calls the library, prints.

mod cli;

use anyhow::Context;
use clap::Parser;
use cli::args::{Cli, Command, RenderFormat, ReportFormat, StateAction};
use cli::exit;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::render::{self, Format};
use switchyard::run::ToolClient;
use switchyard::{Sources, Validation, validate_file};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::color::set(cli.color);
    let result = match cli.command {
        Command::Validate {
            files,
            format,
            online,
        } => validate(&files, format, online),
        Command::Tools {
            file,
            server,
            format,
        } => tools(&file, server.as_deref(), format),
        Command::McpConformanceClient { url } => mcp_conformance_client(&url),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir),
        Command::Render {
            file,
            format,
            output,
        } => render(&file, format, output),
        Command::Run {
            file,
            input,
            thread,
            common,
        } => cli::run::run(cli::run::RunArgs {
            file,
            input,
            thread,
            common: common.into(),
        }),
        Command::Resume {
            file,
            thread,
            payload,
            at,
            force,
            common,
        } => cli::run::resume(cli::run::ResumeArgs {
            file,
            thread,
            payload,
            at,
            force,
            common: common.into(),
        }),
        Command::State {
            action:
                Some(StateAction::Set {
                    thread,
                    values,
                    as_node,
                    graph,
                    store,
                }),
            ..
        } => cli::inspect::set(&store, graph, &thread, &values, as_node.as_deref()),
        Command::State {
            action: None,
            thread,
            at,
            graph,
            store,
        } => cli::inspect::state(&store, graph, thread.as_deref().unwrap_or_default(), at),
        Command::History {
            thread,
            json,
            store,
        } => cli::inspect::history(&store, &thread, json),
        Command::Fork {
            thread,
            at,
            into,
            graph,
            store,
        } => cli::inspect::fork(&store, graph, &thread, at, into),
        Command::Prune {
            thread,
            ended_before,
            graph,
            store,
        } => cli::inspect::prune(&store, graph, thread.as_deref(), ended_before),
        Command::Serve {
            paths,
            listen,
            store,
            durability,
            compress,
            api_key_env,
            api_key_file,
            insecure,
            cors,
            max_body,
            max_runs,
            mcp_idle,
            mcp_max_servers,
            watch,
            no_watch,
            log_retention,
            thread_ttl,
            run_lease,
            no_llm_content,
            trace,
            heartbeat,
            replay,
            record,
            quiet,
        } => cli::serve::serve(cli::serve::ServeArgs {
            paths,
            listen,
            store: store.with_options(switchyard::store::SqliteOptions {
                durability,
                compress,
            }),
            api_key_env,
            api_key_file,
            insecure,
            cors,
            max_body,
            max_runs: max_runs as usize,
            mcp_idle,
            mcp_max_servers: mcp_max_servers as usize,
            watch: (!no_watch).then_some(watch),
            log_retention,
            thread_ttl,
            run_lease,
            llm_content: !no_llm_content,
            trace: trace.resolve(),
            heartbeat,
            replay,
            record,
            quiet,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("{} {err}", cli::color::error_label());
            for cause in err.chain().skip(1) {
                eprintln!("caused by: {cause}");
            }
            ExitCode::from(exit::FAILED)
        }
    }
}

/// `switchyard render ... | head` closes the pipe early; that is not a failure.
/// `switchyard completions SHELL`: made whole first, so a closed pipe is an error to
/// report (quietly), not a panic in the generator.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "switchyard", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(exit::OK)
}

/// `switchyard man [--dir DIR]`: the manual page on standard output, or a page per
/// command written into DIR (their names printed).
fn man(dir: Option<PathBuf>) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command()).render(&mut page)?;
        std::io::stdout().write_all(&page)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), &dir)
        .with_context(|| format!("cannot write the pages into `{}`", dir.display()))?;
    let mut pages: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("switchyard") && n.ends_with(".1"))
        .collect();
    pages.sort();
    let mut out = std::io::stdout().lock();
    for p in pages {
        writeln!(out, "{}", dir.join(p).display())?;
    }
    Ok(exit::OK)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn validate(files: &[PathBuf], format: ReportFormat, online: bool) -> anyhow::Result<u8> {
    let mut invalid = false;
    let mut reports = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut unreadable = false;
    for path in files {
        let mut sources = Sources::new();
        // A file that cannot be read is reported, and the others are still checked.
        let mut v = match validate_file(path, &mut sources) {
            Ok(v) => v,
            Err(e) => {
                unreadable = true;
                let chain: Vec<String> = anyhow::Error::from(e)
                    .chain()
                    .map(ToString::to_string)
                    .collect();
                let message = chain.join(": ");
                match format {
                    ReportFormat::Text => {
                        eprintln!("error: {}", chain[0]);
                        for cause in &chain[1..] {
                            eprintln!("caused by: {cause}");
                        }
                    }
                    ReportFormat::Json => reports.push(serde_json::json!({
                        "file": path.display().to_string(),
                        "valid": false,
                        "error": message,
                        "diagnostics": [],
                    })),
                }
                continue;
            }
        };
        if online {
            check_online(&mut v, &sources)?;
        }
        invalid |= !v.is_valid();
        match format {
            ReportFormat::Text => {
                let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
                let mut err = std::io::stderr().lock();
                for d in &v.diagnostics {
                    writeln!(err, "{}", cli::color::diagnostics(&d.render(&sources)))?;
                }
                if v.is_valid() {
                    let spec = v.spec.as_ref().expect("valid means loaded");
                    let consts = spec.state.iter().filter(|f| f.constant).count();
                    let fields = spec.state.len() - consts;
                    let consts = match consts {
                        0 => String::new(),
                        1 => ", 1 constant".into(),
                        n => format!(", {n} constants"),
                    };
                    writeln!(out, "{}: ok ({} nodes, {fields} state fields{consts})", path.display(), spec.nodes.len())?;
                } else {
                    let s = if errors == 1 { "" } else { "s" };
                    writeln!(err, "{}: {errors} error{s}", path.display())?;
                }
            }
            ReportFormat::Json => reports.push(serde_json::json!({
                "file": path.display().to_string(),
                "valid": v.is_valid(),
                "diagnostics": v.diagnostics.iter().map(|d| d.to_json(&sources)).collect::<Vec<_>>(),
            })),
        }
    }
    if let ReportFormat::Json = format {
        serde_json::to_writer_pretty(&mut out, &reports)?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(if unreadable {
        exit::FAILED
    } else if invalid {
        exit::INVALID
    } else {
        exit::OK
    })
}

fn render(
    path: &std::path::Path,
    format: RenderFormat,
    output: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources)?;
    let Some(spec) = &v.spec else {
        for d in &v.diagnostics {
            eprint!("{}", cli::color::diagnostics(&d.render(&sources)));
        }
        return Ok(exit::INVALID);
    };
    let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        eprintln!(
            "warning: `{}` has {errors} problem{}; `switchyard validate {}` lists them",
            path.display(),
            if errors == 1 { "" } else { "s" },
            path.display()
        );
    }
    let format = match format {
        RenderFormat::Dot => Format::Dot,
        RenderFormat::Mermaid => Format::Mermaid,
        RenderFormat::Svg => Format::Svg,
    };
    let text = render::render(spec, format);
    match output {
        Some(file) => std::fs::write(&file, text)
            .with_context(|| format!("cannot write `{}`", file.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(exit::OK)
}

/// An MCP client for a graph's servers; binary results are not kept.
fn mcp_client(root: &std::path::Path) -> McpClient {
    McpClient::new(
        root,
        BlobStore::new(
            std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id())),
        ),
    )
}

/// `validate --online`: adds the diagnostics that need the servers to a valid graph.
fn check_online(v: &mut Validation, sources: &Sources) -> anyhow::Result<()> {
    let Some(spec) = v.spec.as_ref().filter(|_| v.is_valid()) else {
        return Ok(());
    };
    let graph = switchyard::graph::compile(spec, sources)?;
    let client = mcp_client(&graph.root);
    let found = cli::runtime()?.block_on(async {
        let found = switchyard::mcp::online::check(spec, &graph, &client).await;
        client.shutdown().await;
        found
    });
    v.diagnostics.extend(found);
    switchyard::diagnostic::sort(&mut v.diagnostics);
    Ok(())
}

fn tools(path: &std::path::Path, only: Option<&str>, format: ReportFormat) -> anyhow::Result<u8> {
    let graph = match cli::load_graph(path)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let servers: Vec<_> = graph
        .servers
        .iter()
        .filter(|s| only.is_none_or(|o| o == s.name))
        .collect();
    if let Some(name) = only
        && servers.is_empty()
    {
        let names = graph.servers.iter().map(|s| s.name.as_str());
        let help = switchyard::suggestion::help_for(name, names)
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        anyhow::bail!("`{}` has no server `{name}`{help}", path.display());
    }
    let client = mcp_client(&graph.root);
    let listed = cli::runtime()?.block_on(async {
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
    match format {
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

/// The client side of the MCP conformance suite (`npx @modelcontextprotocol/conformance
/// client --command "switchyard mcp-conformance-client"`): the suite appends the URL and
/// names the scenario in `MCP_CONFORMANCE_SCENARIO` and gives the credentials a
/// scenario hands out in `MCP_CONFORMANCE_CONTEXT`, which become the server's OAuth
/// settings as a graph would write them.
fn mcp_conformance_client(url: &str) -> anyhow::Result<u8> {
    use switchyard::graph::{Server, ServerTransport};
    use switchyard::run::ToolRequest;
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
    };
    let server = Server {
        name: "conformance".into(),
        transport: ServerTransport::Http {
            url: url.into(),
            headers: Vec::new(),
            oauth,
        },
        roots: Vec::new(),
    };
    let client = mcp_client(&std::env::current_dir()?);
    let result = cli::runtime()?.block_on(async {
        let result = async {
            let tools = client.list_tools(&server).await?;
            println!("{} tools", tools.len());
            // A scenario that asks for input: accepted with nothing filled in, which is
            // what a person does who takes the server's defaults.
            let answer = scenario.starts_with("elicitation").then(|| {
                std::sync::Arc::new(serde_json::json!({ "action": "accept", "content": {} }))
            });
            // Every tool is called: scenarios check what happens on a call (a
            // result, more scope asked for, a stream resumed).
            for t in tools {
                let request = ToolRequest {
                    answer: answer.clone(),
                    ..ToolRequest::new(
                        server.clone(),
                        t.name.clone(),
                        switchyard::mcp::example_arguments(&t.input_schema),
                        format!("conformance/{}", t.name),
                    )
                };
                let reply = client.call(&request).await?;
                println!("{}: {}", t.name, reply.content);
            }
            Ok::<_, switchyard::run::ToolError>(())
        }
        .await;
        client.shutdown().await;
        result
    });
    result?;
    Ok(exit::OK)
}

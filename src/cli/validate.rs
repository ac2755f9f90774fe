//! `switchyard validate`: checks graph files and reports every problem, as text for
//! people or JSON for tools; `--online` also asks the graphs' MCP servers.

use super::exit;
use super::flags::ReportFormat;
use std::io::Write;
use std::path::PathBuf;
use switchyard::tool::ToolClient;
use switchyard::{Sources, Validation, validate_file};

#[derive(clap::Args)]
pub(crate) struct ValidateArgs {
    /// Graph files to check; `-` reads one from standard input (its prompt and schema
    /// paths then resolve against the working directory).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// How to print the diagnostics.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Also start the graph's MCP servers and check tool names and literal arguments.
    #[arg(long)]
    online: bool,
    /// Also print each valid graph's worst case per run: model calls, tool calls,
    /// side-effecting tool calls, tokens and (with prices) dollars, with the way
    /// through the graph that reaches each.
    #[arg(long)]
    cost: bool,
}

pub(crate) fn validate(args: ValidateArgs) -> anyhow::Result<u8> {
    let ValidateArgs {
        files,
        format,
        online,
        cost,
    } = args;
    let mut invalid = false;
    let mut reports = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut unreadable = false;
    if files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        eprintln!("error: `-` (standard input) can be given once");
        return Ok(exit::USAGE);
    }
    for path in &files {
        let mut sources = Sources::new();
        // A graph's tests are checked against the graph they test.
        if switchyard::testing::is_test_file(path) {
            match switchyard::testing::check_file(path, &mut sources) {
                Ok(diagnostics) => {
                    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
                    invalid |= errors > 0;
                    match format {
                        ReportFormat::Text => {
                            let mut err = std::io::stderr().lock();
                            for d in &diagnostics {
                                writeln!(err, "{}", super::color::diagnostics(&d.render(&sources)))?;
                            }
                            if errors == 0 {
                                writeln!(out, "{}: ok (test file)", path.display())?;
                            } else {
                                let s = if errors == 1 { "" } else { "s" };
                                writeln!(err, "{}: {errors} error{s}", path.display())?;
                            }
                        }
                        ReportFormat::Json => reports.push(serde_json::json!({
                            "file": path.display().to_string(),
                            "valid": errors == 0,
                            "diagnostics": diagnostics.iter().map(|d| d.to_json(&sources)).collect::<Vec<_>>(),
                        })),
                    }
                }
                Err(e) => {
                    unreadable = true;
                    eprintln!("error: {e}");
                }
            }
            continue;
        }
        // A file that cannot be read is reported, and the others are still checked.
        let read: anyhow::Result<Validation> = if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))
                .map(|_| {
                    switchyard::validate_str(std::path::Path::new("<stdin>"), &text, &mut sources)
                })
        } else {
            validate_file(path, &mut sources).map_err(anyhow::Error::from)
        };
        let shown = if path.as_os_str() == "-" {
            PathBuf::from("<stdin>")
        } else {
            path.clone()
        };
        let path = &shown;
        let mut v = match read {
            Ok(v) => v,
            Err(e) => {
                unreadable = true;
                let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
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
                    writeln!(err, "{}", super::color::diagnostics(&d.render(&sources)))?;
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
                    writeln!(
                        out,
                        "{}: ok ({} nodes, {fields} state fields{consts})",
                        path.display(),
                        spec.nodes.len()
                    )?;
                    if cost {
                        write_cost(&mut out, &switchyard::cost(spec, &mut sources))?;
                    }
                } else {
                    let s = if errors == 1 { "" } else { "s" };
                    writeln!(err, "{}: {errors} error{s}", path.display())?;
                }
            }
            ReportFormat::Json => {
                let mut report = serde_json::json!({
                    "file": path.display().to_string(),
                    "valid": v.is_valid(),
                    "diagnostics": v.diagnostics.iter().map(|d| d.to_json(&sources)).collect::<Vec<_>>(),
                });
                if let (true, Some(spec)) = (cost && v.is_valid(), &v.spec) {
                    report["cost"] = serde_json::to_value(switchyard::cost(spec, &mut sources))?;
                }
                reports.push(report);
            }
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

/// `validate --cost` as text: each measure's worst case and the way that reaches it,
/// then the loops and their bounds.
fn write_cost(out: &mut impl Write, report: &switchyard::CostReport) -> std::io::Result<()> {
    writeln!(out, "  worst case per run:")?;
    for w in &report.measures {
        let budget = w
            .budget
            .map(|b| format!(" (budget {})", number(w.measure, b)))
            .unwrap_or_default();
        match (w.worst, &w.unbounded) {
            (Some(n), _) => writeln!(out, "    {}: {}{budget}", w.measure, number(w.measure, n))?,
            (None, why) => writeln!(
                out,
                "    {}: unbounded{budget}: {}",
                w.measure,
                why.as_deref().unwrap_or("")
            )?,
        }
        if !w.path.is_empty() {
            writeln!(out, "      via {}", w.path)?;
        }
    }
    if !report.loops.is_empty() {
        writeln!(out, "  loops:")?;
    }
    for l in &report.loops {
        // A loop of thousands of nodes is shown by its ends (the JSON lists them all).
        let nodes = if l.nodes.len() > 12 {
            format!(
                "{}, ... {} more ..., {}",
                l.nodes[..8].join(", "),
                l.nodes.len() - 10,
                l.nodes[l.nodes.len() - 2..].join(", ")
            )
        } else {
            l.nodes.join(", ")
        };
        match (l.times, &l.guard, &l.unbounded) {
            (Some(n), Some(g), _) => writeln!(out, "    ({nodes}) at most {n} times: `{g}`")?,
            (Some(n), None, _) => writeln!(out, "    ({nodes}) at most {n} times")?,
            (None, _, why) => writeln!(
                out,
                "    ({nodes}) unbounded: {}",
                why.as_deref().unwrap_or("")
            )?,
        }
    }
    Ok(())
}

fn number(measure: &str, n: f64) -> String {
    if measure == "usd" {
        format!("${n:.4}")
    } else {
        format!("{n}")
    }
}

/// `validate --online`: adds the diagnostics that need the servers to a valid graph.
fn check_online(v: &mut Validation, sources: &Sources) -> anyhow::Result<()> {
    let Some(spec) = v.spec.as_ref().filter(|_| v.is_valid()) else {
        return Ok(());
    };
    let graph = switchyard::compile(spec, sources)?;
    let client = super::graph_tools(&graph.root);
    let found = super::runtime()?.block_on(async {
        let found = switchyard::mcp::check_online(spec, &graph, &client).await;
        client.shutdown().await;
        found
    });
    v.diagnostics.extend(found);
    switchyard::diagnostic::sort(&mut v.diagnostics);
    Ok(())
}

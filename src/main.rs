//! The `switchyard` command: parses the command line, calls the library, prints.

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use switchyard::render::{self, Format};
use switchyard::{Sources, validate_file};

/// Exit codes, in one place (documented in docs/cli.md).
mod exit {
    /// Success.
    pub(crate) const OK: u8 = 0;
    /// The command failed: a file could not be read or written, a run failed.
    pub(crate) const FAILED: u8 = 1;
    /// The command line was wrong (clap exits with this code itself).
    #[allow(dead_code)]
    pub(crate) const USAGE: u8 = 2;
    /// A graph file is invalid.
    pub(crate) const INVALID: u8 = 3;
}

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent graphs declared in TOML"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check graph files and report every problem.
    Validate {
        /// Graph files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// How to print the diagnostics.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// Draw a graph as Graphviz DOT or a Mermaid flowchart.
    Render {
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = RenderFormat::Dot)]
        format: RenderFormat,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum RenderFormat {
    Dot,
    Mermaid,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { files, format } => validate(&files, format),
        Command::Render {
            file,
            format,
            output,
        } => render(&file, format, output),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("caused by: {cause}");
            }
            ExitCode::from(exit::FAILED)
        }
    }
}

/// `switchyard render ... | head` closes the pipe early; that is not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn validate(files: &[PathBuf], format: ReportFormat) -> anyhow::Result<u8> {
    let mut invalid = false;
    let mut reports = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for path in files {
        let mut sources = Sources::new();
        let v = validate_file(path, &mut sources)?;
        invalid |= !v.is_valid();
        match format {
            ReportFormat::Text => {
                let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
                let mut err = std::io::stderr().lock();
                for d in &v.diagnostics {
                    writeln!(err, "{}", d.render(&sources))?;
                }
                if v.is_valid() {
                    let spec = v.spec.as_ref().expect("valid means loaded");
                    writeln!(out, "{}: ok ({} nodes, {} state fields)", path.display(), spec.nodes.len(), spec.state.len())?;
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
    Ok(if invalid { exit::INVALID } else { exit::OK })
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
            eprint!("{}", d.render(&sources));
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

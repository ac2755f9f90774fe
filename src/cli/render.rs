//! `switchyard render`: draws a graph file as DOT, Mermaid or SVG, even one with
//! problems (they are counted on standard error).

use super::exit;
use anyhow::Context;
use clap::ValueEnum;
use std::io::Write;
use std::path::PathBuf;
use switchyard::render::Format;
use switchyard::{Sources, validate_file};

#[derive(clap::Args)]
pub(crate) struct RenderArgs {
    /// The graph file to draw.
    file: PathBuf,
    /// The drawing's language.
    #[arg(long, value_enum, default_value_t = RenderFormat::Dot)]
    format: RenderFormat,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum RenderFormat {
    Dot,
    Mermaid,
    /// Laid out by Switchyard itself: no Graphviz needed.
    Svg,
}

pub(crate) fn render(args: RenderArgs) -> anyhow::Result<u8> {
    let path = &args.file;
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources)?;
    let Some(spec) = &v.spec else {
        for d in &v.diagnostics {
            eprint!("{}", super::color::diagnostics(&d.render(&sources)));
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
    let format = match args.format {
        RenderFormat::Dot => Format::Dot,
        RenderFormat::Mermaid => Format::Mermaid,
        RenderFormat::Svg => Format::Svg,
    };
    let text = switchyard::render::render(spec, format);
    match args.output {
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

//! `switchyard man` and `switchyard completions`: the manual page and the shells'
//! completion scripts, generated from the whole command line's definition (`main`
//! passes it in: this file, like every subcommand's, does not import `args`).

use super::exit;
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

#[derive(clap::Args)]
pub(crate) struct ManArgs {
    /// Write `switchyard.1` and a page per command (`switchyard-run.1`, ...) here.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// `switchyard completions SHELL`: made whole first, so a closed pipe is an error to
/// report (quietly), not a panic in the generator.
pub(crate) fn completions(args: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "switchyard", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(exit::OK)
}

/// `switchyard man [--dir DIR]`: the manual page on standard output, or a page per
/// command written into DIR (their names printed).
pub(crate) fn man(args: ManArgs, cli: clap::Command) -> anyhow::Result<u8> {
    let Some(dir) = args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cli).render(&mut page)?;
        std::io::stdout().write_all(&page)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    clap_mangen::generate_to(cli, &dir)
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

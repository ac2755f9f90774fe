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

/// The manual's EXIT STATUS and ENVIRONMENT sections (roff), as docs/cli.md lists them.
const SECTIONS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success: a file is valid, a run reached a finalize node or END.
.TP
\fB1\fR
The command failed: a file could not be read or written, a run failed.
.TP
\fB2\fR
The command line was wrong, or a run\(aqs \fB\-\-input\fR or \fB\-\-context\fR was refused before anything was saved.
.TP
\fB3\fR
A graph file is invalid (its diagnostics are printed).
.TP
\fB4\fR
The run is paused at an interrupt and waits for \fBswitchyard resume\fR.
.TP
\fB5\fR
The run was stopped at a node boundary; resume it.
.SH ENVIRONMENT
.TP
\fBSWITCHYARD_STORE\fR
The store when \fB\-\-store\fR is not given (default \fBsqlite:.switchyard/checkpoints.db\fR).
.TP
\fBSWITCHYARD_DURABILITY\fR, \fBSWITCHYARD_COMPRESS\fR
SQLite\(aqs durability and compression when the flags are not given.
.TP
\fBOPENAI_BASE_URL\fR, \fBOPENAI_API_KEY\fR
The model endpoint and its key (a graph\(aqs \fB[llm] base_url_env\fR and \fBapi_key_env\fR name others).
.TP
\fBANTHROPIC_BASE_URL\fR, \fBANTHROPIC_API_KEY\fR
The same for a graph whose \fB[llm] provider\fR is \fBanthropic\fR.
.TP
\fBOTEL_EXPORTER_OTLP_ENDPOINT\fR, \fBOTEL_EXPORTER_OTLP_PROTOCOL\fR, \fBOTEL_EXPORTER_OTLP_HEADERS\fR, \fBOTEL_SERVICE_NAME\fR, \fBOTEL_RESOURCE_ATTRIBUTES\fR
Where traces go when \fB\-\-otlp\fR is not given, how (\fBhttp/protobuf\fR, \fBhttp/json\fR or \fBgrpc\fR), with which headers, under which service name and resource.
.TP
\fBNO_COLOR\fR
When set and not empty, no colour (before \fBCLICOLOR_FORCE\fR).
.TP
\fBCLICOLOR_FORCE\fR
When set and not \fB0\fR, colour even when standard error is not a terminal.
.TP
\fBCLICOLOR\fR
\fB0\fR: no colour on a terminal either.
"#;

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
        page.extend_from_slice(SECTIONS.as_bytes());
        std::io::stdout().write_all(&page)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    clap_mangen::generate_to(cli, &dir)
        .with_context(|| format!("cannot write the pages into `{}`", dir.display()))?;
    // The main page ends with what clap does not know: exit codes and the environment.
    let main = dir.join("switchyard.1");
    let mut page =
        std::fs::read(&main).with_context(|| format!("cannot read `{}`", main.display()))?;
    page.extend_from_slice(SECTIONS.as_bytes());
    std::fs::write(&main, page).with_context(|| format!("cannot write `{}`", main.display()))?;
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

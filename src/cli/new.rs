//! `switchyard new`: a new graph from a template (`templates/`, built into the
//! binary): the graph, its prompts and schemas, its tests, and for `tool-agent` its own
//! MCP tool server in Python or TypeScript.

use super::exit;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// The graph's name: a letter, then letters, digits, `_` and `-`. It names the
    /// files (`NAME.toml`, `NAME.test.toml`, `prompts/NAME/`) and the graph.
    name: String,
    /// What the graph starts as: a chat over `messages`, a structured workflow with
    /// routes and an approval, or an agent whose custom logic is an MCP tool server.
    #[arg(long, value_enum, default_value_t = Template::Workflow)]
    template: Template,
    /// The language of the tool server (`tool-agent` only): Python (FastMCP) or
    /// TypeScript (the MCP TypeScript SDK).
    #[arg(long, value_enum, default_value_t = Lang::Py)]
    lang: Lang,
    /// The folder to write into (default: a new folder named NAME); files already
    /// there are never overwritten.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Template {
    Chat,
    Workflow,
    ToolAgent,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Lang {
    Py,
    Ts,
}

/// A template's file: its path and text, `{{name}}` and `{{lang}}` still in them.
struct File {
    path: &'static str,
    text: &'static str,
    /// Started as a program by the graph: written executable.
    program: bool,
}

macro_rules! files {
    (@program) => { false };
    (@program program) => { true };
    ($dir:literal: $($path:literal $(as $program:ident)?),* $(,)?) => {
        &[$(File {
            path: $path,
            text: include_str!(concat!("../../templates/", $dir, "/", $path)),
            program: files!(@program $($program)?),
        }),*]
    };
}

const CHAT: &[File] = files!("chat":
    "{{name}}.toml",
    "{{name}}.test.toml",
    "prompts/{{name}}/system.j2",
);

const WORKFLOW: &[File] = files!("workflow":
    "{{name}}.toml",
    "{{name}}.test.toml",
    "prompts/{{name}}/system.j2",
    "prompts/{{name}}/triage.j2",
    "schemas/{{name}}/triage.json",
    "schemas/{{name}}/review.json",
);

const TOOL_AGENT: &[File] = files!("tool-agent":
    "{{name}}.toml",
    "{{name}}.test.toml",
    "{{name}}.tools.json",
    "prompts/{{name}}/system.j2",
    "tools/server.py" as program,
    "tools/requirements.txt",
    "tools/server.ts" as program,
    "tools/package.json",
);

pub(crate) fn new(args: NewArgs) -> anyhow::Result<u8> {
    let NewArgs {
        name,
        template,
        lang,
        dir,
    } = args;
    let mut chars = name.chars();
    let plain = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        eprintln!(
            "{} the name `{name}` is not a letter followed by letters, digits, `_` and `-`: it names files, folders and the graph",
            super::color::error_label()
        );
        return Ok(exit::USAGE);
    }
    let (files, template_name) = match template {
        Template::Chat => (CHAT, "chat"),
        Template::Workflow => (WORKFLOW, "workflow"),
        Template::ToolAgent => (TOOL_AGENT, "tool-agent"),
    };
    let lang = match lang {
        Lang::Py => "py",
        Lang::Ts => "ts",
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let fill = |s: &str| s.replace("{{name}}", &name).replace("{{lang}}", lang);
    let planned: Vec<(PathBuf, String, bool)> = files
        .iter()
        .map(|f| (dir.join(fill(f.path)), fill(f.text), f.program))
        .collect();
    // Nothing is written when anything would be overwritten.
    let taken: Vec<String> = planned
        .iter()
        .filter(|(p, _, _)| p.exists())
        .map(|(p, _, _)| format!("`{}`", p.display()))
        .collect();
    if !taken.is_empty() {
        eprintln!(
            "{} {} already there; nothing was written (choose another name or --dir)",
            super::color::error_label(),
            taken.join(", ")
        );
        return Ok(exit::FAILED);
    }
    for (i, (path, text, program)) in planned.iter().enumerate() {
        if let Err(e) = write(path, text, *program) {
            // All or nothing: what was written before is taken back.
            for (written, _, _) in &planned[..i] {
                let _ = std::fs::remove_file(written);
            }
            return Err(e);
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "created the {template_name} graph `{name}` in {}:",
        dir.display()
    )?;
    for (path, _, _) in &planned {
        writeln!(out, "  {}", path.display())?;
    }
    let graph = dir.join(format!("{name}.toml"));
    let graph = graph.display();
    writeln!(out, "next:")?;
    if matches!(template, Template::ToolAgent) {
        let tools = dir.join("tools");
        let install = if lang == "py" {
            format!("pip install -r {}/requirements.txt", tools.display())
        } else {
            format!("(cd {} && npm install)", tools.display())
        };
        writeln!(out, "  {install}")?;
    }
    writeln!(out, "  switchyard validate {graph}")?;
    writeln!(out, "  switchyard test {graph}")?;
    writeln!(
        out,
        "  switchyard render {graph} --format svg -o {name}.svg"
    )?;
    out.flush()?;
    Ok(exit::OK)
}

fn write(path: &Path, text: &str, program: bool) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| anyhow::anyhow!("cannot create `{}`: {e}", parent.display()))?;
    }
    std::fs::write(path, text)
        .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?;
    if program {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| anyhow::anyhow!("cannot make `{}` executable: {e}", path.display()))?;
    }
    Ok(())
}

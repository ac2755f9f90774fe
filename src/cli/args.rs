//! The command line as clap reads it: the commands, each with the arguments its file
//! in `cli/` declares, and their help.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent graphs declared in TOML"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// When to colour diagnostics and errors: on a terminal (`auto`, unless `NO_COLOR`
    /// is set), `always` or `never`.
    #[arg(long, global = true, value_enum, default_value_t = super::color::ColorChoice::Auto)]
    pub(crate) color: super::color::ColorChoice,
}

/// The subcommands, each with its own arguments (defined beside its work in `cli/`).
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Check graph files and report every problem.
    #[command(
        after_help = "Examples:\n  switchyard validate graphs/*.toml\n  switchyard validate graphs/browser_agent.toml --format json\n  switchyard validate graphs/tool_agent.toml --online"
    )]
    Validate(super::validate::ValidateArgs),
    /// List the tools of a graph's MCP servers, with their input schemas.
    #[command(
        after_help = "Examples:\n  switchyard tools graphs/tool_agent.toml\n  switchyard tools graphs/browser_agent.toml --server browser --format json"
    )]
    Tools(super::tools::ToolsArgs),
    /// An MCP client for the conformance suite: connects to URL, lists the tools and
    /// calls each one, with the credentials the scenario hands out.
    #[command(hide = true)]
    McpConformanceClient(super::conformance::ConformanceArgs),
    /// Draw a graph as Graphviz DOT, a Mermaid flowchart, or an SVG picture.
    #[command(
        after_help = "Examples:\n  switchyard render graphs/browser_agent.toml | dot -Tsvg > agent.svg\n  switchyard render graphs/tool_agent.toml --format mermaid -o agent.mmd\n  switchyard render graphs/tool_agent.toml --format svg -o agent.svg"
    )]
    Render(super::render::RenderArgs),
    /// Run a graph on a thread, from its entry node.
    #[command(
        after_help = "Examples:\n  switchyard run graphs/tool_agent.toml --input '{\"user_message\": \"Write a haiku to haiku.txt\"}'\n  switchyard run graphs/reason_act_observe.toml --input @input.json --thread t1 --json\n  switchyard run graph.toml --store none --max-steps 20"
    )]
    Run(super::run::RunArgs),
    /// Run a graph's test cases (`X.test.toml` beside it) offline: scripted model
    /// replies, tool results and answers; the path, routes, outcome and state expected.
    #[command(
        after_help = "Examples:\n  switchyard test graphs/\n  switchyard test graphs/tool_agent.toml --case ask_human\n  switchyard test graphs/ --coverage --junit report.xml\n  switchyard test graphs/tool_agent.test.toml --update"
    )]
    Test(super::test::TestArgs),
    /// Start a new graph from a template: the graph, its prompts and schemas, its
    /// tests, and for `tool-agent` an MCP tool server in Python or TypeScript.
    #[command(
        after_help = "Examples:\n  switchyard new support --template chat\n  switchyard new refunds --template workflow --dir graphs\n  switchyard new orders --template tool-agent --lang ts"
    )]
    New(super::new::NewArgs),
    /// Continue a paused thread: answer its interrupt, or go on after a stop.
    #[command(
        after_help = "Examples:\n  switchyard resume --thread t1 --payload '{\"reference\": \"a1\", \"confirmed\": true}'\n  switchyard resume --thread t1\n  switchyard resume --thread t1 --at 12 --payload @answer.json"
    )]
    Resume(super::run::ResumeArgs),
    /// Print a thread's state and where it stands, as JSON; `state set` writes to it.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "Examples:\n  switchyard state --thread t1\n  switchyard state --thread t1 --at 4\n  switchyard state set --thread t1 --values '{\"goal\": \"Find the opening hours\"}'"
    )]
    State(super::inspect::StateArgs),
    /// List a thread's checkpoints.
    #[command(
        after_help = "Examples:\n  switchyard history --thread t1\n  switchyard history --thread t1 --json"
    )]
    History(super::inspect::HistoryArgs),
    /// Serve graphs over HTTP: the LangGraph Agent Server API (docs/server.md), for
    /// LangGraph's client SDKs and front ends.
    #[command(
        after_help = "Examples:\n  switchyard serve graphs/\n  switchyard serve graphs/ --listen 0.0.0.0:2024 --api-key-env SWITCHYARD_API_KEY\n  switchyard serve graphs/tool_agent.toml --store memory --cors http://localhost:5173\n  switchyard serve graphs/ --store 'postgresql://switchyard@db.internal/agents'"
    )]
    Serve(super::serve::ServeArgs),
    /// A language server for graph files over standard input and output: the same
    /// diagnostics as `validate`, with hover, go to definition, completion, rename,
    /// symbols and quick fixes (editors/README.md sets up Neovim, Helix, Zed, VS Code).
    #[command(after_help = "Examples:\n  switchyard lsp\n  switchyard lsp --stdio")]
    Lsp(super::lsp::LspArgs),
    /// Print a shell's completion script for `switchyard`.
    #[command(
        after_help = "Examples:\n  switchyard completions bash > ~/.local/share/bash-completion/completions/switchyard\n  switchyard completions zsh > ~/.zfunc/_switchyard\n  switchyard completions fish > ~/.config/fish/completions/switchyard.fish"
    )]
    Completions(super::man::CompletionsArgs),
    /// Print the manual page (roff), or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  switchyard man | man -l -\n  switchyard man --dir /usr/local/share/man/man1"
    )]
    Man(super::man::ManArgs),
    /// Keep a store bounded: prune a thread's history to its latest checkpoint, or
    /// delete threads that ended long ago.
    #[command(
        after_help = "Examples:\n  switchyard prune --thread t1\n  switchyard prune --ended-before 30d --store sqlite:agents.db"
    )]
    Prune(super::inspect::PruneArgs),
    /// Copy a thread up to a checkpoint into a new thread, to go on from there.
    #[command(
        after_help = "Examples:\n  switchyard fork --thread t1 --at 4\n  switchyard fork --thread t1 --at 4 --into t1-retry && switchyard resume --thread t1-retry"
    )]
    Fork(super::inspect::ForkArgs),
    /// What an edit of a graph changes, and which threads waiting on the old version
    /// can go on on the new one.
    #[command(
        after_help = "Examples:\n  switchyard diff old/agent.toml graphs/agent.toml\n  switchyard diff old/agent.toml graphs/agent.toml --store sqlite:.switchyard/checkpoints.db\n  switchyard diff old/agent.toml graphs/agent.toml --format json"
    )]
    Diff(super::diff::DiffArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every visible argument has a description and every visible command one and
    /// examples; what misses one, by path.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if a.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if a.get_help().is_none() {
                out.push(format!("{path} --{id}: no description"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let name = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                out.push(format!("{name}: no description"));
            }
            let examples = sub.get_after_help().map(|h| h.to_string());
            if !examples.is_some_and(|e| e.starts_with("Examples:\n  switchyard ")) {
                out.push(format!("{name}: no examples"));
            }
            undocumented(sub, &name, out);
        }
    }

    #[test]
    fn every_command_and_argument_is_described_and_every_command_has_examples() {
        Cli::command().debug_assert();
        let mut out = Vec::new();
        undocumented(&Cli::command(), "switchyard", &mut out);
        assert_eq!(out, Vec::<String>::new());
    }
}

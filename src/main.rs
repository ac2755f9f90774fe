//! The `switchyard` command: parses the command line and hands each subcommand to its
//! file in `cli/`, which calls the library and prints; errors become exit codes here.

mod cli;

use clap::{CommandFactory, Parser};
use cli::args::{Cli, Command};
use cli::exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::color::set(cli.color);
    let result = match cli.command {
        Command::Validate(args) => cli::validate::validate(args),
        Command::Tools(args) => cli::tools::tools(args),
        Command::McpConformanceClient(args) => cli::conformance::client(args),
        Command::Render(args) => cli::render::render(args),
        Command::Run(args) => cli::run::run(args),
        Command::Resume(args) => cli::run::resume(args),
        Command::State(args) => cli::block_on(cli::inspect::state(args)),
        Command::History(args) => cli::block_on(cli::inspect::history(args)),
        Command::Fork(args) => cli::block_on(cli::inspect::fork(args)),
        Command::Prune(args) => cli::block_on(cli::inspect::prune(args)),
        Command::Diff(args) => cli::block_on(cli::diff::diff(args)),
        Command::Serve(args) => cli::serve::serve(args),
        Command::Test(args) => cli::test::test(args),
        Command::New(args) => cli::new::new(args),
        Command::Lsp(args) => cli::lsp::lsp(args),
        Command::Completions(args) => cli::man::completions(args, Cli::command()),
        Command::Man(args) => cli::man::man(args, Cli::command()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // `switchyard render ... | head` closes the pipe early; that is not a failure.
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

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

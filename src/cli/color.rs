//! `--color`: diagnostics and errors coloured for a terminal. The library renders plain
//! text; colour is painted over it here, at the edge, so every other output (and every
//! test of it) stays plain.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// When to colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (or `CLICOLOR=0`); with
    /// `CLICOLOR_FORCE` (not `0`), off a terminal too.
    Auto,
    Always,
    Never,
}

static ON: AtomicBool = AtomicBool::new(false);

/// Decides once, from the flag, whether standard error is a terminal and `NO_COLOR`.
pub(crate) fn set(choice: ColorChoice) {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            // As anstream reads them: NO_COLOR first, then CLICOLOR_FORCE, CLICOLOR.
            let set = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
            let no_color = set("NO_COLOR").is_some();
            let force = set("CLICOLOR_FORCE").is_some_and(|v| v != "0");
            let off = set("CLICOLOR").is_some_and(|v| v == "0");
            !no_color && (force || (!off && std::io::stderr().is_terminal()))
        }
    };
    ON.store(on, Ordering::Relaxed);
}

fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const BLUE: &str = "\x1b[1;34m";

/// `error:` as the command's last line starts.
pub(crate) fn error_label() -> Cow<'static, str> {
    if on() {
        Cow::Owned(format!("{RED}error{RESET}:"))
    } else {
        Cow::Borrowed("error:")
    }
}

/// Rendered diagnostics, painted: the severity and message, the `-->` and the gutter,
/// the carets in the severity's colour, `help` and `note`.
pub(crate) fn diagnostics(text: &str) -> Cow<'_, str> {
    if !on() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(paint(text))
}

fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut severity = RED;
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if let Some((head, message)) = header(body) {
            severity = if head.starts_with("warning") {
                YELLOW
            } else {
                RED
            };
            out.push_str(&format!("{severity}{head}{RESET}{BOLD}:{message}{RESET}"));
        } else if let Some(rest) = body.trim_start().strip_prefix("--> ") {
            let indent = &body[..body.len() - body.trim_start().len()];
            out.push_str(&format!("{indent}{BLUE}-->{RESET} {rest}"));
        } else if let Some(bar) = gutter(body) {
            let (left, right) = body.split_at(bar + 1);
            let carets = right.trim_start().starts_with(['^', '-']);
            if carets {
                out.push_str(&format!("{BLUE}{left}{RESET}{severity}{right}{RESET}"));
            } else {
                out.push_str(&format!("{BLUE}{left}{RESET}{right}"));
            }
        } else if let Some((indent, kind, rest)) = ["help", "note"].iter().find_map(|k| {
            let trimmed = body.trim_start();
            let rest = trimmed
                .strip_prefix("= ")?
                .strip_prefix(*k)?
                .strip_prefix(':')?;
            Some((&body[..body.len() - trimmed.len()], *k, rest))
        }) {
            out.push_str(&format!(
                "{indent}{BLUE}={RESET} {BOLD}{kind}{RESET}:{rest}"
            ));
        } else {
            out.push_str(body);
        }
        out.push_str(end);
    }
    out
}

/// `error: message` or `warning[code]: message`, split at the colon.
fn header(line: &str) -> Option<(&str, &str)> {
    if !(line.starts_with("error") || line.starts_with("warning")) {
        return None;
    }
    let colon = line.find(':')?;
    let head = &line[..colon];
    let word = head.split('[').next()?;
    (word == "error" || word == "warning").then(|| (head, &line[colon + 1..]))
}

/// Where the gutter's `|` is, on a source line (`9 | [nodes.a]`) or its margin (`  |`).
fn gutter(line: &str) -> Option<usize> {
    let bar = line.find('|')?;
    line[..bar]
        .chars()
        .all(|c| c.is_ascii_digit() || c == ' ')
        .then_some(bar)
}

#[cfg(test)]
mod tests {
    use super::paint;

    #[test]
    fn a_diagnostic_is_painted_part_by_part() {
        let plain = "error: node `a` has no outgoing edge\n  --> g.toml:9:8\n  |\n9 | [nodes.a]\n  |        ^ dead end\n  |\n  = help: give it `next`\n";
        assert_eq!(
            paint(plain),
            "\x1b[1;31merror\x1b[0m\x1b[1m: node `a` has no outgoing edge\x1b[0m\n  \x1b[1;34m-->\x1b[0m g.toml:9:8\n\x1b[1;34m  |\x1b[0m\n\x1b[1;34m9 |\x1b[0m [nodes.a]\n\x1b[1;34m  |\x1b[0m\x1b[1;31m        ^ dead end\x1b[0m\n\x1b[1;34m  |\x1b[0m\n  \x1b[1;34m=\x1b[0m \x1b[1mhelp\x1b[0m: give it `next`\n"
        );
        // A warning's carets are yellow; other text is left as it is.
        assert_eq!(
            paint("warning: odd\n1 | x\n  | ^ here\nok\n"),
            "\x1b[1;33mwarning\x1b[0m\x1b[1m: odd\x1b[0m\n\x1b[1;34m1 |\x1b[0m x\n\x1b[1;34m  |\x1b[0m\x1b[1;33m ^ here\x1b[0m\nok\n"
        );
    }
}

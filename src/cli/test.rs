//! `switchyard test`: runs the cases of graph test files (docs/testing.md), prints
//! each case's result and the first place a failing one went another way; `--update`
//! rewrites the expectations, `--junit` writes a report for CI, `--coverage` tells
//! which nodes and routes no case took.

use super::exit;
use std::io::Write;
use std::path::{Path, PathBuf};
use switchyard::Sources;
use switchyard::testing::{CaseResult, Suite, SuiteError, is_test_file};

#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// Test files (`X.test.toml`), graphs (their `X.test.toml` beside them) or
    /// folders (every `*.test.toml` in them and their subfolders).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Run only the case of this name.
    #[arg(long, value_name = "NAME")]
    case: Option<String>,
    /// Rewrite each case's expectations (path, routes, outcome, response, error, the
    /// state fields it names) from what its run did.
    #[arg(long)]
    update: bool,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also print, for each graph, the nodes and routes no case took.
    #[arg(long)]
    coverage: bool,
}

pub(crate) fn test(args: TestArgs) -> anyhow::Result<u8> {
    let files = match test_files(&args.paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{} {e}", super::color::error_label());
            return Ok(exit::USAGE);
        }
    };
    if files.is_empty() {
        eprintln!(
            "{} no test files (`*.test.toml`) in {}",
            super::color::error_label(),
            args.paths
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(exit::USAGE);
    }
    // The cases' clock is paused: it moves on when every task waits on a timer, so a
    // retry's backoff takes no real time (the scripted model and tools never wait).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?;
    let mut out = std::io::stdout().lock();
    let (mut passed, mut failed, mut invalid) = (0usize, 0usize, false);
    // Failing cases `--update` left as they were (their runs went against their
    // scripts): still failing after it.
    let mut not_updated = 0usize;
    let mut suites = Vec::new();
    // Test files that could not run, with why: an error of their own in the report.
    let mut broken: Vec<(PathBuf, String)> = Vec::new();
    let mut matched = false;
    for file in &files {
        let mut sources = Sources::new();
        let suite = match Suite::load(file, &mut sources) {
            Ok(s) => s,
            Err(SuiteError::Invalid {
                diagnostics, count, ..
            }) => {
                invalid = true;
                let rendered: Vec<String> =
                    diagnostics.iter().map(|d| d.render(&sources)).collect();
                let mut err = std::io::stderr().lock();
                for r in &rendered {
                    writeln!(err, "{}", super::color::diagnostics(r))?;
                }
                let s = if count == 1 { "" } else { "s" };
                writeln!(err, "{}: {count} error{s}", file.display())?;
                let first = diagnostics
                    .iter()
                    .find(|d| d.is_error())
                    .map(|d| d.message.as_str());
                broken.push((
                    file.clone(),
                    format!(
                        "{count} error{s}, the first: {}\n{}",
                        first.unwrap_or_default(),
                        rendered.join("\n")
                    ),
                ));
                continue;
            }
            Err(e) => {
                invalid = true;
                eprintln!("{} {e}", super::color::error_label());
                broken.push((file.clone(), e.to_string()));
                continue;
            }
        };
        if args
            .case
            .as_deref()
            .is_some_and(|c| !suite.case_names().contains(&c))
        {
            continue;
        }
        matched = true;
        let results = runtime.block_on(suite.run(args.case.as_deref()));
        writeln!(out, "{}", suite.path.display())?;
        for r in &results {
            let ms = r.duration.as_secs_f64() * 1000.0;
            if r.passed() {
                passed += 1;
                writeln!(out, "  ok   {} ({ms:.1} ms)", r.name)?;
            } else {
                failed += 1;
                writeln!(out, "  FAIL {} ({ms:.1} ms)", r.name)?;
                for f in &r.failures {
                    writeln!(out, "    {}", f.replace('\n', "\n    "))?;
                }
            }
        }
        if args.coverage {
            writeln!(
                out,
                "coverage of {} by {} case{}:\n{}",
                suite.graph_path.display(),
                results.len(),
                if results.len() == 1 { "" } else { "s" },
                suite.coverage(&results).render()
            )?;
        }
        if args.update {
            let (text, skipped) = suite.updated(&results);
            not_updated += skipped.len();
            for name in &skipped {
                writeln!(
                    out,
                    "  not updated: {name} (its run went against its script: mend the script first)"
                )?;
            }
            std::fs::write(&suite.path, text)
                .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", suite.path.display()))?;
            writeln!(out, "  updated {}", suite.path.display())?;
        }
        suites.push((suite.path.clone(), results));
    }
    if let Some(name) = &args.case
        && !matched
        && !invalid
    {
        eprintln!("{} no case is named `{name}`", super::color::error_label());
        return Ok(exit::USAGE);
    }
    writeln!(
        out,
        "{passed} passed, {failed} failed{}",
        if args.update {
            " (before the update)"
        } else {
            ""
        }
    )?;
    out.flush()?;
    if let Some(path) = &args.junit {
        std::fs::write(path, junit(&suites, &broken))
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?;
    }
    Ok(if invalid {
        exit::INVALID
    } else if (failed > 0 && !args.update) || not_updated > 0 {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// The test files `paths` name, each once, in order.
fn test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found);
            found.sort();
            out.extend(found);
        } else if !p.exists() {
            return Err(format!("`{}` does not exist", p.display()));
        } else if is_test_file(p) {
            out.push(p.clone());
        } else if p.extension().is_some_and(|e| e == "toml") {
            let beside = p.with_extension("test.toml");
            if !beside.is_file() {
                return Err(format!(
                    "`{}` has no tests beside it (`{}`)",
                    p.display(),
                    beside.display()
                ));
            }
            out.push(beside);
        } else {
            return Err(format!(
                "`{}` is not a test file, a graph or a folder",
                p.display()
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        // Installed packages and build output hold no tests of ours.
        if name == "node_modules" || name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if is_test_file(&p) {
            out.push(p);
        }
    }
}

/// The results as JUnit XML: a testsuite per file, a testcase per case, a failure
/// holding every difference; a test file that could not run is a testsuite with an
/// error, so that a report never looks green for want of it.
fn junit(suites: &[(PathBuf, Vec<CaseResult>)], broken: &[(PathBuf, String)]) -> String {
    let total: usize = suites.iter().map(|(_, r)| r.len()).sum();
    let failures: usize = suites
        .iter()
        .map(|(_, r)| r.iter().filter(|c| !c.passed()).count())
        .sum();
    let time: f64 = suites
        .iter()
        .flat_map(|(_, r)| r.iter().map(|c| c.duration.as_secs_f64()))
        .sum();
    let errors = broken.len();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"switchyard test\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.6}\">\n",
        total + errors
    );
    for (path, why) in broken {
        let name = escape(&path.display().to_string());
        let first = why.lines().next().unwrap_or_default();
        s.push_str(&format!(
            "  <testsuite name=\"{name}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n    <testcase name=\"(the test file)\" classname=\"{name}\" time=\"0\">\n      <error message=\"{}\" type=\"invalid\">{}</error>\n    </testcase>\n  </testsuite>\n",
            escape(first),
            escape(why)
        ));
    }
    for (path, results) in suites {
        let name = escape(&path.display().to_string());
        let failed = results.iter().filter(|c| !c.passed()).count();
        let time: f64 = results.iter().map(|c| c.duration.as_secs_f64()).sum();
        s.push_str(&format!(
            "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"{time:.6}\">\n",
            results.len()
        ));
        for c in results {
            s.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{name}\" time=\"{:.6}\"",
                escape(&c.name),
                c.duration.as_secs_f64()
            ));
            if c.passed() {
                s.push_str("/>\n");
            } else {
                let first = c.failures[0].lines().next().unwrap_or_default();
                s.push_str(&format!(
                    ">\n      <failure message=\"{}\" type=\"divergence\">{}</failure>\n    </testcase>\n",
                    escape(first),
                    escape(&c.failures.join("\n"))
                ));
            }
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

/// Text as XML character data or an attribute value; characters XML 1.0 cannot hold
/// (control characters other than tab and newline) are written as `\u{..}`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

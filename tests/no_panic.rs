//! Thousands of mutated copies of the examples go through load, check and render: bad
//! input must produce diagnostics, never a panic. The mutations come from a fixed seed,
//! so a failure reproduces.

use crate::util::{examples, root};
use switchyard::render::{Format, render};
use switchyard::{Sources, validate_str};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "=",
    "[",
    "]",
    "\"",
    "'",
    "{",
    "}",
    "{{",
    "}}",
    "{%",
    "%}",
    "\n",
    "#",
    ",",
    ".",
    "0",
    "-1",
    "true",
    "END",
    "nodes.",
    "state.",
    "99999999999999999999",
    "list<",
    ">",
    "?",
    "kind",
    "next",
    "route",
    "when",
    "\\",
    "\u{e9}",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(6) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(rng.below(lines.len()), l);
            }
            2 => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
            3 => {
                let line = &lines[i];
                let cut = line
                    .char_indices()
                    .map(|(k, _)| k)
                    .nth(rng.below(line.chars().count() + 1))
                    .unwrap_or(line.len());
                let token = TOKENS[rng.below(TOKENS.len())];
                lines[i] = format!("{}{token}{}", &line[..cut], &line[cut..]);
            }
            4 => {
                // Swap one word of the line for a word from elsewhere in the file: names
                // become other names, keys become values.
                let words: Vec<&str> = text
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .filter(|w| !w.is_empty())
                    .collect();
                if let (Some(old), Some(new)) = (
                    lines[i]
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .find(|w| !w.is_empty())
                        .map(String::from),
                    words.get(rng.below(words.len())),
                ) {
                    lines[i] = lines[i].replacen(&old, new, 1);
                }
            }
            _ => {
                lines.truncate(i);
            }
        }
    }
    lines.join("\n")
}

/// The slowest case of a corpus, printed when `SWITCHYARD_CORPUS_TIMES` is set: how
/// the corpus's cases are measured against their one-second bound (docs/performance.md;
/// a measurement, not an assertion: times depend on the machine).
#[derive(Default)]
struct Slowest(std::time::Duration, String);

impl Slowest {
    fn note(&mut self, took: std::time::Duration, what: impl FnOnce() -> String) {
        if took > self.0 {
            *self = Slowest(took, what());
        }
    }

    fn report(&self, corpus: &str, cases: usize) {
        if std::env::var_os("SWITCHYARD_CORPUS_TIMES").is_some() {
            eprintln!(
                "{corpus}: {cases} cases, the slowest {:.1} ms ({})",
                self.0.as_secs_f64() * 1000.0,
                self.1
            );
        }
    }
}

#[test]
fn mutated_examples_never_panic() {
    let graphs = examples();
    assert!(!graphs.is_empty());
    let mut rng = Rng(0x5717_c4a2_d00d_f00d);
    let per_graph = 3000 / graphs.len();
    let mut diagnosed = 0;
    let mut slowest = Slowest::default();
    for path in &graphs {
        let text = std::fs::read_to_string(root().join(path)).unwrap();
        for round in 0..per_graph {
            let mutated = mutate(&mut rng, &text);
            let started = std::time::Instant::now();
            let outcome = std::panic::catch_unwind(|| {
                let mut sources = Sources::new();
                let v = validate_str(path, &mutated, &mut sources);
                for d in &v.diagnostics {
                    let _ = d.render(&sources);
                    let _ = d.to_json(&sources);
                }
                if let Some(spec) = &v.spec {
                    let _ = render(spec, Format::Dot);
                    let _ = render(spec, Format::Mermaid);
                }
                !v.diagnostics.is_empty()
            });
            slowest.note(started.elapsed(), || {
                format!("{} round {round}", path.display())
            });
            match outcome {
                Ok(had_diagnostics) => diagnosed += usize::from(had_diagnostics),
                Err(_) => panic!("{} round {round} panicked on:\n{mutated}", path.display()),
            }
        }
    }
    slowest.report("mutated examples", per_graph * graphs.len());
    // Most mutations break something; if none were diagnosed the mutator is broken.
    assert!(
        diagnosed > per_graph * graphs.len() / 2,
        "only {diagnosed} mutations were diagnosed"
    );
}

/// Chains that nest an expression one level per link: what overflowed the parser's
/// stack before sources were measured.
const CHAINS: &[(&str, &str, &str)] = &[
    ("not ", "", "true"),
    ("", " + 1", "1"),
    ("", " ~ 'a'", "'a'"),
    ("", " | abs", "1"),
    ("", ".a", "run"),
    ("1 if true else ", "", "1"),
    ("(", ")", "1"),
    ("[", "]", "1"),
    ("-", "", "1"),
    ("", " and true", "true"),
    ("", "[0]", "run"),
    ("{", ": 1}", "'k'"),
];

/// Lengths around the limits, and far past them.
const LENGTHS: &[usize] = &[1, 7, 99, 100, 101, 500, 999, 1_000, 1_001, 4_000, 30_000];

/// Paths a graph might name for a prompt or schema: fine, outside the root, special.
const PATHS: &[&str] = &[
    "ok.json",
    "prompt.j2",
    "prompt.j2",
    "../outside.json",
    "/dev/zero",
    "/proc/self/environ",
    "/etc/passwd",
    "link.json",
    "fifo.json",
    "big.json",
    "missing.json",
    "sub/../ok.json",
    "sub/../../outside.json",
    "",
    ".",
];

fn chain(rng: &mut Rng) -> String {
    let (open, close, atom) = CHAINS[rng.below(CHAINS.len())];
    let n = LENGTHS[rng.below(LENGTHS.len())];
    let mut out = String::with_capacity((open.len() + close.len()) * n + atom.len());
    for _ in 0..n {
        out.push_str(open);
    }
    out.push_str(atom);
    for _ in 0..n {
        out.push_str(close);
    }
    out
}

fn template(rng: &mut Rng) -> String {
    let n = LENGTHS[rng.below(LENGTHS.len())];
    match rng.below(3) {
        0 => format!("{{{{ {} }}}}", chain(rng)),
        1 => format!("{}x{}", "{% if true %}".repeat(n), "{% endif %}".repeat(n)),
        _ => format!(
            "{}{{{{ {} }}}}{}",
            "{% for i in [1] %}".repeat(n.min(200)),
            chain(rng),
            "{% endfor %}".repeat(n.min(200))
        ),
    }
}

/// A graph with hostile expressions, templates and paths in random places.
fn hostile_graph(rng: &mut Rng) -> (String, String, bool) {
    let expr = chain(rng);
    let cond = chain(rng);
    let response = template(rng);
    let prompt_path = PATHS[rng.below(PATHS.len())];
    let schema_path = PATHS[rng.below(PATHS.len())];
    let outside = rng.below(2) == 0;
    let allow = if outside {
        "allow_outside_root = true\n"
    } else {
        ""
    };
    let graph = format!(
        r#"[graph]
name = "hostile"
entry = "a"
{allow}
[llm]
model = "m"

[state.b]
type = "json?"

[state.c]
type = "json?"
schema = {schema_path:?}

[nodes.a]
kind = "set"
set = {{ b = {expr:?} }}
[nodes.a.route]
when = [{{ case = "x", if = {cond:?}, to = "think" }}]
default = "done"

[nodes.think]
kind = "llm_structured"
prompt = {prompt_path:?}
schema = "ok.json"
output = "c"
next = "done"

[nodes.done]
kind = "finalize"
outcome = "done"
response = {response:?}
"#
    );
    (graph, template(rng), outside)
}

/// Generated graphs with expressions, templates and paths built to break the loader
/// and checker go through validate and render on a 2 MiB stack: each ends in
/// diagnostics, never a crash, a hang or a read outside the graph's directory unless
/// the graph opts in. The
/// cases come from a fixed seed and their number is bounded, so CI time is too.
#[test]
fn hostile_generated_graphs_end_in_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("graph");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("ok.json"), r#"{ "type": "object" }"#).unwrap();
    std::fs::write(dir.path().join("outside.json"), "{}").unwrap();
    std::fs::write(root.join("big.json"), " ".repeat((1 << 20) + 10)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("link.json")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(root.join("fifo.json"))
            .status()
            .unwrap()
            .success()
    );
    let graph_path = root.join("g.toml");
    let prompt_path = root.join("prompt.j2");
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let mut rng = Rng(0x0dd_ba11_cafe_f00d);
            let mut slowest = Slowest::default();
            for case in 0..250 {
                let started = std::time::Instant::now();
                let (graph, prompt, outside) = hostile_graph(&mut rng);
                std::fs::write(&prompt_path, &prompt).unwrap();
                let mut sources = Sources::new();
                let v = validate_str(&graph_path, &graph, &mut sources);
                let mut shown = String::new();
                for d in &v.diagnostics {
                    shown.push_str(&d.render(&sources));
                    let _ = d.to_json(&sources);
                }
                if let Some(spec) = &v.spec {
                    let _ = render(spec, Format::Dot);
                    let _ = render(spec, Format::Mermaid);
                }
                // Only `allow_outside_root` reads outside, and never the kernel's files.
                assert!(
                    (outside || !shown.contains("root:x:0:0")) && !shown.contains("PATH="),
                    "case {case} quoted a file outside its root:\n{shown}"
                );
                slowest.note(started.elapsed(), || format!("case {case}"));
            }
            slowest.report("hostile generated graphs", 250);
        })
        .unwrap()
        .join()
        .expect("the checker does not crash");
}

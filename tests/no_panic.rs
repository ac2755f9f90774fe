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

#[test]
fn mutated_examples_never_panic() {
    let graphs = examples();
    assert!(!graphs.is_empty());
    let mut rng = Rng(0x5717_c4a2_d00d_f00d);
    let per_graph = 3000 / graphs.len();
    let mut diagnosed = 0;
    for path in &graphs {
        let text = std::fs::read_to_string(root().join(path)).unwrap();
        for round in 0..per_graph {
            let mutated = mutate(&mut rng, &text);
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
            match outcome {
                Ok(had_diagnostics) => diagnosed += usize::from(had_diagnostics),
                Err(_) => panic!("{} round {round} panicked on:\n{mutated}", path.display()),
            }
        }
    }
    // Most mutations break something; if none were diagnosed the mutator is broken.
    assert!(
        diagnosed > per_graph * graphs.len() / 2,
        "only {diagnosed} mutations were diagnosed"
    );
}

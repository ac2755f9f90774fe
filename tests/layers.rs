//! The source tree reads as the pipeline: each top-level module imports only modules
//! of the layers below its own, and no source file imports another that imports it
//! back, however far round. A module's root file (`mod.rs`, `lib.rs`, `main.rs`) may
//! name its own parts (declare, re-export, hold them); every other edge counts.
//!
//! The imports are read from the text: `use` trees and `crate::`, `super::` and
//! `self::` paths in code (comments and `#[cfg(test)] mod tests` left out), each
//! resolved to the file of the deepest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules, lowest layer first. A module may import modules
/// of lower layers only.
const LAYERS: &[&[&str]] = &[
    // Helpers every stage uses.
    &["fxhash", "source", "suggestion", "json_schema", "value"],
    // The graph as written, and what is said about it.
    &["spec", "diagnostic"],
    &["region", "topology"],
    // load -> check -> compile.
    &["load", "jinja"],
    &["check", "render"],
    &["graph"],
    // The pipeline driven end to end; the tool port and the checkpoint stores.
    &["pipeline", "tool", "store"],
    // The model port (it offers tools).
    &["llm"],
    // The interpreter.
    &["run"],
    // What consumes a run: traces, and the MCP client behind the tool port.
    &["telemetry", "mcp"],
    // `switchyard test`'s runs, whose scripted tools hold calls to what the MCP client
    // would (a server's listing, a tool's schema).
    &["testing"],
    // The adapters: many clients at once, an editor's language server, then HTTP.
    &["host", "lsp"],
    &["serve"],
];

/// A source file's module path: `["run", "runner"]` for `src/run/runner.rs`.
type Module = Vec<String>;

struct Tree {
    /// Every module of the crate, and its file.
    files: BTreeMap<Module, PathBuf>,
}

impl Tree {
    fn read(src: &Path, root: &str, under: Option<&str>) -> Tree {
        let mut files = BTreeMap::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|l| l == "mod") {
                    module.pop();
                }
                if module == [root] {
                    module.clear();
                } else if module.len() == 1 && (module[0] == "lib" || module[0] == "main") {
                    continue;
                }
                let ours = match under {
                    Some(top) => module.is_empty() || module[0] == top,
                    None => module.first().is_none_or(|m| m != "cli"),
                };
                if ours {
                    files.insert(module, path);
                }
            }
        }
        Tree { files }
    }

    /// The deepest module `path` names.
    fn resolve(&self, path: &[String]) -> Module {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| self.files.contains_key(m))
            .unwrap_or_default()
    }

    fn is_root_file(&self, module: &Module) -> bool {
        let file = &self.files[module];
        let name = file.file_name().unwrap().to_string_lossy();
        name == "mod.rs" || name == "lib.rs" || name == "main.rs"
    }

    /// Every file's imports: module -> the modules it names.
    fn imports(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut out = BTreeMap::new();
        for (module, file) in &self.files {
            let text = code_of(&std::fs::read_to_string(file).unwrap());
            // `super` of a root file is its parent's parent.
            let here: Module = if self.is_root_file(module) {
                module.clone()
            } else {
                module[..module.len() - 1].to_vec()
            };
            let children: BTreeSet<String> = self
                .files
                .keys()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .map(|m| m.last().unwrap().clone())
                .collect();
            let mut named = BTreeSet::new();
            for path in paths_in(&text) {
                let Some(absolute) = absolute(&path, module, &here, &children) else {
                    continue;
                };
                let target = self.resolve(&absolute);
                if target != *module {
                    named.insert(target);
                }
            }
            out.insert(module.clone(), named);
        }
        out
    }
}

/// The code of a file: comments, strings and its test module left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            // A char literal, not a lifetime: `'x'` or `'\n'`.
            '\'' if {
                let mut ahead = chars.clone();
                match ahead.next() {
                    Some('\\') => true,
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                }
            } =>
            {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '\'' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Paths as written: each `use` tree's leaves, and every `a::b::c` in other code.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let tokens = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            i += 1;
            use_tree(&tokens, &mut i, Vec::new(), &mut out);
            continue;
        }
        // A path in code starts at a name not preceded by `::`.
        if is_name(&tokens[i])
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens.get(j + 1).is_some_and(|t| is_name(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            out.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Reads one `use` tree from `tokens[*i]` on, with `prefix` before it.
fn use_tree(tokens: &[String], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    while *i < tokens.len() {
        let t = &tokens[*i];
        *i += 1;
        match t.as_str() {
            "::" => {}
            "{" => {
                loop {
                    use_tree(tokens, i, path.clone(), out);
                    match tokens.get(*i).map(String::as_str) {
                        Some(",") => *i += 1,
                        Some("}") => {
                            *i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*i).is_some_and(|t| t == "}") {
                        *i += 1;
                        break;
                    }
                }
                return;
            }
            "as" => {
                *i += 1;
                out.push(path);
                return;
            }
            "," | "}" | ";" => {
                *i -= 1;
                if t == ";" {
                    *i += 1;
                }
                out.push(path);
                return;
            }
            _ if is_name(t) || t == "*" => path.push(t.clone()),
            _ => {
                out.push(path);
                return;
            }
        }
    }
    out.push(path);
}

fn is_name(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut name = c.to_string();
            while let Some(&n) = chars.peek() {
                if n.is_alphanumeric() || n == '_' {
                    name.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(name);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push("::".into());
        } else if "{},;*".contains(c) {
            out.push(c.to_string());
        } else if !c.is_whitespace() {
            out.push(" ".into());
        }
    }
    out
}

/// `path`, written in `module`, from the crate's root; none for a path outside the
/// crate (another crate, a local name).
fn absolute(
    path: &[String],
    module: &Module,
    here: &Module,
    children: &BTreeSet<String>,
) -> Option<Module> {
    let first = path.first()?;
    let mut out: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.clone(),
        "super" => here.clone(),
        name if children.contains(name) => {
            let mut m = module.clone();
            m.push(name.to_string());
            return Some(m.into_iter().chain(path[1..].iter().cloned()).collect());
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    if first == "super" {
        while rest.first().is_some_and(|s| s == "super") {
            out.pop();
            rest = &rest[1..];
        }
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "the crate root".into()
    } else {
        m.join("/")
    }
}

/// Every circle of imports, each as a path `a -> b -> a`; edges from a module's root
/// file to its own parts do not count.
fn circles(imports: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let edges = |m: &Module| -> Vec<Module> {
        imports[m]
            .iter()
            .filter(|t| !(t.len() > m.len() && t.starts_with(m)))
            .filter(|t| imports.contains_key(*t))
            .cloned()
            .collect()
    };
    let mut found = BTreeMap::new();
    for start in imports.keys() {
        // The shortest way back to `start`, breadth first.
        let mut seen: BTreeMap<Module, Module> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        'search: while let Some(m) = queue.pop_front() {
            for t in edges(&m) {
                if t == *start {
                    let mut way = vec![name(start)];
                    let mut at = m.clone();
                    let mut back = vec![name(&at)];
                    while at != *start {
                        at = seen[&at].clone();
                        back.push(name(&at));
                    }
                    back.pop();
                    back.reverse();
                    way.extend(back);
                    way.push(name(start));
                    // The same circle from another start is the same circle.
                    let mut key = way[..way.len() - 1].to_vec();
                    key.sort();
                    found.entry(key).or_insert_with(|| way.join(" -> "));
                    break 'search;
                }
                if !seen.contains_key(&t) && t != *start {
                    seen.insert(t.clone(), m.clone());
                    queue.push_back(t);
                }
            }
        }
    }
    found.into_values().collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_top_level_module_imports_only_lower_layers() {
    let tree = Tree::read(&src(), "lib", None);
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut wrong = Vec::new();
    for top in tree.files.keys().filter(|m| m.len() == 1) {
        if layer(&top[0]).is_none() {
            wrong.push(format!("`{}` is in no layer: add it to LAYERS", top[0]));
        }
    }
    for (module, named) in tree.imports() {
        let Some(from) = module.first() else {
            continue;
        };
        for target in named {
            let Some(to) = target.first() else {
                wrong.push(format!(
                    "{} imports from the crate root: name the item's own module",
                    name(&module)
                ));
                continue;
            };
            if to == from {
                continue;
            }
            if let (Some(a), Some(b)) = (layer(from), layer(to))
                && b >= a
            {
                wrong.push(format!(
                    "{} imports {}: `{from}` is not above `{to}`",
                    name(&module),
                    name(&target)
                ));
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
}

#[test]
fn no_source_file_imports_itself_round_a_circle() {
    let library = Tree::read(&src(), "lib", None);
    let binary = Tree::read(&src(), "main", Some("cli"));
    let mut found = circles(&library.imports());
    found.extend(circles(&binary.imports()));
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn the_reader_of_imports_finds_what_a_file_names() {
    // The checks above are only as good as this reading: a circle and an upward
    // import written every way a file may write them are found.
    let code = code_of(
        "use super::{a::B, c};\nuse crate::run::{self, Runner as R};\n// use crate::x;\nfn f() { crate::graph::compile(\"crate::y\"); let c = 'a'; }\n",
    );
    let paths: Vec<String> = paths_in(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "super::a::B",
            "super::c",
            "crate::run::self",
            "crate::run::Runner",
            "crate::graph::compile",
        ]
    );
    let imports: BTreeMap<Module, BTreeSet<Module>> = [
        (vec!["a".into()], BTreeSet::from([vec!["b".into()]])),
        (vec!["b".into()], BTreeSet::from([vec!["c".into()]])),
        (vec!["c".into()], BTreeSet::from([vec!["a".into()]])),
        (
            vec!["d".into()],
            BTreeSet::from([vec!["d".into(), "e".into()]]),
        ),
        (
            vec!["d".into(), "e".into()],
            BTreeSet::from([vec!["d".into()]]),
        ),
    ]
    .into();
    assert_eq!(circles(&imports), ["a -> b -> c -> a"]);
}

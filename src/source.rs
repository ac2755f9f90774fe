//! The files a graph is made of: the graph file itself and the prompt and schema files
//! it names. Diagnostics point into any of them by [`FileId`].

use codespan_reporting::files::{Files, SimpleFiles};
use std::io::Read;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

/// Index of a file in [`Sources`].
pub(crate) type FileId = usize;

/// Every source text read while loading and checking, kept so diagnostics can quote it.
#[derive(Default)]
pub struct Sources {
    files: SimpleFiles<String, String>,
    names: Vec<String>,
}

impl Sources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file under the name diagnostics will show.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let name = name.into();
        self.names.push(name.clone());
        self.files.add(name, text.into())
    }

    /// The names of every file read, in order (the graph file first): what a graph
    /// depends on, for a watcher.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn name(&self, id: FileId) -> &str {
        self.files
            .get(id)
            .map(|f| f.name().as_str())
            .unwrap_or("<unknown>")
    }

    pub fn text(&self, id: FileId) -> &str {
        self.files
            .get(id)
            .map(|f| f.source().as_str())
            .unwrap_or("")
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, id: FileId, offset: usize) -> (usize, usize) {
        let line = self.files.line_index(id, offset).unwrap_or(0);
        let col = self.files.column_number(id, line, offset).unwrap_or(1);
        (line + 1, col)
    }

    pub(crate) fn files(&self) -> &SimpleFiles<String, String> {
        &self.files
    }

    /// Clamps a span to the file so a stale or synthetic span never breaks rendering.
    pub(crate) fn clamp(&self, id: FileId, span: Range<usize>) -> Range<usize> {
        let len = self.text(id).len();
        let start = span.start.min(len);
        let end = span.end.clamp(start, len);
        start..end
    }
}

/// The largest prompt or schema file read, in bytes.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a file a graph names was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileProblem {
    #[error("absolute paths are not taken: a graph's files live under its root")]
    Absolute,
    #[error("the path goes above the graph's root through `..`")]
    Escapes,
    #[error("the path leads outside the graph's root (to `{0}`) through a symbolic link")]
    Outside(PathBuf),
    #[error("it is not a regular file")]
    NotAFile,
    #[error("it is in `{0}`, the kernel's view of the system, not a file of a graph")]
    Kernel(&'static str),
    #[error("it has {0} bytes; at most {MAX_FILE_BYTES} are read")]
    TooLarge(u64),
    #[error("{}", .0.to_string().to_lowercase())]
    Io(#[from] std::io::Error),
}

/// Reads a prompt or schema file a graph names (`written`, relative to `root`): a
/// regular file under the root, of at most [`MAX_FILE_BYTES`]. With `outside`, a path
/// may lead anywhere (`[graph] allow_outside_root = true`); the file must still be a
/// regular one of that size, so a device or a pipe never hangs or floods the checker.
pub(crate) fn read_graph_file(
    root: &Path,
    written: &str,
    outside: bool,
) -> Result<(PathBuf, String), FileProblem> {
    let full = root.join(written);
    if !outside {
        if Path::new(written).is_absolute() {
            return Err(FileProblem::Absolute);
        }
        // Lexically first: `a/../../b` leaves the root whatever exists on disk.
        let mut depth = 0i64;
        for c in Path::new(written).components() {
            match c {
                Component::ParentDir => depth -= 1,
                Component::Normal(_) => depth += 1,
                _ => {}
            }
            if depth < 0 {
                return Err(FileProblem::Escapes);
            }
        }
    }
    let meta = std::fs::metadata(&full)?;
    let real = std::fs::canonicalize(&full)?;
    if !outside {
        let base = std::fs::canonicalize(root)?;
        if !real.starts_with(&base) {
            return Err(FileProblem::Outside(real));
        }
    }
    // Files there look regular and empty, and hold secrets (`/proc/self/environ`)
    // that an error would quote: never read, whatever the opt-in.
    if let Some(kernel) = ["/proc", "/sys", "/dev"]
        .into_iter()
        .find(|k| real.starts_with(k))
    {
        return Err(FileProblem::Kernel(kernel));
    }
    if !meta.is_file() {
        return Err(FileProblem::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileProblem::TooLarge(meta.len()));
    }
    let mut text = String::new();
    std::fs::File::open(&full)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(FileProblem::TooLarge(text.len() as u64));
    }
    Ok((full, text))
}

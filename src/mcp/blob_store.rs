//! Binary tool results (images, audio, blob resources) stored by content hash, so that
//! state holds a small reference and never the bytes (seed 001).

use super::error::McpError;
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A directory of blobs, each in `<dir>/<sha256 hex>.<ext>`. Writing the same bytes
/// twice keeps one file.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    /// A store in `dir`, created on the first write.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BlobStore { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `bytes` and returns the reference that goes into state:
    /// `{ "blob": "sha256:<hex>", "mime_type": ..., "bytes": <length> }`.
    pub fn put(&self, bytes: &[u8], mime_type: &str) -> Result<Json, McpError> {
        let hex = hex(&Sha256::digest(bytes));
        let path = self.path_of(&hex, mime_type);
        if !path.exists() {
            self.write(&path, bytes).map_err(|source| McpError::Blob {
                dir: self.dir.clone(),
                source,
            })?;
        }
        Ok(json!({
            "blob": format!("sha256:{hex}"),
            "mime_type": mime_type,
            "bytes": bytes.len(),
        }))
    }

    /// The bytes a reference (`sha256:<hex>`, as `put` returns it) names, and their MIME
    /// type (from the file's extension); none when the store does not have them.
    pub fn get(&self, reference: &str) -> Option<(Vec<u8>, &'static str)> {
        let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
        // Only a hash names a file: nothing else can reach outside the directory.
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let hex = hex.to_ascii_lowercase();
        // The file is `<hash>.<extension>`, one of the few there are: tried by name
        // rather than by listing a directory of every blob.
        let exts = TYPES.iter().map(|(ext, ..)| *ext).chain(["bin"]);
        exts.into_iter().find_map(|ext| {
            let bytes = std::fs::read(self.dir.join(format!("{hex}.{ext}"))).ok()?;
            Some((bytes, mime_of(ext)))
        })
    }

    /// Where the blob with this hash and MIME type lives.
    pub fn path_of(&self, sha256_hex: &str, mime_type: &str) -> PathBuf {
        self.dir
            .join(format!("{sha256_hex}.{}", extension(mime_type)))
    }

    /// Writes through a temporary file and a rename, so a reader never sees half a blob.
    fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    }
}

/// The MIME types blobs are kept under their own extension, each with the names it
/// is also sent as: one table for both directions.
const TYPES: &[(&str, &str, &[&str])] = &[
    ("png", "image/png", &[]),
    ("jpg", "image/jpeg", &["image/jpg"]),
    ("gif", "image/gif", &[]),
    ("webp", "image/webp", &[]),
    ("svg", "image/svg+xml", &[]),
    ("bmp", "image/bmp", &[]),
    ("wav", "audio/wav", &["audio/x-wav", "audio/wave"]),
    ("mp3", "audio/mpeg", &["audio/mp3"]),
    ("ogg", "audio/ogg", &[]),
    ("flac", "audio/flac", &[]),
    ("pdf", "application/pdf", &[]),
    ("gz", "application/gzip", &[]),
    ("zip", "application/zip", &[]),
    ("json", "application/json", &[]),
    ("txt", "text/plain", &[]),
];

/// The file extension for a MIME type; `bin` when it is not a common one.
pub fn extension(mime_type: &str) -> &'static str {
    let essence = mime_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    TYPES
        .iter()
        .find(|(_, mime, also)| *mime == essence || also.contains(&essence.as_str()))
        .map_or("bin", |(ext, ..)| ext)
}

/// The MIME type of a blob file's extension (the inverse of [`extension`]).
fn mime_of(extension: &str) -> &'static str {
    TYPES
        .iter()
        .find(|(ext, ..)| *ext == extension)
        .map_or("application/octet-stream", |(_, mime, _)| mime)
}

fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_one_file_and_the_reference_names_the_hash() {
        let dir = std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id()));
        let store = BlobStore::new(&dir);
        let a = store.put(b"hello", "text/plain").unwrap();
        let b = store.put(b"hello", "text/plain").unwrap();
        let hash = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        assert_eq!(
            a,
            json!({ "blob": format!("sha256:{hash}"), "mime_type": "text/plain", "bytes": 5 })
        );
        assert_eq!(a, b);
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files, vec![format!("{hash}.txt")]);
        // Read back by its reference; what is not a hash names nothing.
        assert_eq!(
            store.get(&format!("sha256:{hash}")),
            Some((b"hello".to_vec(), "text/plain"))
        );
        assert_eq!(store.get(&format!("sha256:{}", "0".repeat(64))), None);
        assert_eq!(store.get("sha256:../../etc/passwd"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn extensions_of_parameterised_and_unknown_types() {
        assert_eq!(extension("image/PNG"), "png");
        assert_eq!(extension("audio/wav; codecs=1"), "wav");
        assert_eq!(extension("application/x-thing"), "bin");
    }
}

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

/// The file extension for a MIME type; `bin` when it is not a common one.
pub fn extension(mime_type: &str) -> &'static str {
    let essence = mime_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/gzip" => "gz",
        "application/zip" => "zip",
        "application/json" => "json",
        "text/plain" => "txt",
        _ => "bin",
    }
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
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn extensions_of_parameterised_and_unknown_types() {
        assert_eq!(extension("image/PNG"), "png");
        assert_eq!(extension("audio/wav; codecs=1"), "wav");
        assert_eq!(extension("application/x-thing"), "bin");
    }
}

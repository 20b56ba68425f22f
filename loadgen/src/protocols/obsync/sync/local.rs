//! The device's side of the disk and the client conventions: file ids, safe vault-relative
//! paths, the plaintext manifest, 1 MiB chunk hashing, and the sorted vault walk.

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use protocol::Route;
use protocol::limits::CLIENT_CHUNK_BYTES;
use protocol::wire::{Change, ClientManifest};
use sha2::{Digest, Sha256};

use crate::error::LoadError;

/// `file_id` of a path at creation: the first 16 bytes of SHA-256("vaultbench/file\n" + path).
pub fn file_id_for(path: &str) -> String {
    let d = Sha256::digest(format!("vaultbench/file\n{path}").as_bytes());
    hex::encode(&d[..16])
}

pub(crate) use crate::transfer::safe_rel_path;

pub(super) fn manifest_bytes(path: &str, is_dir: bool, size: u64, sha256: &str) -> Vec<u8> {
    serde_json::to_vec(&ClientManifest {
        path: path.to_owned(),
        kind: if is_dir { "dir" } else { "file" }.to_owned(),
        size,
        sha256: sha256.to_owned(),
    })
    .expect("plain struct serialises")
}

/// Decodes a change's manifest (base64 of the JSON [`ClientManifest`]).
pub fn decode_manifest(change: &Change) -> Result<ClientManifest, LoadError> {
    let bad = |d: String| LoadError::BadAnswer {
        route: Route::Changes.label().into(),
        detail: format!("seq {}: {d}", change.seq),
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&change.manifest_ct)
        .map_err(|e| bad(format!("manifest_ct is not base64: {e}")))?;
    serde_json::from_slice(&raw)
        .map_err(|e| bad(format!("manifest is not a vaultbench manifest: {e}")))
}

/// Hashes a file in 1 MiB cuts: (sids in order, whole-file SHA-256, size). Blocking.
pub(super) fn hash_file(path: &Path) -> std::io::Result<(Vec<String>, String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; CLIENT_CHUNK_BYTES];
    let mut whole = Sha256::new();
    let mut sids = Vec::new();
    let mut size = 0u64;
    loop {
        let n = read_full(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        whole.update(&buf[..n]);
        sids.push(hex::encode(Sha256::digest(&buf[..n])));
        size += n as u64;
        if n < buf.len() {
            break;
        }
    }
    Ok((sids, hex::encode(whole.finalize()), size))
}

pub(super) fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

pub(super) async fn blocking<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, LoadError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| LoadError::io(path, e)),
        Err(e) => Err(LoadError::io(path, std::io::Error::other(e.to_string()))),
    }
}

/// One entry of a vault walk.
pub(super) enum Entry {
    Dir(String),
    File(PathBuf, String),
}

/// Walks `root` depth-first in sorted order, one directory listing in memory at a time per
/// level, skipping symlinks and vaultbench's own temp files.
pub(super) struct Walk {
    stack: Vec<WalkLevel>,
}

/// (absolute dir, its vault-relative path, the rest of its sorted listing)
type WalkLevel = (PathBuf, String, std::vec::IntoIter<(String, bool)>);

impl Walk {
    pub(super) fn new(root: &Path) -> Result<Walk, LoadError> {
        let list = list_dir(root)?;
        Ok(Walk {
            stack: vec![(root.to_owned(), String::new(), list.into_iter())],
        })
    }

    pub(super) fn next_entry(&mut self) -> Result<Option<Entry>, LoadError> {
        loop {
            let Some((dir, rel, it)) = self.stack.last_mut() else {
                return Ok(None);
            };
            let Some((name, is_dir)) = it.next() else {
                self.stack.pop();
                continue;
            };
            let abs = dir.join(&name);
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if is_dir {
                let list = list_dir(&abs)?;
                self.stack.push((abs, r.clone(), list.into_iter()));
                return Ok(Some(Entry::Dir(r)));
            }
            return Ok(Some(Entry::File(abs, r)));
        }
    }
}

/// A download's temp file beside its destination, removed when dropped unless
/// [`TempFile::persist`] renamed it into place: an error, a panic in a sibling task or a
/// cancelled pull (its task dropped mid-download) leaves no half-written file in the vault.
pub(super) struct TempFile {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl TempFile {
    /// Creates a new temp file for `dest` in `parent` (`.vbtmp-<device>-<n>-<name>`, made
    /// with `O_EXCL`, so two downloads of one path never share a file).
    pub(super) fn create(parent: &Path, device: usize, dest_name: &str) -> Result<Self, LoadError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!(".vbtmp-{device}-{n}-{dest_name}"));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => {
                    return Ok(TempFile {
                        path,
                        file: Some(f),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(LoadError::io(&path, e)),
            }
        }
    }

    pub(super) fn write_all(&mut self, bytes: &[u8]) -> Result<(), LoadError> {
        use std::io::Write as _;
        match self.file.as_mut() {
            Some(f) => f.write_all(bytes).map_err(|e| LoadError::io(&self.path, e)),
            None => Err(LoadError::io(
                &self.path,
                std::io::Error::other("temp file already closed"),
            )),
        }
    }

    /// fsyncs the file and renames it to `dest`.
    pub(super) fn persist(mut self, dest: &Path) -> Result<(), LoadError> {
        if let Some(f) = self.file.take() {
            f.sync_all().map_err(|e| LoadError::io(&self.path, e))?;
        }
        std::fs::rename(&self.path, dest).map_err(|e| LoadError::io(dest, e))?;
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.file.take();
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub(super) fn is_temp_name(name: &str) -> bool {
    name.starts_with(".vbtmp-")
}

pub(super) fn list_dir(dir: &Path) -> Result<Vec<(String, bool)>, LoadError> {
    let rd = std::fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| LoadError::io(dir, e))?;
        let ft = e.file_type().map_err(|err| LoadError::io(e.path(), err))?;
        let Ok(name) = e.file_name().into_string() else {
            return Err(LoadError::Invalid {
                what: e.path().display().to_string(),
                reason: "file name is not UTF-8".into(),
            });
        };
        if is_temp_name(&name) || ft.is_symlink() {
            continue;
        }
        if ft.is_dir() || ft.is_file() {
            out.push((name, ft.is_dir()));
        }
    }
    out.sort();
    Ok(out)
}

pub(super) fn check_dir(dir: &Path) -> Result<(), LoadError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(LoadError::Invalid {
            what: dir.display().to_string(),
            reason: "is not a directory".into(),
        }),
        Err(e) => Err(LoadError::io(dir, e)),
    }
}

pub(super) fn local_matches(abs: &Path, size: u64, sha: &str) -> bool {
    match std::fs::metadata(abs) {
        Ok(m) if m.is_file() && m.len() == size => {
            hash_file(abs).map(|(_, h, _)| h == sha).unwrap_or(false)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ids_are_16_bytes_and_path_bound() {
        let a = file_id_for("notes/a.md");
        assert_eq!(a.len(), 32);
        assert_ne!(a, file_id_for("notes/b.md"));
    }

    #[test]
    fn unsafe_paths_refused() {
        for p in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "a//b",
            "./a",
            "a\\b",
            "a/\0b",
            "../x",
            "a/",
        ] {
            assert!(safe_rel_path(p).is_err(), "{p:?}");
        }
        assert!(safe_rel_path("a/b c.md").is_ok());
    }

    #[test]
    fn hash_file_cuts_at_one_mib() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..CLIENT_CHUNK_BYTES + 10)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let (sids, sha, size) = hash_file(&p).unwrap();
        assert_eq!(size, data.len() as u64);
        assert_eq!(sids.len(), 2);
        assert_eq!(
            sids[1],
            hex::encode(Sha256::digest(&data[CLIENT_CHUNK_BYTES..]))
        );
        assert_eq!(sha, hex::encode(Sha256::digest(&data)));
        std::fs::write(&p, b"").unwrap();
        assert_eq!(hash_file(&p).unwrap().0.len(), 0);
    }

    #[test]
    fn walk_is_sorted_and_skips_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/x.md"), b"x").unwrap();
        std::fs::write(dir.path().join("a.md"), b"a").unwrap();
        std::fs::write(dir.path().join(".vbtmp-0-a.md"), b"t").unwrap();
        let mut w = Walk::new(dir.path()).unwrap();
        let mut seen = Vec::new();
        while let Some(e) = w.next_entry().unwrap() {
            seen.push(match e {
                Entry::Dir(r) => format!("d:{r}"),
                Entry::File(_, r) => format!("f:{r}"),
            });
        }
        assert_eq!(seen, ["f:a.md", "d:b", "d:b/c", "f:b/c/x.md"]);
    }
}

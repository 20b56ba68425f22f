//! The content-addressed chunk store: `chunks/ab/cd/<sid>` under the data dir.
//!
//! A PUT streams the body into `chunks/.tmp/` while hashing it; only once the request is
//! authenticated and the hash equals the sid is the temp file fsynced, renamed into the
//! two-level hex fan-out and the directory fsynced (protocol page, "Storage shape"). Paths are
//! built only from a sid that passed [`protocol::version::is_sid`], so no request names a path
//! outside the store.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::metrics::{FsyncKind, Metrics};

/// Why a chunk could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("no space left storing chunk {sid}")]
    VolumeFull { sid: String },
    #[error("reading the request body: {0}")]
    Body(String),
    #[error("chunk store {path}: {source}")]
    Io { path: String, source: io::Error },
}

fn is_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) || e.raw_os_error() == Some(libc::ENOSPC)
}

/// A streamed body waiting in `chunks/.tmp/` for the handler's verdict. Dropping it removes
/// the file.
#[derive(Debug)]
pub struct TempChunk {
    path: PathBuf,
    pub sha256_hex: String,
    pub len: u64,
    committed: bool,
}

impl Drop for TempChunk {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether a PUT stored a new chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    New,
    AlreadyPresent,
}

#[derive(Debug)]
pub struct ChunkStore {
    root: PathBuf,
    tmp: PathBuf,
    next_tmp: AtomicU64,
    metrics: Arc<Metrics>,
    /// One lock per first sid byte, held across the exists check, fsyncs and rename: two
    /// concurrent PUTs of one sid (duplicate note bodies) then store it once and count it
    /// once, so the fsync and chunk counters stay exact for a given workload.
    stripes: Vec<tokio::sync::Mutex<()>>,
}

impl ChunkStore {
    /// Creates `root` and its temp dir, removing temp files a previous run left behind.
    pub fn open(root: &Path, metrics: Arc<Metrics>) -> io::Result<ChunkStore> {
        let tmp = root.join(".tmp");
        std::fs::create_dir_all(&tmp)?;
        for entry in std::fs::read_dir(&tmp)? {
            let _ = std::fs::remove_file(entry?.path());
        }
        Ok(ChunkStore {
            root: root.to_path_buf(),
            tmp,
            next_tmp: AtomicU64::new(0),
            metrics,
            stripes: (0..256).map(|_| tokio::sync::Mutex::new(())).collect(),
        })
    }

    /// `root/ab/cd/<sid>`. The caller has checked `is_sid(sid)`.
    pub fn path_of(&self, sid: &str) -> PathBuf {
        debug_assert!(protocol::version::is_sid(sid));
        self.root.join(&sid[0..2]).join(&sid[2..4]).join(sid)
    }

    pub fn exists(&self, sid: &str) -> bool {
        protocol::version::is_sid(sid) && self.path_of(sid).is_file()
    }

    /// Streams `body` into a temp file while hashing it, refusing more than `limit` bytes.
    pub async fn receive<B>(&self, mut body: B, limit: usize) -> Result<TempChunk, ChunkError>
    where
        B: hyper::body::Body<Data = bytes::Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let n = self.next_tmp.fetch_add(1, Ordering::Relaxed);
        let path = self.tmp.join(format!("{}-{n}", std::process::id()));
        // ENOSPC/EDQUOT anywhere (create, a write, the buffered writer's final flush, which
        // is the only write of a chunk under 256 KiB) is `507 volume_full`, never a 500.
        let io_err = |source: io::Error| {
            if is_full(&source) {
                self.metrics.low_space.store(true, Ordering::SeqCst);
                ChunkError::VolumeFull { sid: String::new() }
            } else {
                ChunkError::Io {
                    path: path.display().to_string(),
                    source,
                }
            }
        };
        let file = tokio::fs::File::create(&path).await.map_err(io_err)?;
        let mut temp = TempChunk {
            path: path.clone(),
            sha256_hex: String::new(),
            len: 0,
            committed: false,
        };
        let mut file = tokio::io::BufWriter::with_capacity(256 * 1024, file);
        let mut hasher = Sha256::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ChunkError::Body(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            temp.len += data.len() as u64;
            if temp.len > limit as u64 {
                return Err(ChunkError::TooLarge { limit });
            }
            hasher.update(&data);
            file.write_all(&data).await.map_err(io_err)?;
        }
        file.flush().await.map_err(io_err)?;
        temp.sha256_hex = hex::encode(hasher.finalize());
        Ok(temp)
    }

    /// Makes a verified temp chunk durable under its sid: fsync, rename, directory fsync.
    pub async fn commit(&self, mut temp: TempChunk, sid: &str) -> Result<Stored, ChunkError> {
        let dest = self.path_of(sid);
        let stripe = usize::from(u8::from_str_radix(&sid[..2], 16).unwrap_or(0));
        let _guard = self.stripes[stripe].lock().await;
        if dest.is_file() {
            return Ok(Stored::AlreadyPresent);
        }
        let src = temp.path.clone();
        let root = self.root.clone();
        let metrics = self.metrics.clone();
        let sid_owned = sid.to_owned();
        let len = temp.len;
        let res =
            tokio::task::spawn_blocking(move || commit_blocking(&root, &src, &dest, &metrics))
                .await
                .map_err(|e| ChunkError::Io {
                    path: sid_owned.clone(),
                    source: io::Error::other(e.to_string()),
                })?;
        match res {
            Ok(()) => {
                temp.committed = true;
                Metrics::add(&self.metrics.chunks_stored, 1);
                Metrics::add(&self.metrics.chunk_bytes_stored, len);
                Ok(Stored::New)
            }
            Err(e) if is_full(&e) => {
                self.metrics.low_space.store(true, Ordering::SeqCst);
                Err(ChunkError::VolumeFull { sid: sid_owned })
            }
            Err(e) => Err(ChunkError::Io {
                path: self.path_of(&sid_owned).display().to_string(),
                source: e,
            }),
        }
    }

    /// The whole chunk, or `None` when the store does not have it.
    pub async fn read(&self, sid: &str) -> Result<Option<bytes::Bytes>, ChunkError> {
        if !protocol::version::is_sid(sid) {
            return Ok(None);
        }
        let path = self.path_of(sid);
        match tokio::fs::read(&path).await {
            Ok(b) => Ok(Some(bytes::Bytes::from(b))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ChunkError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }
}

fn fsync_dir(dir: &Path, metrics: &Metrics) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    metrics.fsync(FsyncKind::ChunkDir);
    Ok(())
}

/// Creates `dir` if needed; when it was new, fsyncs its parent so the new entry is durable.
fn ensure_dir(dir: &Path, metrics: &Metrics) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => fsync_dir(dir.parent().unwrap_or(dir), metrics),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Not `durable::write_atomic`: the body is already on disk (streamed there while hashed), and
/// each fsync is counted for `/metrics`.
fn commit_blocking(root: &Path, src: &Path, dest: &Path, metrics: &Metrics) -> io::Result<()> {
    std::fs::File::open(src)?.sync_all()?;
    metrics.fsync(FsyncKind::ChunkFile);
    let leaf = dest.parent().unwrap_or(root);
    if let Some(mid) = leaf.parent() {
        ensure_dir(mid, metrics)?;
    }
    ensure_dir(leaf, metrics)?;
    std::fs::rename(src, dest)?;
    fsync_dir(leaf, metrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    #[tokio::test(flavor = "current_thread")]
    async fn put_then_read_back_with_fsyncs_counted() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::new());
        let store = ChunkStore::open(&dir.path().join("chunks"), metrics.clone()).unwrap();
        let body = bytes::Bytes::from_static(b"hello chunk");
        let sid = protocol::sha256_hex(&body);
        let temp = store.receive(Full::new(body.clone()), 1024).await.unwrap();
        assert_eq!(temp.sha256_hex, sid);
        assert_eq!(store.commit(temp, &sid).await.unwrap(), Stored::New);
        assert!(store.exists(&sid));
        assert_eq!(store.read(&sid).await.unwrap().unwrap(), body);
        assert!(
            store
                .path_of(&sid)
                .starts_with(dir.path().join("chunks").join(&sid[..2]).join(&sid[2..4]))
        );
        assert_eq!(metrics.fsync_chunk_file.load(Ordering::Relaxed), 1);
        // New `ab` and `ab/cd` dirs: their parents, then the leaf after the rename.
        assert_eq!(metrics.fsync_chunk_dir.load(Ordering::Relaxed), 3);
        let temp = store.receive(Full::new(body), 1024).await.unwrap();
        assert_eq!(
            store.commit(temp, &sid).await.unwrap(),
            Stored::AlreadyPresent
        );
        assert_eq!(metrics.chunks_stored.load(Ordering::Relaxed), 1);
        // Nothing is left in the temp dir.
        assert_eq!(
            std::fs::read_dir(dir.path().join("chunks/.tmp"))
                .unwrap()
                .count(),
            0
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_of_one_sid_store_and_count_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::new());
        let store =
            Arc::new(ChunkStore::open(&dir.path().join("chunks"), metrics.clone()).unwrap());
        let body = bytes::Bytes::from_static(b"duplicate body");
        let sid = protocol::sha256_hex(&body);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (store, body, sid) = (store.clone(), body.clone(), sid.clone());
            tasks.push(tokio::spawn(async move {
                let temp = store.receive(Full::new(body), 1024).await.unwrap();
                store.commit(temp, &sid).await.unwrap()
            }));
        }
        let mut new = 0;
        for t in tasks {
            if t.await.unwrap() == Stored::New {
                new += 1;
            }
        }
        assert_eq!(new, 1);
        assert_eq!(metrics.chunks_stored.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.fsync_chunk_file.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn oversized_body_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(&dir.path().join("chunks"), Arc::new(Metrics::new())).unwrap();
        let err = store
            .receive(Full::new(bytes::Bytes::from(vec![0u8; 100])), 99)
            .await
            .unwrap_err();
        assert!(matches!(err, ChunkError::TooLarge { limit: 99 }));
        assert_eq!(
            std::fs::read_dir(dir.path().join("chunks/.tmp"))
                .unwrap()
                .count(),
            0
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reads_of_bad_or_unknown_sids_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(&dir.path().join("chunks"), Arc::new(Metrics::new())).unwrap();
        assert!(store.read("../../etc/passwd").await.unwrap().is_none());
        assert!(store.read(&"ab".repeat(32)).await.unwrap().is_none());
        assert!(!store.exists("../x"));
    }
}

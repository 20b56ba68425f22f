//! An append-only, fsynced log of framed records, written by one dedicated thread.
//!
//! Callers hand a payload to [`Appender::enqueue`] and are answered only once the frame is on
//! disk (written and `fdatasync`ed). Without group commit the thread writes and syncs one
//! record at a time; with it, every record that queued up while the previous sync ran goes out
//! in one write and one sync, and each caller is answered when its batch is durable. The same
//! code serves the journal and the nonce log.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::metrics::{FsyncKind, Metrics};
use crate::store::frame;

/// Which log, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    Journal,
    Nonce,
}

/// Rewrites a log that grew past `max_bytes`: `live` returns the framed records still needed
/// (for the nonce log, those inside the 600 s window). Run by the writer thread between
/// batches, so every record already answered is in the old file and in `live`'s snapshot.
pub struct Compactor {
    pub max_bytes: u64,
    pub live: Box<dyn FnMut() -> Vec<u8> + Send>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

/// Largest number of records one group-commit batch takes, so one batch is bounded in memory.
const MAX_BATCH_RECORDS: usize = 4096;

/// A failed append. The log is then poisoned: its tail may be torn, so no later append is
/// attempted until a restart replays and truncates it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {msg}")]
pub struct AppendError {
    pub path: String,
    pub kind: std::io::ErrorKind,
    pub msg: String,
}

struct Job {
    frame: Vec<u8>,
    /// For journal records that are changes: the seq that becomes visible once durable.
    seq: Option<u64>,
    done: tokio::sync::oneshot::Sender<Result<(), AppendError>>,
}

/// The writing side of one log; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Appender {
    tx: std::sync::Mutex<Option<mpsc::Sender<Job>>>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    poisoned: Arc<AtomicBool>,
    path: PathBuf,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("seq", &self.seq).finish()
    }
}

/// Files that hold secrets (the journal holds device secrets; the nonce log and the setup
/// token are credentials' traces) are readable by the server's user only.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates (truncating) a file only the server's user may read or write.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
}

/// Reads every intact record of the log at `path` (creating it if absent), truncates a torn
/// tail (fsynced), and returns the records and the number of bytes dropped.
pub fn replay(path: &Path) -> std::io::Result<(Vec<Vec<u8>>, u64)> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    // A log made by an older build may be world-readable: the journal holds device secrets.
    file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    let (frames, valid) = frame::decode_all(&buf);
    let records = frames.into_iter().map(<[u8]>::to_vec).collect();
    let dropped = (buf.len() - valid) as u64;
    if dropped > 0 {
        file.set_len(valid as u64)?;
        file.sync_all()?;
    }
    Ok((records, dropped))
}

impl Appender {
    /// Opens `path` for appending and starts its writer thread.
    pub fn open(
        path: &Path,
        kind: LogKind,
        group_commit: bool,
        metrics: Arc<Metrics>,
        durable_seq: Option<tokio::sync::watch::Sender<u64>>,
        compactor: Option<Compactor>,
    ) -> std::io::Result<Appender> {
        Self::open_with(
            path,
            kind,
            group_commit,
            metrics,
            durable_seq,
            compactor,
            None,
        )
    }

    /// [`Appender::open`], optionally as a deliberately broken log: with `unsafe_lazy`, every
    /// record is acknowledged (and its seq shown as durable) the moment it is queued, and the
    /// queued records are written and fsynced only once that long has passed. A crash in that
    /// window loses acknowledged records: the build a crash phase must catch.
    pub fn open_with(
        path: &Path,
        kind: LogKind,
        group_commit: bool,
        metrics: Arc<Metrics>,
        durable_seq: Option<tokio::sync::watch::Sender<u64>>,
        compactor: Option<Compactor>,
        unsafe_lazy: Option<Duration>,
    ) -> std::io::Result<Appender> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(PRIVATE_FILE_MODE)
            .open(path)?;
        let len = file.metadata()?.len();
        let (tx, rx) = mpsc::channel::<Job>();
        let poisoned = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            file,
            kind,
            group_commit,
            metrics,
            durable_seq,
            poisoned: poisoned.clone(),
            path: path.display().to_string(),
            file_path: path.to_path_buf(),
            len,
            alloc_end: 0,
            compactor,
        };
        let mut writer = writer;
        writer.keep_reserve();
        let name = match kind {
            LogKind::Journal => crate::threads::WRITER_THREADS[0],
            LogKind::Nonce => crate::threads::WRITER_THREADS[1],
        };
        let thread =
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || match unsafe_lazy {
                    Some(every) => writer.run_lazy(rx, every),
                    None => writer.run(rx),
                })?;
        Ok(Appender {
            tx: std::sync::Mutex::new(Some(tx)),
            thread: std::sync::Mutex::new(Some(thread)),
            poisoned,
            path: path.to_path_buf(),
        })
    }

    /// Appends one record and returns once it is durable.
    #[cfg(test)]
    pub async fn append(&self, payload: &[u8], seq: Option<u64>) -> Result<(), AppendError> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let job = Job {
            frame: frame::encode(payload),
            seq,
            done,
        };
        self.send(job)?;
        rx.await
            .unwrap_or_else(|_| Err(self.error("the log writer stopped")))
    }

    /// Queues one record without waiting; the returned receiver answers once it is durable.
    /// Queue order is file order, so a caller that queues under a lock fixes the order.
    pub fn enqueue(
        &self,
        payload: &[u8],
        seq: Option<u64>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<(), AppendError>>, AppendError> {
        let (done, rx) = tokio::sync::oneshot::channel();
        self.send(Job {
            frame: frame::encode(payload),
            seq,
            done,
        })?;
        Ok(rx)
    }

    fn send(&self, job: Job) -> Result<(), AppendError> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(self.error("an earlier write failed; restart to replay the log"));
        }
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(tx) => tx
                .send(job)
                .map_err(|_| self.error("the log writer stopped")),
            None => Err(self.error("the log is closed")),
        }
    }

    fn error(&self, msg: &str) -> AppendError {
        AppendError {
            path: self.path.display().to_string(),
            kind: std::io::ErrorKind::Other,
            msg: msg.to_owned(),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Stops taking records, lets the writer finish what is queued, and joins it.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.close();
    }
}

struct Writer {
    file: File,
    kind: LogKind,
    group_commit: bool,
    metrics: Arc<Metrics>,
    durable_seq: Option<tokio::sync::watch::Sender<u64>>,
    poisoned: Arc<AtomicBool>,
    path: String,
    file_path: PathBuf,
    /// Bytes in the file, for the compaction threshold.
    len: u64,
    /// Blocks are preallocated up to here (`fallocate` keeping the size), so appends go on
    /// while the volume is full: reads keep spending nonces, and the journal is not the
    /// first writer to meet ENOSPC.
    alloc_end: u64,
    compactor: Option<Compactor>,
}

/// Bytes preallocated past the end of each log. A nonce record is under 64 bytes and a
/// version record about 1 KiB, so 1 MiB carries thousands of reads through a full volume
/// while writes are answered `507` before they reach the journal.
const LOG_RESERVE_BYTES: u64 = 1024 * 1024;

/// ENOSPC or EDQUOT.
pub(crate) fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Job>) {
        let mut buf = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            if self.group_commit {
                while batch.len() < MAX_BATCH_RECORDS {
                    match rx.try_recv() {
                        Ok(j) => batch.push(j),
                        Err(_) => break,
                    }
                }
            }
            buf.clear();
            for j in &batch {
                buf.extend_from_slice(&j.frame);
            }
            let result = self.write_and_sync(&buf);
            if result.is_ok() {
                self.count(batch.len() as u64);
                if let Some(max) = batch.iter().filter_map(|j| j.seq).max() {
                    self.show_durable(max);
                }
            }
            for j in batch {
                let _ = j.done.send(result.clone());
            }
            if result.is_ok() {
                self.len += buf.len() as u64;
                self.maybe_compact();
                self.keep_reserve();
            }
        }
    }

    /// Shows changes up to `max` as durable to answers and long polls.
    fn show_durable(&self, max: u64) {
        if let Some(w) = &self.durable_seq {
            w.send_if_modified(|v| {
                if max > *v {
                    *v = max;
                    true
                } else {
                    false
                }
            });
            self.metrics
                .head_seq
                .fetch_max(max, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The broken writer of [`Appender::open_with`]: acknowledges at once, writes later.
    fn run_lazy(mut self, rx: mpsc::Receiver<Job>, every: Duration) {
        let mut pending: Vec<u8> = Vec::new();
        let mut records = 0u64;
        let mut since: Option<Instant> = None;
        loop {
            let wait = since.map_or(Duration::from_secs(3600), |t| {
                every.saturating_sub(t.elapsed())
            });
            let closed = match rx.recv_timeout(wait) {
                Ok(j) => {
                    pending.extend_from_slice(&j.frame);
                    records += 1;
                    since.get_or_insert_with(Instant::now);
                    if let Some(seq) = j.seq {
                        self.show_durable(seq);
                    }
                    let _ = j.done.send(Ok(()));
                    false
                }
                Err(mpsc::RecvTimeoutError::Timeout) => false,
                Err(mpsc::RecvTimeoutError::Disconnected) => true,
            };
            let due = since.is_some_and(|t| t.elapsed() >= every);
            if (due || closed) && !pending.is_empty() {
                if self.write_and_sync(&pending).is_ok() {
                    self.count(records);
                    self.len += pending.len() as u64;
                }
                pending.clear();
                records = 0;
                since = None;
            }
            if closed {
                break;
            }
        }
    }

    /// Past the threshold, replaces the file with the compactor's live records: temp file,
    /// fsync, rename, directory fsync (counted as fsyncs of this log's kind, not as flushes).
    /// Not `durable::write_atomic`: each fsync is counted for `/metrics`, and the writer
    /// reopens the new file for appending.
    fn maybe_compact(&mut self) {
        let Some(c) = self.compactor.as_mut() else {
            return;
        };
        if self.len <= c.max_bytes {
            return;
        }
        let live = (c.live)();
        let tmp = self.file_path.with_extension("compact");
        let r = (|| -> std::io::Result<File> {
            let mut f = create_private(&tmp)?;
            f.write_all(&live)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.file_path)?;
            if let Some(dir) = self.file_path.parent() {
                File::open(dir)?.sync_all()?;
            }
            OpenOptions::new().append(true).open(&self.file_path)
        })();
        match r {
            Ok(f) => {
                self.file = f;
                self.len = live.len() as u64;
                let kind = match self.kind {
                    LogKind::Journal => FsyncKind::Journal,
                    LogKind::Nonce => FsyncKind::NonceLog,
                };
                self.metrics.fsync(kind);
                self.metrics.fsync(kind);
            }
            Err(e) => {
                // The old file is intact (rename is atomic); keep appending to it.
                eprintln!("obsync-refserver: compacting {} failed: {e}", self.path);
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }

    /// Extends the preallocated reserve when less than half of it is left; a volume with no
    /// room for it is marked low on space (writes are then refused before the journal).
    fn keep_reserve(&mut self) {
        if self.alloc_end >= self.len + LOG_RESERVE_BYTES / 2 {
            return;
        }
        use std::os::fd::AsRawFd as _;
        // SAFETY: fallocate(2) on a descriptor this writer owns; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                self.len as libc::off_t,
                LOG_RESERVE_BYTES as libc::off_t,
            )
        };
        if rc == 0 {
            self.alloc_end = self.len + LOG_RESERVE_BYTES;
        } else if is_full(&std::io::Error::last_os_error()) {
            self.metrics.low_space.store(true, Ordering::SeqCst);
        }
    }

    fn write_and_sync(&mut self, buf: &[u8]) -> Result<(), AppendError> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(AppendError {
                path: self.path.clone(),
                kind: std::io::ErrorKind::Other,
                msg: "an earlier write failed; restart to replay the log".into(),
            });
        }
        let r = self
            .file
            .write_all(buf)
            .and_then(|()| self.file.sync_data());
        r.map_err(|e| {
            if is_full(&e) {
                self.metrics.low_space.store(true, Ordering::SeqCst);
            }
            // A nonce log with no room: cut the partial frame off and go on (a nonce that is
            // not durable is refused, never answered, so nothing diverges). A journal record
            // is already applied in memory: only a restart's replay makes them agree again.
            if self.kind == LogKind::Nonce && is_full(&e) && self.file.set_len(self.len).is_ok() {
                return AppendError {
                    path: self.path.clone(),
                    kind: e.kind(),
                    msg: e.to_string(),
                };
            }
            self.poisoned.store(true, Ordering::SeqCst);
            AppendError {
                path: self.path.clone(),
                kind: e.kind(),
                msg: e.to_string(),
            }
        })
    }

    fn count(&self, records: u64) {
        let m = &self.metrics;
        match self.kind {
            LogKind::Journal => {
                m.fsync(FsyncKind::Journal);
                Metrics::add(&m.journal_flushes, 1);
                Metrics::add(&m.journal_records, records);
            }
            LogKind::Nonce => {
                m.fsync(FsyncKind::NonceLog);
                Metrics::add(&m.nonce_flushes, 1);
                Metrics::add(&m.nonce_records, records);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn appended_records_replay_and_a_torn_tail_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let metrics = Arc::new(Metrics::new());
        let a =
            Appender::open(&path, LogKind::Journal, false, metrics.clone(), None, None).unwrap();
        a.append(b"one", None).await.unwrap();
        a.append(b"two", None).await.unwrap();
        a.close();
        assert_eq!(metrics.journal_flushes.load(Ordering::Relaxed), 2);
        // Tear the tail: half of a third frame.
        let third = frame::encode(b"three");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&third[..5]).unwrap();
        drop(f);
        let (records, dropped) = replay(&path).unwrap();
        assert_eq!(records, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(dropped, 5);
        let (records, dropped) = replay(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(dropped, 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_unsafe_lazy_log_acknowledges_before_it_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let metrics = Arc::new(Metrics::new());
        let (tx, seen) = tokio::sync::watch::channel(0u64);
        let every = Duration::from_millis(300);
        let a = Appender::open_with(
            &path,
            LogKind::Journal,
            false,
            metrics.clone(),
            Some(tx),
            None,
            Some(every),
        )
        .unwrap();
        let t0 = Instant::now();
        a.append(b"one", Some(1)).await.unwrap();
        // Acknowledged and shown durable, yet nothing is in the file: what a crash loses.
        let acked_after = t0.elapsed();
        assert!(acked_after < every, "acknowledged after {acked_after:?}");
        assert_eq!(*seen.borrow(), 1);
        assert_eq!(replay(&path).unwrap().0, Vec::<Vec<u8>>::new());
        assert_eq!(metrics.journal_flushes.load(Ordering::Relaxed), 0);
        // The write comes once the window has passed (bounded wait).
        let deadline = Instant::now() + Duration::from_secs(10);
        while replay(&path).unwrap().0.is_empty() {
            assert!(Instant::now() < deadline, "the lazy log never wrote");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(replay(&path).unwrap().0, vec![b"one".to_vec()]);
        // Closing writes what is still queued.
        a.append(b"two", Some(2)).await.unwrap();
        a.close();
        assert_eq!(
            replay(&path).unwrap().0,
            vec![b"one".to_vec(), b"two".to_vec()]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn group_commit_batches_concurrent_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let metrics = Arc::new(Metrics::new());
        let (w, r) = tokio::sync::watch::channel(0u64);
        let a = Arc::new(
            Appender::open(
                &path,
                LogKind::Journal,
                true,
                metrics.clone(),
                Some(w),
                None,
            )
            .unwrap(),
        );
        // Queue 64 records before awaiting any: they cannot all need their own flush.
        let rxs: Vec<_> = (1..=64u64)
            .map(|i| a.enqueue(format!("r{i}").as_bytes(), Some(i)).unwrap())
            .collect();
        for rx in rxs {
            rx.await.unwrap().unwrap();
        }
        assert_eq!(*r.borrow(), 64);
        assert_eq!(metrics.journal_records.load(Ordering::Relaxed), 64);
        assert!(metrics.journal_flushes.load(Ordering::Relaxed) < 64);
        a.close();
        assert_eq!(replay(&path).unwrap().0.len(), 64);
    }
}

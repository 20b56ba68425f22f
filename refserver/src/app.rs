//! Opening a data dir: the instance lock, the setup token, journal and nonce-log replay, the
//! chunk store. [`App`] is everything a request handler needs.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use crate::clock::Clock;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::nonces::Nonces;
use crate::state::{ReplayError, State};
use crate::store::chunks::ChunkStore;
use crate::store::log::{Appender, LogKind, replay};

/// Why a server could not start on a data dir.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data dir {path} is not writable")]
    NotWritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data dir {path} is in use by another obsync-refserver (lock {lock} is held)")]
    InUse { path: PathBuf, lock: PathBuf },
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("journal {path}")]
    Replay { path: PathBuf, source: ReplayError },
    #[error("cannot listen on {addr}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("refusing to listen on non-loopback address {addr} without --allow-remote")]
    Remote { addr: std::net::SocketAddr },
}

/// File names inside the data dir.
pub const LOCK_FILE: &str = "lock";
pub const SETUP_TOKEN_FILE: &str = "setup-token";
pub const JOURNAL_FILE: &str = "journal";
pub const NONCE_LOG_FILE: &str = "nonces.log";
pub const CHUNKS_DIR: &str = "chunks";
/// The data dir's mode: the server's user only.
pub const DATA_DIR_MODE: u32 = 0o700;

/// Shared server state, one per running server.
#[derive(Debug)]
pub struct App {
    state: Mutex<State>,
    pub journal: Appender,
    pub durable: tokio::sync::watch::Receiver<u64>,
    pub nonces: Nonces,
    pub chunks: Arc<ChunkStore>,
    pub metrics: Arc<Metrics>,
    rng: Mutex<ChaCha8Rng>,
    pub setup_token: String,
    pub clock: Arc<dyn Clock>,
    pub inject_delay_us: u64,
    pub inject_delay_route: protocol::Route,
    pub inject_work: u64,
    /// Re-read every stored version on every version post (`--inject-reindex`).
    pub inject_reindex: bool,
    /// A request body must arrive whole within this long.
    pub body_read_timeout: std::time::Duration,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    data_dir: PathBuf,
    /// When the free space of a volume marked low was last measured.
    space_checked: Mutex<Option<std::time::Instant>>,
    /// Held for the server's life: the flock on `DATA/lock`.
    _lock: File,
}

/// Exclusive, non-blocking lock on `DATA/lock` (`File::try_lock`, which is `flock(2)` on
/// Linux), so two servers never share a data dir.
fn lock_data_dir(dir: &Path) -> Result<File, StartError> {
    let lock = dir.join(LOCK_FILE);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(|source| StartError::NotWritable {
            path: dir.to_path_buf(),
            source,
        })?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(StartError::InUse {
            path: dir.to_path_buf(),
            lock,
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(StartError::Io { path: lock, source }),
    }
}

/// 32 bytes from the operating system. Setup tokens, device secrets and enroll tokens are
/// credentials: they must not be predictable, so (unlike everything vaultbench measures)
/// this generator is seeded from the OS, not from a fixed seed. It never affects output.
fn os_seed() -> std::io::Result<[u8; 32]> {
    let mut seed = [0u8; 32];
    File::open("/dev/urandom")?.read_exact(&mut seed)?;
    Ok(seed)
}

impl App {
    /// Opens (creating if needed) the data dir and replays its logs.
    pub fn open(
        cfg: &ServerConfig,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<App, StartError> {
        let dir = &cfg.data_dir;
        // The data dir holds secrets (journal, setup token): 0700, also when it already
        // existed with a wider mode.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DATA_DIR_MODE)
            .create(dir)
            .and_then(|()| {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DATA_DIR_MODE))
            })
            .map_err(|source| StartError::NotWritable {
                path: dir.clone(),
                source,
            })?;
        let lock = lock_data_dir(dir)?;
        let io = |path: PathBuf| move |source| StartError::Io { path, source };
        // A probe write: a read-only dir with a lock file left over must still be refused.
        let probe = dir.join(".write-probe");
        File::create(&probe)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|source| StartError::NotWritable {
                path: dir.clone(),
                source,
            })?;

        let mut rng = ChaCha8Rng::from_seed(os_seed().map_err(io(PathBuf::from("/dev/urandom")))?);
        let token_path = dir.join(SETUP_TOKEN_FILE);
        let setup_token = match std::fs::read_to_string(&token_path) {
            Ok(t) if !t.trim().is_empty() => {
                // A token written by an older build may be world-readable.
                std::fs::set_permissions(
                    &token_path,
                    std::fs::Permissions::from_mode(crate::store::log::PRIVATE_FILE_MODE),
                )
                .map_err(io(token_path.clone()))?;
                t.trim().to_owned()
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StartError::Io {
                    path: token_path,
                    source: e,
                });
            }
            _ => {
                let mut b = [0u8; 32];
                rng.fill_bytes(&mut b);
                let t = hex::encode(b);
                durable::write_atomic(&token_path, format!("{t}\n").as_bytes(), durable::PRIVATE)
                    .map_err(io(token_path.clone()))?;
                t
            }
        };

        let metrics = Arc::new(Metrics::new());
        let journal_path = dir.join(JOURNAL_FILE);
        let (records, dropped) = replay(&journal_path).map_err(io(journal_path.clone()))?;
        if dropped > 0 {
            eprintln!(
                "obsync-refserver: truncated a torn tail of {dropped} bytes from {}",
                journal_path.display()
            );
        }
        let state = State::replay(&records).map_err(|source| StartError::Replay {
            path: journal_path.clone(),
            source,
        })?;
        let head = state.head_seq();
        metrics
            .head_seq
            .store(head, std::sync::atomic::Ordering::Relaxed);
        let (durable_tx, durable) = tokio::sync::watch::channel(head);
        let journal = Appender::open_with(
            &journal_path,
            LogKind::Journal,
            cfg.group_commit,
            metrics.clone(),
            Some(durable_tx),
            None,
            cfg.unsafe_lazy_journal,
        )
        .map_err(io(journal_path.clone()))?;
        let nonce_path = dir.join(NONCE_LOG_FILE);
        let (nonces, nonce_dropped) = Nonces::open(
            &nonce_path,
            cfg.group_commit,
            metrics.clone(),
            cfg.clock.now_s(),
        )
        .map_err(io(nonce_path.clone()))?;
        if nonce_dropped > 0 {
            eprintln!(
                "obsync-refserver: truncated a torn tail of {nonce_dropped} bytes from {}",
                nonce_path.display()
            );
        }
        let chunks_path = dir.join(CHUNKS_DIR);
        let chunks = ChunkStore::open(&chunks_path, metrics.clone()).map_err(io(chunks_path))?;
        // Started on a volume already short of space: refuse writes from the first one.
        if free_bytes(dir).is_some_and(|f| f < MIN_FREE_BYTES) {
            metrics
                .low_space
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(App {
            state: Mutex::new(state),
            journal,
            durable,
            nonces,
            chunks: Arc::new(chunks),
            metrics,
            rng: Mutex::new(rng),
            setup_token,
            clock: cfg.clock.clone(),
            inject_delay_us: cfg.inject_delay_us,
            inject_delay_route: cfg.inject_delay_route,
            inject_work: cfg.inject_work,
            inject_reindex: cfg.inject_reindex,
            body_read_timeout: cfg.body_read_timeout,
            data_dir: dir.clone(),
            space_checked: Mutex::new(None),
            shutdown,
            _lock: lock,
        })
    }

    /// `Err(free bytes)` while the volume is low on space: a writer met ENOSPC or could not
    /// keep a log's reserve. At most once a second the free space is measured again, and
    /// once it is back to `MIN_FREE_BYTES` the mark is cleared: the server recovers by
    /// itself when space is freed.
    pub fn check_space(&self) -> Result<(), u64> {
        use std::sync::atomic::Ordering;
        if !self.metrics.low_space.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut checked = self.space_checked.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if checked.is_some_and(|t| now.duration_since(t) < SPACE_RECHECK) {
            return Err(0);
        }
        *checked = Some(now);
        let free = free_bytes(&self.data_dir).unwrap_or(0);
        if free >= MIN_FREE_BYTES {
            self.metrics.low_space.store(false, Ordering::SeqCst);
            Ok(())
        } else {
            Err(free)
        }
    }

    pub fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn chunks_handle(&self) -> Arc<ChunkStore> {
        self.chunks.clone()
    }

    /// `n` random bytes as lowercase hex (ids, secrets, tokens, multipart boundaries).
    pub fn random_hex(&self, n: usize) -> String {
        let mut b = vec![0u8; n];
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fill_bytes(&mut b);
        hex::encode(b)
    }

    /// Lets queued log records finish and stops the writer threads.
    pub fn close(&self) {
        self.journal.close();
        self.nonces.close();
    }
}

/// Free space a volume marked low must have again before writes resume: two of the
/// protocol's client-sized chunks (1 MiB each) plus a log reserve.
const MIN_FREE_BYTES: u64 = 3 * 1024 * 1024;
/// How often a volume marked low is measured again.
const SPACE_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes an unprivileged writer may still use on the volume holding `dir` (statvfs).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs(3) reads the NUL-terminated path `c` and fills a struct this function
    // owns and zero-initialises.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail.saturating_mul(st.f_frsize))
}

/// Resolves once shutdown has begun (the accept loop stopped; long polls end early).
pub(crate) async fn until_shutdown(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

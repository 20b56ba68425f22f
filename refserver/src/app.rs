//! Opening a data dir: the instance lock, the setup token, journal and nonce-log replay, the
//! chunk store. [`App`] is everything a request handler needs.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
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
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Held for the server's life: the flock on `DATA/lock`.
    _lock: File,
}

/// Exclusive, non-blocking flock on `DATA/lock`, so two servers never share a data dir.
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
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(StartError::InUse {
                path: dir.to_path_buf(),
                lock,
            });
        }
        return Err(StartError::Io {
            path: lock,
            source: err,
        });
    }
    Ok(f)
}

/// Writes `data` to `path` atomically: temp file, fsync, rename, directory fsync.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
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
        std::fs::create_dir_all(dir).map_err(|source| StartError::NotWritable {
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
            Ok(t) if !t.trim().is_empty() => t.trim().to_owned(),
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
                write_atomic(&token_path, format!("{t}\n").as_bytes())
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
        let journal = Appender::open(
            &journal_path,
            LogKind::Journal,
            cfg.group_commit,
            metrics.clone(),
            Some(durable_tx),
            None,
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
            shutdown,
            _lock: lock,
        })
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

/// Resolves once shutdown has begun (the accept loop stopped; long polls end early).
pub(crate) async fn until_shutdown(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

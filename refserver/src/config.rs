//! What a server needs to start: [`ServerConfig`], built by the CLI or by tests, read by
//! `server` (bind) and `app` (the data dir). It imports neither, so neither imports the other
//! back through it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};

/// Everything a server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Batch concurrent journal and nonce records into one write + one fsync.
    pub group_commit: bool,
    /// Busy-wait this many µs in every version post (A/B sensitivity tests).
    pub inject_delay_us: u64,
    /// Allow a non-loopback listen address.
    pub allow_remote: bool,
    /// Wall clock for timestamps, nonce expiry and change times.
    pub clock: Arc<dyn Clock>,
}

impl ServerConfig {
    /// `127.0.0.1:0`, no group commit, no injected delay, the system clock.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: data_dir.into(),
            group_commit: false,
            inject_delay_us: 0,
            allow_remote: false,
            clock: Arc::new(SystemClock),
        }
    }
}

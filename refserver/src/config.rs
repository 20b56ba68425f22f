//! What a server needs to start: [`ServerConfig`], built by the CLI or by tests, read by
//! `server` (bind) and `app` (the data dir). It imports neither, so neither imports the other
//! back through it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

/// Everything a server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Batch concurrent journal and nonce records into one write + one fsync.
    pub group_commit: bool,
    /// Busy-wait this many µs in every request of [`ServerConfig::inject_delay_route`] (A/B
    /// sensitivity tests).
    pub inject_delay_us: u64,
    /// The route `inject_delay_us` slows: version posts unless told otherwise.
    pub inject_delay_route: protocol::Route,
    /// Iterations of a fixed hash kernel in every version post (deterministic work for
    /// instruction-count A/B tests).
    pub inject_work: u64,
    /// Re-read every stored version on every version post, one stdout line each (growth
    /// tests: a server whose import is quadratic in the vault).
    pub inject_reindex: bool,
    /// A deliberately broken build for crash tests: acknowledge journal records at once and
    /// write them this long later (see `Appender::open_with`). `None` in every real use.
    pub unsafe_lazy_journal: Option<Duration>,
    /// Allow a non-loopback listen address.
    pub allow_remote: bool,
    /// Wall clock for timestamps, nonce expiry and change times.
    pub clock: Arc<dyn Clock>,
    /// A client must send a request head within this long of the connection opening or of
    /// its previous answer; a partial head then gets `408`, an idle connection is closed.
    pub header_read_timeout: Duration,
    /// A request body must arrive whole within this long of its head (`408 request_timeout`).
    pub body_read_timeout: Duration,
    /// Open connections at most; `None`: derived from the open-file limit at start.
    pub max_connections: Option<usize>,
}

/// Default [`ServerConfig::header_read_timeout`]: hyper's own default, which also reaps idle
/// keep-alive connections (the load generator's pool drops idle ones after the same 30 s).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ServerConfig::body_read_timeout`]: an 8 MiB chunk (the protocol's largest body)
/// at 1 Mbit/s takes about 70 s; two minutes leaves room, and stalled bodies are bounded.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(120);

impl ServerConfig {
    /// `127.0.0.1:0`, no group commit, no injected delay or work, the system clock, the default
    /// timeouts and a connection cap from the open-file limit.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: data_dir.into(),
            group_commit: false,
            inject_delay_us: 0,
            inject_delay_route: protocol::Route::PostVersion,
            inject_work: 0,
            inject_reindex: false,
            unsafe_lazy_journal: None,
            allow_remote: false,
            clock: Arc::new(SystemClock),
            header_read_timeout: HEADER_READ_TIMEOUT,
            body_read_timeout: BODY_READ_TIMEOUT,
            max_connections: None,
        }
    }
}

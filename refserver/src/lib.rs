//! The reference obsync wire protocol v1 server: vaultbench's built-in target and test fixture.
//!
//! Really durable (chunks: temp file + fsync + rename + directory fsync; an fsynced journal of
//! CRC-framed records; an fsynced nonce log), with optional group commit and Prometheus
//! counters at `/metrics`. Read in this order: [`cli`] → `config` ([`ServerConfig`]) →
//! `server` (bind, accept, shutdown, [`TestServer`]) → `app` (opening a data dir) → `api`
//! (the router over `protocol::Route`, one module per resource) → `state` (the model and its
//! journal records) → `store` (frames, logs, chunks) → `nonces`. No module imports one
//! that imports it back.

mod api;
mod app;
mod body;
pub mod cli;
mod clock;
mod config;
mod metrics;
mod nonces;
mod server;
mod state;
mod store;

pub use app::StartError;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::ServerConfig;
pub use server::{Server, TestServer};

/// The name of the server's tokio worker (and blocking-pool) threads. Linux keeps 15 bytes of a
/// thread name (`TASK_COMM_LEN` is 16 with the NUL, see `prctl(2)` `PR_SET_NAME`): every name
/// the server gives fits, so per-thread CPU keys read `/proc` and get the name given here.
pub const WORKER_THREAD: &str = "refsrv-worker";
/// The names of the journal and nonce-log writer threads (each within the same 15 bytes).
pub const WRITER_THREADS: [&str; 2] = ["journal-writer", "nonce-writer"];

#[cfg(test)]
mod tests {
    /// Linux cuts a thread name at 15 bytes; a longer one would show up cut in `/proc`, in
    /// `top -H` and in the per-thread CPU keys.
    #[test]
    fn thread_names_fit_the_linux_comm_limit() {
        for name in std::iter::once(super::WORKER_THREAD).chain(super::WRITER_THREADS) {
            assert!(name.len() <= 15, "{name} is {} bytes", name.len());
        }
    }
}

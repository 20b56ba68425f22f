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
mod conn;
#[doc(hidden)]
pub mod fuzzing;
mod metrics;
mod nonces;
mod server;
mod state;
mod store;

pub use app::StartError;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, ServerConfig};
pub use server::{Server, TestServer};

/// The name of the server's tokio worker (and blocking-pool) threads. Linux keeps 15 bytes of a
/// thread name (`TASK_COMM_LEN` is 16 with the NUL, see `prctl(2)` `PR_SET_NAME`): every name
/// the server gives fits, so per-thread CPU keys read `/proc` and get the name given here.
pub const WORKER_THREAD: &str = "refsrv-worker";
/// The names of the journal and nonce-log writer threads (each within the same 15 bytes).
pub const WRITER_THREADS: [&str; 2] = ["journal-writer", "nonce-writer"];
/// The main thread's name in the standalone `obsync-refserver` binary. Linux names a main
/// thread after the executable, and `obsync-refserver` is 16 bytes: it would show up cut to
/// `obsync-refserve`. (`vaultbench serve-ref` keeps its executable's name, `vaultbench`.)
pub const MAIN_THREAD: &str = "refsrv-main";

/// Names the calling thread (`prctl(PR_SET_NAME)`); `name` must fit in 15 bytes.
pub fn name_this_thread(name: &str) {
    debug_assert!(name.len() <= 15, "{name} is longer than 15 bytes");
    if let Ok(c) = std::ffi::CString::new(name) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string, which `c` is and outlives the call.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    /// Linux cuts a thread name at 15 bytes; a longer one would show up cut in `/proc`, in
    /// `top -H` and in the per-thread CPU keys.
    #[test]
    fn thread_names_fit_the_linux_comm_limit() {
        for name in [super::WORKER_THREAD, super::MAIN_THREAD]
            .into_iter()
            .chain(super::WRITER_THREADS)
        {
            assert!(name.len() <= 15, "{name} is {} bytes", name.len());
        }
    }
}

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
mod threads;

pub use app::StartError;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, ServerConfig};
pub use server::{Server, TestServer};
pub use threads::{MAIN_THREAD, WORKER_THREAD, WRITER_THREADS, name_this_thread};

//! The reference obsync wire protocol v1 server: vaultbench's built-in target and test fixture.
//!
//! Really durable (chunks: temp file + fsync + rename + directory fsync; an fsynced journal of
//! CRC-framed records; an fsynced nonce log), with optional group commit and Prometheus
//! counters at `/metrics`. Read in this order: [`cli`] → `server` (bind, accept, shutdown,
//! [`TestServer`]) → `app` (opening a data dir) → `api` (routes and authentication) →
//! `state` (the model and its journal records) → `store` (frames, logs, chunks) → `nonces`.

mod api;
mod app;
mod body;
pub mod cli;
mod clock;
#[doc(hidden)]
pub mod fuzzing;
mod metrics;
mod nonces;
mod server;
mod state;
mod store;

pub use app::StartError;
pub use clock::{Clock, ManualClock, SystemClock};
pub use metrics::ROUTES;
pub use server::{Server, ServerConfig, TestServer};

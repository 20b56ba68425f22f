//! The signed load generator: obsync-v1 devices, whole-vault push/pull, and route load in
//! closed and open loop with HdrHistogram latencies.
//!
//! Pipeline: [`Target`] (loopback unless allowed) → [`enroll()`] devices (setup, then pairing;
//! kept in a [`StateFile`]) → device operations ([`push_vault`], [`pull_vault`], [`resync`],
//! [`push_file`], [`delete_file`], [`rename_path`], [`wait_changes`], [`fetch_and_write`]) or a
//! route load ([`run_route_load`]) → reports ([`TransferReport`], [`RouteLoadReport`],
//! [`RouteStats`], interval logs).
//!
//! # Client conventions
//! - `file_id` = first 16 bytes of SHA-256("vaultbench/file\n" + vault-relative path at
//!   creation), kept on rename.
//! - `domain_id` = first 16 bytes of SHA-256("vaultbench/domain\n" + account_id), one per
//!   state file (every device of the account uses it).
//! - `manifest_ct` = base64 of the JSON `protocol::wire::ClientManifest {path, kind, size,
//!   sha256}` (the server never reads it); `manifest_nonce` = 12 bytes (24 hex) from the
//!   device's seeded stream. Folders: a version with no sids, `bytes` 0, kind `"dir"`.
//! - Nonces: 16 bytes from a ChaCha8Rng, one stream per device. Enrolment uses the run seed
//!   (session 0). A run on a state file starts a session under the file's lock
//!   (`<state>.lock`; [`StateFile::begin_session`]), and its streams are keyed by SHA-256 of
//!   (seed, session, 64 bits the operating system gives every load): nonces must be *unique*
//!   against one server (a replay is refused for 600 s), not reproducible, so neither
//!   concurrent runs sharing a state file nor a restored older copy of it repeat one. Within a
//!   run, each closed-loop worker draws from a child stream seeded with 32 bytes of its
//!   device's stream, workers created in a fixed order. A `401 replayed_nonce` names the
//!   likely cause. `ts` is the real wall clock in seconds (a [`Clock`] parameter in tests).
//! - Closed-loop route load sends through a lean HTTP/1.1 connection per worker (`h1.rs`,
//!   as wrk does: one reused buffer each way, every request still signed afresh); device
//!   operations and the open loop use the per-device pooled hyper client.
//! - Files are cut into fixed 1 MiB chunks; sid = SHA-256 of the chunk. Pulls read chunks
//!   in batches of at most 3, pushes keep 4 files in flight (the real plugin's figures).
//! - Every walk of a changes feed (a pull, a resync, a listing; a replica's pass
//!   too) is bounded by entries and pages ([`FeedBounds`], carried by the [`Target`]), so a
//!   feed that keeps inventing entries ends at a bound named with its flag.
//! - Every retry (transport error or 503; at most three attempts) is signed afresh, and the
//!   attempts share the request's one timeout. A route load's preparation is bounded by its
//!   duration, so a hung target ends the run near `--duration`.

mod answer;
mod clock;
mod error;
#[cfg(test)]
mod fake;
mod feed;
mod h1;
mod inflight;
mod json_budget;
mod lock;
mod shard;
mod stats;
mod target;
pub mod transfer;
pub mod walk;
mod xml;

pub mod hlog;
pub mod http;
pub mod launch;
pub mod protocols;
pub mod proxy;
pub mod routeload;

#[doc(hidden)]
pub use protocols::obsync::internals;
pub use protocols::obsync::{bench, fanout, faulthop, locust};

use protocols::obsync::{client, enroll, metrics, midbody, route, sync};

pub use client::{Acknowledged, Clock, Device, system_clock};
pub use enroll::{StateFile, domain_id_for, enroll, pair, probe};
pub use error::LoadError;
pub use feed::{FeedBounds, FeedOverrides, FeedOverrun};
pub use metrics::{parse_metrics_text, scrape_metrics};
pub use midbody::{MidBodyCut, MidBodyTrap, TrapState};
pub use protocol::wire::{Change, ChangesResponse};
pub use route::{
    Mode, PairedRouteConfig, PairedRouteReport, Route, RouteLoadConfig, RouteLoadReport,
    a_first_in, default_slice, run_paired_route_load, run_route_load, run_route_load_until,
};
pub use shard::Shard;
pub use stats::{
    HistSummary, Measured, Recorder, RouteStats, latency_histogram, merge_into, read_interval_log,
    write_interval_log,
};
pub use sync::{
    Checkpoint, Interrupted, PushOpts, PushedVersion, TransferReport, decode_manifest, delete_file,
    fetch_and_write, file_id_for, get_chunk, list_changes, mirror_pull, mirror_push, pull_vault,
    push_file, push_vault, push_vault_counted, rename_path, resume_vault, resync, wait_changes,
};
pub use target::Target;

/// The name of the load generator's tokio worker threads, within Linux's 15-byte thread-name
/// limit (`prctl(2)` `PR_SET_NAME`), so `/proc` and `top -H` show it whole.
pub const WORKER_THREAD: &str = "loadgen-worker";

/// Connections one generator worker thread serves. wrk, the peer `bench-peer` compares with,
/// runs 2 threads for 8 connections there (`-t min(c, 2)`); measured with `load bench-peer`
/// on a 2-core cloud VM (docs/src/measured.md, "The generator against wrk"), one thread per 4 connections
/// gave the lowest CPU per signed request without lowering requests/s.
pub const CONNECTIONS_PER_THREAD: usize = 4;

/// Worker threads for a generator runtime that holds `connections` at once on `cpus` usable
/// CPUs: one per [`CONNECTIONS_PER_THREAD`] connections (rounded up), at most one per CPU, at
/// least one. A runtime sized to every core for a handful of connections only adds threads
/// that wake, steal or park, and compete with the server for the CPUs.
pub fn worker_threads(connections: usize, cpus: usize) -> usize {
    connections
        .div_ceil(CONNECTIONS_PER_THREAD)
        .min(cpus)
        .max(1)
}

/// The generator's tokio runtime for `threads` worker threads (see [`worker_threads`]). One
/// thread gets a current-thread runtime: the tasks run on the thread that calls `block_on`, so
/// a request's answer wakes no other thread. A multi-thread runtime with one worker still parks
/// the worker and wakes it across threads for every answer; `load bench-peer` at one connection
/// measured that hand-off as the gap to wrk (docs/src/measured.md, "The generator against wrk").
pub fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(WORKER_THREAD)
            .enable_all()
            .build()
    }
}

#[cfg(test)]
mod worker_thread_tests {
    #[test]
    fn threads_follow_connections_and_stay_within_the_cpus() {
        use super::worker_threads;
        assert_eq!(worker_threads(1, 16), 1);
        assert_eq!(worker_threads(4, 16), 1);
        assert_eq!(worker_threads(8, 16), 2);
        assert_eq!(worker_threads(64, 2), 2);
        assert_eq!(worker_threads(0, 0), 1);
    }
}

#[cfg(test)]
mod thread_name_tests {
    #[test]
    fn the_worker_thread_name_fits_the_linux_comm_limit() {
        assert!(super::WORKER_THREAD.len() <= 15, "{}", super::WORKER_THREAD);
    }
}

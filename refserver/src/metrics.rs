//! Counters served at `GET /metrics` in the Prometheus text format.
//!
//! The names are an interface: vaultbench turns them into exact-class metric keys, so every
//! line is present from start (value 0) and a scraper always sees the same key set.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use protocol::Route;

/// The label of requests no route has a path for (answered `404`).
pub const OTHER: &str = "other";

/// The label a request is counted under.
fn label(route: Option<Route>) -> &'static str {
    route.map_or(OTHER, Route::metric_label)
}

/// Every route label, in the order of the protocol page, then [`OTHER`].
fn labels() -> impl Iterator<Item = Option<Route>> {
    Route::ALL.into_iter().map(Some).chain([None])
}

/// The status each route answers on success; its line is printed (as 0) from start.
fn success_status(route: Option<Route>) -> u16 {
    let Some(route) = route else {
        return 404;
    };
    match route {
        Route::Setup
        | Route::PairingCreate
        | Route::PairingClaim
        | Route::PutChunk
        | Route::PostVersion => 201,
        Route::PairingApprove => 204,
        Route::Livez
        | Route::Readyz
        | Route::Metrics
        | Route::PairingEnvelope
        | Route::ChunksExists
        | Route::ChunksGet
        | Route::GetChunk
        | Route::GetFile
        | Route::ListFiles
        | Route::Changes => 200,
    }
}

/// What an fsync was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncKind {
    ChunkFile,
    ChunkDir,
    Journal,
    NonceLog,
}

/// The server's counters. Cheap to bump from any thread.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub(crate) fsync_chunk_file: AtomicU64,
    pub(crate) fsync_chunk_dir: AtomicU64,
    pub(crate) fsync_journal: AtomicU64,
    pub(crate) fsync_nonce_log: AtomicU64,
    pub(crate) journal_flushes: AtomicU64,
    pub(crate) journal_records: AtomicU64,
    pub(crate) nonce_flushes: AtomicU64,
    pub(crate) nonce_records: AtomicU64,
    pub(crate) chunk_bytes_stored: AtomicU64,
    pub(crate) chunks_stored: AtomicU64,
    pub(crate) versions: AtomicU64,
    pub(crate) longpoll_wakeups: AtomicU64,
    pub(crate) head_seq: AtomicU64,
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics::default();
        {
            let mut r = m.requests.lock().unwrap_or_else(|e| e.into_inner());
            for route in labels() {
                r.insert((label(route), success_status(route)), 0);
            }
        }
        m
    }

    /// Counts one answer; `None` is a request no route has a path for.
    pub fn count_request(&self, route: Option<Route>, status: u16) {
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry((label(route), status)).or_insert(0) += 1;
    }

    pub fn fsync(&self, kind: FsyncKind) {
        let c = match kind {
            FsyncKind::ChunkFile => &self.fsync_chunk_file,
            FsyncKind::ChunkDir => &self.fsync_chunk_dir,
            FsyncKind::Journal => &self.fsync_journal,
            FsyncKind::NonceLog => &self.fsync_nonce_log,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        out.push_str("# HELP obsync_requests_total Requests answered, by route and status.\n");
        out.push_str("# TYPE obsync_requests_total counter\n");
        {
            let r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            for ((route, status), n) in r.iter() {
                let _ = writeln!(
                    out,
                    "obsync_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP obsync_fsyncs_total fsync calls, by what they made durable.\n");
        out.push_str("# TYPE obsync_fsyncs_total counter\n");
        for (kind, c) in [
            ("chunk_file", &self.fsync_chunk_file),
            ("chunk_dir", &self.fsync_chunk_dir),
            ("journal", &self.fsync_journal),
            ("nonce_log", &self.fsync_nonce_log),
        ] {
            let _ = writeln!(out, "obsync_fsyncs_total{{kind=\"{kind}\"}} {}", get(c));
        }
        let counters: [(&str, &str, &AtomicU64); 9] = [
            (
                "obsync_journal_flushes_total",
                "Journal write+fsync batches.",
                &self.journal_flushes,
            ),
            (
                "obsync_journal_records_total",
                "Journal records made durable.",
                &self.journal_records,
            ),
            (
                "obsync_nonce_flushes_total",
                "Nonce log write+fsync batches.",
                &self.nonce_flushes,
            ),
            (
                "obsync_nonce_records_total",
                "Nonce records made durable.",
                &self.nonce_records,
            ),
            (
                "obsync_chunk_bytes_stored_total",
                "Bytes of new chunks stored.",
                &self.chunk_bytes_stored,
            ),
            (
                "obsync_chunks_stored_total",
                "New chunks stored.",
                &self.chunks_stored,
            ),
            (
                "obsync_versions_total",
                "New versions accepted.",
                &self.versions,
            ),
            (
                "obsync_longpoll_wakeups_total",
                "Waiting long polls woken by a new change.",
                &self.longpoll_wakeups,
            ),
            (
                "obsync_head_seq",
                "The last durable change sequence number.",
                &self.head_seq,
            ),
        ];
        for (name, help, c) in counters {
            let kind = if name == "obsync_head_seq" {
                "gauge"
            } else {
                "counter"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                get(c)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_present_from_start() {
        let text = Metrics::new().render();
        for route in labels() {
            let l = label(route);
            let line = format!("route=\"{l}\",status=\"{}\"}} 0", success_status(route));
            assert!(text.contains(&line), "{line}");
        }
        for name in [
            "obsync_fsyncs_total{kind=\"chunk_file\"} 0",
            "obsync_fsyncs_total{kind=\"chunk_dir\"} 0",
            "obsync_fsyncs_total{kind=\"journal\"} 0",
            "obsync_fsyncs_total{kind=\"nonce_log\"} 0",
            "obsync_journal_flushes_total 0",
            "obsync_journal_records_total 0",
            "obsync_nonce_flushes_total 0",
            "obsync_nonce_records_total 0",
            "obsync_chunk_bytes_stored_total 0",
            "obsync_chunks_stored_total 0",
            "obsync_versions_total 0",
            "obsync_longpoll_wakeups_total 0",
            "obsync_head_seq 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }

    #[test]
    fn requests_are_counted_by_route_and_status() {
        let m = Metrics::new();
        m.count_request(Some(Route::PutChunk), 201);
        m.count_request(Some(Route::PutChunk), 201);
        m.count_request(Some(Route::PutChunk), 422);
        m.count_request(None, 404);
        m.fsync(FsyncKind::Journal);
        let text = m.render();
        assert!(text.contains("obsync_requests_total{route=\"put_chunk\",status=\"201\"} 2\n"));
        assert!(text.contains("obsync_requests_total{route=\"put_chunk\",status=\"422\"} 1\n"));
        assert!(text.contains("obsync_requests_total{route=\"other\",status=\"404\"} 1\n"));
        assert!(text.contains("obsync_fsyncs_total{kind=\"journal\"} 1\n"));
    }
}

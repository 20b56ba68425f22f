//! What a whole-vault transfer measured, whatever the protocol: push options, throughput
//! checkpoints, the [`TransferReport`] of a push, pull or resync (and the [`PushedVersion`]
//! of one signed post), and the sorted walk of a vault on disk the transfers read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::stats::{HistSummary, Measured, RouteStats};

/// A vault on disk that cannot be walked: the path and why.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct TreeError {
    pub what: String,
    pub reason: String,
}

impl TreeError {
    fn io(path: &Path, e: std::io::Error) -> TreeError {
        TreeError {
            what: path.display().to_string(),
            reason: e.to_string(),
        }
    }
}

/// Options of a whole-vault push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushOpts {
    /// Files in flight (the real plugin uploads four at a time).
    pub in_flight: usize,
    /// Record a throughput checkpoint every this many files.
    pub checkpoint_every: usize,
}

impl Default for PushOpts {
    fn default() -> Self {
        PushOpts {
            in_flight: protocol::limits::CLIENT_UPLOAD_CONCURRENCY,
            checkpoint_every: 1000,
        }
    }
}

/// Throughput over one checkpoint interval of a transfer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checkpoint {
    /// Files done when the checkpoint was taken.
    pub files: u64,
    /// Milliseconds since the transfer began.
    pub elapsed_ms: u64,
    /// Files per second since the previous checkpoint.
    pub files_per_s: f64,
    /// The median per-file latency (request start to answer, ms) of the files done since the
    /// previous checkpoint, where the protocol times files one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
}

/// Per-file latencies of the current checkpoint window.
#[derive(Debug, Default)]
pub(crate) struct WindowLatency(Vec<f64>);

impl WindowLatency {
    pub(crate) fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1e3);
    }

    /// The window's median (the lower middle value for an even count), and a fresh window.
    pub(crate) fn take_p50(&mut self) -> Option<f64> {
        let mut v = std::mem::take(&mut self.0);
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[(v.len() - 1) / 2])
    }
}

pub(super) fn ser_sign<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    HistSummary::of(h, 1).serialize(s)
}

/// What a push, pull or resync did.
#[derive(Debug, Clone, Serialize)]
pub struct TransferReport {
    /// Files pushed / written / compared (not folders).
    pub files: u64,
    /// Folders pushed / created.
    pub dirs: u64,
    /// File bytes pushed or written.
    pub bytes: u64,
    pub wall_ns: u64,
    /// Requests made, all routes.
    pub requests: u64,
    /// Chunks uploaded (push) or downloaded (pull).
    pub chunks_transferred: u64,
    /// Push: chunks the server already had (content dedupe).
    pub chunks_present: u64,
    /// Tombstones applied (pull) or sent.
    pub deleted: u64,
    /// Changes that were this device's own writes coming back (pull, resync).
    pub own_echo: u64,
    /// Resync: local files or feed entries that disagree with the device's index.
    pub mismatched: u64,
    /// The last change-feed seq seen (pull, resync) or posted (push).
    pub last_seq: u64,
    pub checkpoints: Vec<Checkpoint>,
    pub routes: BTreeMap<String, RouteStats>,
    /// Signing time in ns (summarised in µs in JSON).
    #[serde(rename = "signing_us", serialize_with = "ser_sign")]
    pub signing: Histogram<u64>,
}

impl TransferReport {
    /// A report of `wall` from what a recorder measured; no files counted yet.
    pub fn new(m: Measured, wall: Duration) -> TransferReport {
        TransferReport {
            files: 0,
            dirs: 0,
            bytes: 0,
            wall_ns: wall.as_nanos() as u64,
            requests: m.requests(),
            chunks_transferred: 0,
            chunks_present: 0,
            deleted: 0,
            own_echo: 0,
            mismatched: 0,
            last_seq: 0,
            checkpoints: Vec::new(),
            routes: m.routes,
            signing: m.signing,
        }
    }

    /// Latency summary of one route in µs.
    pub fn latency_summary(&self, route: &str) -> Option<HistSummary> {
        self.routes.get(route).map(RouteStats::summary)
    }

    /// The HdrHistogram (µs) of one route.
    pub fn histogram(&self, route: &str) -> Option<&Histogram<u64>> {
        self.routes.get(route).map(|r| r.headline())
    }

    /// Signing time summarised in µs.
    pub fn signing_summary(&self) -> HistSummary {
        HistSummary::of(&self.signing, 1)
    }

    /// Files per second over the whole transfer.
    pub fn files_per_s(&self) -> f64 {
        self.files as f64 / (self.wall_ns as f64 / 1e9).max(1e-9)
    }
}

/// The answer to one version post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushedVersion {
    pub path: String,
    pub file_id: String,
    pub version_id: String,
    pub seq: u64,
    pub bytes: u64,
    pub conflicted: bool,
    /// Requests this operation made.
    pub requests: u64,
    /// Chunks uploaded.
    pub chunks_put: u64,
}

pub(super) fn checkpoint(files: u64, now: Duration, last: (u64, Duration)) -> Checkpoint {
    let dt = (now - last.1).as_secs_f64().max(1e-9);
    Checkpoint {
        files,
        elapsed_ms: now.as_millis() as u64,
        files_per_s: (files - last.0) as f64 / dt,
        p50_ms: None,
    }
}

pub(crate) fn report(
    m: Measured,
    wall: Duration,
    files: u64,
    dirs: u64,
    bytes: u64,
) -> TransferReport {
    TransferReport {
        files,
        dirs,
        bytes,
        ..TransferReport::new(m, wall)
    }
}

/// Files on disk: vault path, absolute path, size.
pub(crate) type LocalFiles = Vec<(String, PathBuf, u64)>;

/// The vault under `dir`: folders and files as sorted vault paths (so a parent comes before
/// its children), with each file's size.
pub(crate) fn local_tree(dir: &Path) -> Result<(Vec<String>, LocalFiles), TreeError> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        let rd = std::fs::read_dir(&abs).map_err(|e| TreeError::io(&abs, e))?;
        for ent in rd {
            let ent = ent.map_err(|e| TreeError::io(&abs, e))?;
            let name = ent.file_name();
            let name = name.to_str().ok_or_else(|| TreeError {
                what: ent.path().display().to_string(),
                reason: "vault names must be UTF-8".into(),
            })?;
            let child_rel = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = ent.metadata().map_err(|e| TreeError::io(&ent.path(), e))?;
            if meta.is_dir() {
                dirs.push(child_rel.clone());
                stack.push((ent.path(), child_rel));
            } else if meta.is_file() {
                files.push((child_rel, ent.path(), meta.len()));
            }
        }
    }
    dirs.sort();
    files.sort();
    Ok((dirs, files))
}

/// Rejects a vault path from a server that could escape the vault (every protocol checks a
/// listed or fed path with it before anything is written).
pub(crate) fn safe_rel_path(p: &str) -> Result<&str, crate::error::LoadError> {
    let bad = p.is_empty()
        || p.starts_with('/')
        || p.contains('\\')
        || p.contains('\0')
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        Err(crate::error::LoadError::UnsafePath { path: p.to_owned() })
    } else {
        Ok(p)
    }
}

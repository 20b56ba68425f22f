//! The WebDAV adapter's error type (a file of its own, so `webdav/mod.rs`, which re-exports
//! the adapter, and the adapter's modules never import each other).

use std::path::PathBuf;

/// Errors of the WebDAV adapter. A failed request during a route load is data (counted per
/// status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum DavError {
    #[error("{what}: {reason}")]
    BadMultistatus { what: String, reason: String },
    #[error("{route} {}: transport error ({kind}): {detail}", href(.path))]
    Transport {
        route: String,
        path: String,
        kind: &'static str,
        detail: String,
    },
    #[error("{route} {}: unexpected answer {status}: {detail}", href(.path))]
    Status {
        route: String,
        path: String,
        status: u16,
        detail: String,
    },
    /// A local file: its path and the system's error (in the message, not also as a
    /// source, so an error chain prints it once).
    #[error("{}: {err}", contract::quote::quote(&path.to_string_lossy()))]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// An answer over the size cap: refused when its `Content-Length` says so, before its body
    /// is read, or when its body passes the cap. Never retried (it would be as big again).
    #[error("{route} {}: {detail}", href(.path))]
    TooLarge {
        route: String,
        path: String,
        detail: String,
    },
    /// A walk that passed one of its bounds (`ops::WalkBounds`): the server lists more, or
    /// deeper, than any vault the harness makes, or lists in a cycle.
    #[error("WebDAV walk exceeded {limit} {what} ({bound}): {detail}")]
    Walk {
        /// The bound's value.
        limit: u64,
        /// What it counts (`PROPFIND requests`, `folder levels`).
        what: &'static str,
        /// The bound's name, as it is set.
        bound: &'static str,
        detail: String,
    },
    /// A walk's listing broke the protocol in a way no bound needs to catch (an entry outside
    /// the listed folder, a `..` segment).
    #[error("WebDAV walk: {detail}")]
    Listing { detail: String },
}

/// A request's href for a message: it can carry a server's text (a document id, a feed
/// position), so it is escaped and clipped like any ([`contract::quote::text`]).
fn href(path: &str) -> String {
    contract::quote::text(path)
}

impl DavError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DavError::Io {
            path: path.into(),
            err: source,
        }
    }
}

/// A byte count for messages: `256 MiB`, `4.5 MiB`, `12 bytes`.
pub(crate) fn fmt_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{n} bytes")
    }
}

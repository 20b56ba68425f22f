//! The WebDAV adapter's error type (a file of its own, so `webdav/mod.rs`, which re-exports
//! the adapter, and the adapter's modules never import each other).

use std::path::PathBuf;

/// Errors of the WebDAV adapter. A failed request during a route load is data (counted per
/// status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum DavError {
    #[error("{what}: {reason}")]
    BadMultistatus { what: String, reason: String },
    #[error("{route} {path}: transport error ({kind}): {detail}")]
    Transport {
        route: String,
        path: String,
        kind: &'static str,
        detail: String,
    },
    #[error("{route} {path}: unexpected answer {status}: {detail}")]
    Status {
        route: String,
        path: String,
        status: u16,
        detail: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// An answer over the size cap: refused when its `Content-Length` says so, before its body
    /// is read, or when its body passes the cap. Never retried (it would be as big again).
    #[error("{route} {path}: {detail}")]
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

impl DavError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DavError::Io {
            path: path.into(),
            source,
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

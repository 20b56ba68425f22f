//! The plain HTTP client's error type (a file of its own, so `http/mod.rs`, which re-exports
//! the client, and the client's modules never import each other).

use std::path::PathBuf;

/// Errors of one exchange of the plain HTTP client. A failed request during a route load is
/// data (counted per status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
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
    /// An answer over the size cap: refused when its `Content-Length` says so, before its body
    /// is read, or when its body passes the cap. Never retried (it would be as big again).
    #[error("{route} {}: {detail}", href(.path))]
    TooLarge {
        route: String,
        path: String,
        detail: String,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// A local file: its path and the system's error (in the message, not also as a
    /// source, so an error chain prints it once).
    #[error("{}: {err}", contract::quote::quote(&path.to_string_lossy()))]
    Io { path: PathBuf, err: std::io::Error },
    /// A streamed answer its protocol's reader refused ([`crate::http::BodyReader`]): the
    /// protocol's own error, which it takes back with `downcast`.
    #[error(transparent)]
    Refused(Box<dyn std::error::Error + Send + Sync>),
}

/// A request's href for a message: it can carry a server's text (a document id, a feed
/// position), so it is escaped and clipped like any ([`contract::quote::text`]).
fn href(path: &str) -> String {
    contract::quote::text(path)
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

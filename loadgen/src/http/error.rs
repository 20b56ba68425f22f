//! The plain HTTP client's error type (a file of its own, so `http/mod.rs`, which re-exports
//! the client, and the client's modules never import each other).

use std::path::PathBuf;

/// Errors of one exchange of the plain HTTP client. A failed request during a route load is
/// data (counted per status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
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
    /// An answer over the size cap: refused when its `Content-Length` says so, before its body
    /// is read, or when its body passes the cap. Never retried (it would be as big again).
    #[error("{route} {path}: {detail}")]
    TooLarge {
        route: String,
        path: String,
        detail: String,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A streamed answer its protocol's reader refused ([`crate::http::BodyReader`]): the
    /// protocol's own error, which it takes back with `downcast`.
    #[error(transparent)]
    Refused(Box<dyn std::error::Error + Send + Sync>),
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

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
}

impl DavError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DavError::Io {
            path: path.into(),
            source,
        }
    }
}

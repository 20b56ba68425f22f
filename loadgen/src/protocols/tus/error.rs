//! The tus client's error type (a file of its own, so `tus/mod.rs`, which re-exports the
//! client, and the client's modules never import each other).

use std::path::PathBuf;

/// Errors of the tus client. Each is one line naming the exchange and what the server did.
#[derive(Debug, thiserror::Error)]
pub enum TusError {
    /// An answer that breaks the protocol (an offset that goes backwards, a `Location` off
    /// loopback, a checksum refused on every try): the exchange and the reason.
    #[error("{what}: {reason}")]
    Server { what: String, reason: String },
    /// A read-back that does not match what was uploaded.
    #[error("{what}: {reason}")]
    Mismatch { what: String, reason: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// One exchange failed (transport, status, size cap).
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
}

impl TusError {
    pub(crate) fn server(what: impl Into<String>, reason: impl Into<String>) -> Self {
        TusError::Server {
            what: what.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TusError::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<crate::transfer::TreeError> for TusError {
    fn from(e: crate::transfer::TreeError) -> TusError {
        TusError::Invalid {
            what: e.what,
            reason: e.reason,
        }
    }
}

//! The CouchDB adapter's error type (a file of its own, so the adapter's modules never import
//! each other through `couch/mod.rs`).

use std::path::PathBuf;

use super::wire::BadMessage;
use crate::http::HttpError;

/// Errors of the CouchDB adapter. A failed request during a route load is data (counted per
/// status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum CouchError {
    /// A request failed: transport, status, size cap (the plain HTTP client's errors).
    #[error(transparent)]
    Http(#[from] HttpError),
    /// An answer that does not parse as the message it should be (the message names it).
    #[error("{0}")]
    Message(BadMessage),
    /// An answer that parses but breaks the protocol (a missing chunk, a path outside the
    /// vault, a feed that does not advance).
    #[error("{route}: {detail}")]
    Protocol { route: &'static str, detail: String },
    /// A file of the vault copy: its path and the system's error (the error in the
    /// message, not also as a source, so a chain prints it once).
    #[error("{}: {err}", contract::quote::quote(&path.to_string_lossy()))]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

impl CouchError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CouchError::Io {
            path: path.into(),
            err: source,
        }
    }

    pub(crate) fn protocol(route: &'static str, detail: impl Into<String>) -> Self {
        CouchError::Protocol {
            route,
            detail: detail.into(),
        }
    }
}
impl From<crate::transfer::TreeError> for CouchError {
    fn from(e: crate::transfer::TreeError) -> CouchError {
        CouchError::Invalid {
            what: e.what,
            reason: e.reason,
        }
    }
}

//! The WebDAV adapter's error type (a file of its own, so `webdav/mod.rs`, which re-exports
//! the adapter, and the adapter's modules never import each other).

use std::path::PathBuf;

/// Errors of the WebDAV adapter. A failed request during a route load is data (counted per
/// status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum DavError {
    #[error("{what}: {reason}")]
    BadMultistatus { what: String, reason: String },
    /// A local file: its path and the system's error (in the message, not also as a
    /// source, so an error chain prints it once).
    #[error("{}: {err}", contract::quote::quote(&path.to_string_lossy()))]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// One exchange failed (transport, status, size cap).
    #[error(transparent)]
    Http(crate::http::HttpError),
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
            err: source,
        }
    }
}

impl From<crate::http::HttpError> for DavError {
    /// An exchange's error; a PROPFIND answer the multistatus reader refused comes back as
    /// the adapter's own error it was.
    fn from(e: crate::http::HttpError) -> DavError {
        match e {
            crate::http::HttpError::Refused(inner) => match inner.downcast::<DavError>() {
                Ok(d) => *d,
                Err(other) => DavError::Http(crate::http::HttpError::Refused(other)),
            },
            other => DavError::Http(other),
        }
    }
}

impl From<crate::transfer::TreeError> for DavError {
    fn from(e: crate::transfer::TreeError) -> DavError {
        DavError::Invalid {
            what: e.what,
            reason: e.reason,
        }
    }
}

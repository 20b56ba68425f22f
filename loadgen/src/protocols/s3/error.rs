//! The S3 adapter's error type (a file of its own, so `s3/mod.rs`, which re-exports the
//! adapter, and the adapter's modules never import each other).

use std::path::PathBuf;

/// Errors of the S3 adapter. A failed request during a route load is data (counted per
/// status), never one of these.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// A ListObjectsV2 answer that is not a listing (malformed XML, a DTD, a bound passed).
    #[error("{what}: {reason}")]
    BadListing { what: String, reason: String },
    /// A walk of the listing that passed one of its bounds, or listed what no vault holds (a
    /// key that climbs out of the vault, a continuation token that repeats).
    #[error("{what}: {detail}")]
    Listing { what: String, detail: String },
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
    Http(crate::http::HttpError),
}

impl S3Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        S3Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        S3Error::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

impl From<crate::http::HttpError> for S3Error {
    /// An exchange's error; a listing the streamed reader refused comes back as the adapter's
    /// own error it was.
    fn from(e: crate::http::HttpError) -> S3Error {
        match e {
            crate::http::HttpError::Refused(inner) => match inner.downcast::<S3Error>() {
                Ok(d) => *d,
                Err(other) => S3Error::Http(crate::http::HttpError::Refused(other)),
            },
            other => S3Error::Http(other),
        }
    }
}

impl From<crate::transfer::TreeError> for S3Error {
    fn from(e: crate::transfer::TreeError) -> S3Error {
        S3Error::Invalid {
            what: e.what,
            reason: e.reason,
        }
    }
}

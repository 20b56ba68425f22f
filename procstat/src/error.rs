//! The crate's error type: one line naming the offending file or pid.

/// What went wrong reading `/proc`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file's text did not have the expected shape.
    #[error("cannot parse {what}: {detail}")]
    Parse {
        /// The file, e.g. `/proc/42/task/43/schedstat`.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// The root process of a snapshot does not exist (or exited while being read).
    #[error("process {pid} not found in /proc")]
    NoSuchProcess {
        /// The root pid.
        pid: u32,
    },
    /// A read failed for a reason other than the task having exited.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn parse(what: &str, detail: impl Into<String>) -> Self {
        Error::Parse {
            what: what.to_string(),
            detail: detail.into(),
        }
    }
}

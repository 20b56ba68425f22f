//! The load generator's error type: every variant names the input or route it is about.

use std::path::PathBuf;

/// Errors from the load generator library. A failed request during a route load is *data*
/// (counted per status), never one of these; these end an operation.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("target {url:?}: {reason}")]
    BadTarget { url: String, reason: String },
    #[error("target {url} is not loopback; pass --allow-remote to load a remote server")]
    RemoteRefused { url: String },
    #[error("target {url} is unreachable: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("target {url} is not an {protocol} server: {detail}")]
    NotTheProtocol {
        url: String,
        protocol: &'static str,
        detail: String,
    },
    #[error("setup token rejected by {url} (401 bad_setup_token)")]
    BadSetupToken { url: String },
    #[error(
        "{url} is already set up (409 already_set_up): reuse the state file that enrolled it, or start the server with a fresh data dir"
    )]
    AlreadySetUp { url: String },
    #[error("{route}: transport error ({kind}): {detail}")]
    Transport {
        route: String,
        kind: &'static str,
        detail: String,
    },
    #[error("{route}: unexpected answer {status} {code}: {detail}")]
    Status {
        route: String,
        status: u16,
        code: String,
        detail: String,
    },
    #[error("{route}: malformed answer: {detail}")]
    BadAnswer { route: String, detail: String },
    /// An answer over the read cap: refused from its declared length before its body is
    /// read, or cut off when the body passes the cap. Never retried (the server would only
    /// send it again).
    #[error("{route}: answer refused: {detail}, over the {cap}-byte cap on an answer")]
    AnswerTooLarge {
        route: String,
        cap: u64,
        detail: String,
    },
    /// A feed that lists changes without moving its `seq` past the cursor: following it
    /// would ask for the same page for ever.
    #[error(
        "{route}: server's changes feed did not advance seq past {seq} in {pages} pages (each listed changes)"
    )]
    FeedStalled { route: String, seq: u64, pages: u32 },
    /// A feed walk that passed one of its bounds ([`crate::feed::FeedBounds`]): a feed that
    /// keeps listing new entries under a rising `seq` would otherwise be followed until the
    /// phase's time limit.
    #[error("{route}: {overrun}")]
    FeedOverrun {
        route: String,
        overrun: crate::feed::FeedOverrun,
    },
    /// A local file: its path and the system's error (in the message, not also as a
    /// source, so an error chain prints it once).
    #[error("{}: {err}", contract::quote::quote(&path.to_string_lossy()))]
    Io { path: PathBuf, err: std::io::Error },
    #[error("state file {}: {reason}", path.display())]
    State { path: PathBuf, reason: String },
    #[error(
        "vault path {} from the server is unsafe (empty, absolute, with a NUL, a backslash, or an empty, . or .. segment)",
        contract::quote::quote(.path)
    )]
    UnsafePath { path: String },
    #[error("{path}: SHA-256 mismatch after download (expected {expected}, got {got})")]
    HashMismatch {
        path: String,
        expected: String,
        got: String,
    },
    #[error("{path}: not known to this device")]
    UnknownPath { path: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

impl LoadError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LoadError::Io {
            path: path.into(),
            err: source,
        }
    }
}

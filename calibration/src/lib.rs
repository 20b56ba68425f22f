//! Calibration channels and the variance gate (placeholder; see issue 5).
pub mod cli;

/// The gate refused a recording: the machine was too noisy. Maps to exit code 3.
#[derive(Debug, thiserror::Error)]
#[error("refused: {0}")]
pub struct Refused(pub String);

/// Another recording holds the machine lock and the caller would not wait. Exit code 5.
#[derive(Debug, thiserror::Error)]
#[error("machine lock {0} is held by another recording")]
pub struct LockBusy(pub String);

//! Why an A/B computation could not be done (its own file so the A/B modules, and
//! `ab/mod.rs` that re-exports them, never import each other).

/// Why an A/B computation could not be done; each variant names the offending input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AbError {
    #[error("rounds must be >= 2 and <= {max}, got {rounds}")]
    BadRounds { rounds: usize, max: usize },
    #[error("{what}: lengths differ ({left} vs {right})")]
    LengthMismatch {
        what: &'static str,
        left: usize,
        right: usize,
    },
    #[error("{what} holds a non-finite value in round {round}")]
    NonFinite { what: &'static str, round: usize },
    #[error("no rounds to analyse")]
    NoRounds,
    #[error("tau must be a finite fraction >= 0, got {tau}")]
    BadTau { tau: f64 },
    #[error(transparent)]
    Stats(#[from] crate::stats::StatsError),
}

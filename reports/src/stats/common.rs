//! What every statistic shares: the error type, the input check and the normal CDF (a file
//! of their own, so `stats/mod.rs`, which re-exports the statistics, and the statistics never
//! import each other).

/// Why a statistic could not be computed; the variant names the offending input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} holds a non-finite value at index {index}")]
    NonFinite { what: &'static str, index: usize },
    #[error("{what} must be within {range}, got {value}")]
    OutOfRange {
        what: &'static str,
        range: &'static str,
        value: f64,
    },
    #[error("{what} has {len} values; the limit is {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{what}: lengths differ ({left} vs {right})")]
    LengthMismatch {
        what: &'static str,
        left: usize,
        right: usize,
    },
}

/// Reject empty or non-finite input once, so the algorithms below can assume clean data.
pub(crate) fn check_finite(what: &'static str, xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::Empty { what });
    }
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NonFinite { what, index }),
        None => Ok(()),
    }
}

/// Standard normal CDF via erfc, accurate in the tails (unlike `1 - cdf`).
pub(crate) fn pnorm(z: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-z / std::f64::consts::SQRT_2)
}

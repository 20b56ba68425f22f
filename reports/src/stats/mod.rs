//! Paired statistics for A/B comparisons (issue 7): pure functions over slices, no I/O, no clock.
//!
//! statrs supplies the distributions; what it lacks (the Wilcoxon signed-rank test, the
//! Hodges–Lehmann interval, sign-flip and relabelling permutation tests, Benjamini–Hochberg)
//! is written here and tested against R's documented algorithm, scipy, and textbook data.

mod describe;
mod multiple;
mod order;
mod permutation;
mod power;
mod signrank;
mod wilcoxon;

pub use describe::{cv, mad, mean, median, sd};
pub use multiple::benjamini_hochberg;
pub use order::{OrderEffect, order_effect};
pub use permutation::{PermutationMethod, PermutationTest, sign_flip_test};
pub use power::min_detectable_effect;
pub use signrank::{psignrank, qsignrank};
pub use wilcoxon::{
    CiMethod, EXACT_MAX_N, HodgesLehmann, MAX_HL_N, PMethod, SignedRankTest, hodges_lehmann,
    signed_rank_test,
};

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

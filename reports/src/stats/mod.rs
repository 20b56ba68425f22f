//! Paired statistics for A/B comparisons: pure functions over slices, no I/O, no clock.
//!
//! statrs supplies the distributions; what it lacks (the Wilcoxon signed-rank test, the
//! Hodges–Lehmann interval, sign-flip and relabelling permutation tests, Benjamini–Hochberg)
//! is written here and tested against R's documented algorithm, scipy, and textbook data.

mod common;
mod describe;
mod multiple;
mod order;
mod permutation;
mod power;
mod signrank;
mod wilcoxon;

pub use common::StatsError;
pub use describe::{cv, mad, mean, median, range, sd};
pub use multiple::benjamini_hochberg;
pub use order::{OrderEffect, order_effect};
pub use permutation::{PermutationMethod, PermutationTest, sign_flip_test};
pub use power::min_detectable_effect;
pub use signrank::{psignrank, qsignrank};
pub use wilcoxon::{
    CiMethod, EXACT_MAX_N, HodgesLehmann, MAX_HL_N, PMethod, SignedRankTest, hodges_lehmann,
    signed_rank_test,
};

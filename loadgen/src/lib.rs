//! The signed load generator (placeholder; see issue 4).
pub mod cli;

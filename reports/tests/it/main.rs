//! Integration tests of the reports crate: statistics against fixed vectors, the A/B analysis.

mod ab_analysis;
mod ab_rules;
mod stats_vectors;

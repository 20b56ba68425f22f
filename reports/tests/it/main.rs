//! Integration tests of the reports crate: statistics against fixed vectors, the A/B analysis, change points over histories.

mod ab_analysis;
mod ab_rules;
mod otava;
mod stats_vectors;
mod trend;

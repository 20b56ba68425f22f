//! Integration tests of the reports crate: statistics against fixed vectors, the A/B analysis.

mod stats_vectors;

//! The contract of vaultbench, in the manner of `nextest-metadata`: every persisted document
//! as a serde type (the `load` state file too), the kind/format-version check, the histogram codec, the metric-key
//! grammar and metric classes, the exit codes, the small parsers every command shares, and the quoting of a server's
//! text for an error line (`quote`).
//!
//! Pure: no file system, no clock, no RNG. It sits at the bottom of the crate star:
//! `calibration`, `reports`, `scenarios` and `harness` read and write through it, and
//! nothing here depends on them.

pub mod ab;
pub mod bisect;
pub mod class;
pub mod exit;
pub mod fault;
pub mod format;
pub mod gate;
pub mod histogram;
pub mod history;
pub mod key;
pub mod ledger;
pub mod machine;
pub mod noise;
pub mod parse;
pub mod profile;
pub mod protocol;
pub mod quote;
pub mod reference;
pub mod schema;
pub mod state;
pub mod time;
pub mod trend;

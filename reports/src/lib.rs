//! The persisted schema, statistics and renderers.
//!
//! Pure: no I/O, no clock. The harness reads and writes files; this crate gives them meaning.

pub mod ab;
pub mod bisect;
pub mod charts;
pub mod comparability;
pub mod compare;
pub mod export;
pub mod flame;
pub mod fmt;
pub mod growth;
mod glyphs;
pub mod recording;
pub mod render;
pub mod schema;
pub mod stats;
pub mod trend;

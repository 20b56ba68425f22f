//! The persisted formats, re-exported from the `contract` crate so `reports::schema::*` keeps
//! reading as before: the recording's documents (`contract::schema`) and the A/B result
//! (`contract::ab`: `AbResult`, `AbRound`, `AbSample`, `AbExact`).

pub use contract::ab::{AbExact, AbResult, AbRound, AbSample};
pub use contract::schema::*;

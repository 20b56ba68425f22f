//! The exit codes of `vaultbench`: the contract crate owns and documents them
//! (`contract::exit`); this module keeps the harness's `crate::exit::*` paths.

pub use contract::exit::*;

//! One sample: the parent side spawns a fresh `vaultbench sample` process with a plan; the
//! child side starts the target server, drives the scenario's phases and prints the result.

pub mod child;
pub mod parent;
pub mod phases;
pub mod target;

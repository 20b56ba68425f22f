//! One sample: the plan; the runner seam the loops call; the parent side that spawns a fresh
//! `vaultbench sample` process; the child side that starts the target server (`target`),
//! drives the scenario's phases (`phases`, or `webdav_phases` for a WebDAV scenario) and prints
//! the result.

pub mod child;
pub mod crash;
pub mod parent;
pub mod phases;
pub mod plan;
pub mod runner;
pub mod target;
pub mod webdav_phases;

//! Preparing a run before any sample: the scenario, the cached vault on disk, the target.

pub mod vault;

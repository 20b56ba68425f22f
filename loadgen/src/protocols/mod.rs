//! Every protocol the generator speaks, one folder each. A protocol's folder holds its
//! client, its whole-vault operations and its route load; what every protocol shares (the
//! plain HTTP client, the route-load driver, transfer reports, feed bounds, the target) lives
//! outside this folder. Which protocols exist, and what each can do, is the harness's one
//! registry (`harness/src/protocols.rs`).

pub mod couch;
pub mod obsync;
pub mod webdav;

//! The harness's one integration-test binary: the `vaultbench` CLI driven as a user would.

mod ab;
mod common;
mod cost;
mod layout;
mod record;
mod report;
mod vault;
mod webdav;

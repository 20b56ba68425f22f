//! The harness's one integration-test binary: the `vaultbench` CLI driven as a user would.

mod ab;
mod common;
mod crash;
mod layout;
mod record;
mod report;
mod vault;
mod webdav;

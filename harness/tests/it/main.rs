//! The harness's one integration-test binary: the `vaultbench` CLI driven as a user would.

mod ab;
mod calibrate;
mod common;
mod cost;
mod crash;
mod load;
mod record;
mod reference_pages;
mod report;
mod vault;
mod webdav;

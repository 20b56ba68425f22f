//! The harness's one integration-test binary: the `vaultbench` CLI driven as a user would.

mod ab;
mod calibrate;
mod common;
mod couch;
mod couch_hostile;
mod fanout;
mod cost;
mod crash;
mod flags;
mod growth;
mod git;
mod load;
mod locust;
mod mcp;
mod own_client;
mod record;
mod s3;
mod reference_pages;
mod scenarios_cmd;
mod shard;
mod user_vault;
mod report;
mod trend;
mod twin;
mod vault;
mod webdav;

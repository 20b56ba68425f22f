//! The load generator's one integration-test binary: end to end against the in-process
//! reference server over loopback (port 0, temp dirs), the clients against fake servers that
//! answer badly on purpose (`hostile_*`), a real tus server (`tus_e2e`), MCP servers over stdio (`mcp_e2e`, with the test
//! server in `mcp/`), and CI-sized property tests of the parsers (the
//! fuzz targets in `fuzz/` run the same properties for longer). The `vaultbench load` CLI is
//! tested in the harness.

mod e2e;
mod h1_answer;
mod hostile_couch;
mod hostile_couch_props;
mod hostile_dav;
mod hostile_mcp;
mod hostile_obsync;
mod hostile_obsync_props;
mod hostile_s3;
mod hostile_tus;
mod locust_props;
mod mcp_e2e;
mod mcp_http;
mod mcp_props;
mod rss;
mod s3_crypt;
mod tus_e2e;
mod webdav_e2e;
mod webdav_fixtures;

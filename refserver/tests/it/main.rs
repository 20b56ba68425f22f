//! Integration tests of the reference server over loopback (127.0.0.1:0, temp dirs).

mod bad_input;
mod cli;
mod client;
mod codecs;
mod durability;
mod e2e;
mod full_disk;
mod group_commit;
mod hardening;
mod stalls;

use refserver::{ServerConfig, TestServer};

/// A fresh server on a fresh temp dir (kept alive by the returned guard).
pub fn start(group_commit: bool) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.group_commit = group_commit;
    (TestServer::start(cfg).expect("server starts"), dir)
}

/// A 32-hex file id from a small number.
pub fn file_id(n: u32) -> String {
    format!("{n:032x}")
}

//! The helpers vaultbench's integration tests share, so each is written once: the
//! `vaultbench` command isolated in a home directory and its one-line errors, a reference
//! server and seeded vaults on disk, the processes a run left behind, `openssl` decrypting what the S3 adapter encrypted, and
//! the request reader
//! of the fake servers that answer badly on purpose. A dev-dependency only.

mod cli;
mod openssl;
mod procs;
mod request;
mod vault;

pub use cli::{LOOSE_GATE, isolated, one_line_error, shared_home};
pub use openssl::openssl_decrypt;
pub use procs::procs_with;
pub use request::{Request, read_request};
pub use vault::{server, tree, write_small_vault, write_vault};

/// Waits (at most 10 s) until process `pid` is gone, or a zombie left for whoever inherited
/// it to reap; panics naming it otherwise.
pub fn wait_gone(pid: u32) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| {
                t.rsplit_once(')')
                    .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    };
    while alive() {
        assert!(std::time::Instant::now() < until, "{pid} still alive");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

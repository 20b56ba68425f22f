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

//! Whole-vault and single-file device operations, one module per resource: `push` (chunk,
//! `chunks/exists`, PUT the missing chunks, post the version), `pull` (feed pages + batched
//! chunk reads, atomic SHA-verified writes, idle resync), `rename` (delete, rename),
//! `long_poll` (the change feed), `mirror` (push and pull that make one side equal the
//! other, deletes included, for a client that keeps no state between runs); `local` holds the disk side and the client conventions,
//! `report` what a transfer measured.
//!
//! Client conventions (documented in the crate root): file_id = first 16 bytes of
//! SHA-256("vaultbench/file\n" + path at creation), kept on rename; chunks are fixed 1 MiB
//! cuts, sid = SHA-256(chunk); `manifest_ct` = base64 of a JSON
//! [`ClientManifest`](protocol::wire::ClientManifest).

mod local;
mod long_poll;
mod mirror;
mod pull;
mod push;
mod rename;

pub use crate::transfer::{Checkpoint, PushOpts, PushedVersion, TransferReport};
pub(crate) use local::safe_rel_path;
pub use local::{decode_manifest, file_id_for};
pub(crate) use long_poll::{FeedCursor, check_page};
pub use long_poll::{wait_changes, wait_changes_held};
pub use mirror::{mirror_pull, mirror_push};
pub(crate) use pull::parse_multipart;
pub use pull::{fetch_and_write, get_chunk, list_changes, pull_vault, resync};
pub use push::{Interrupted, push_file, push_vault, push_vault_counted, resume_vault};
pub use rename::{delete_file, rename_path};

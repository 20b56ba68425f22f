//! Protocol limits (protocol page, "Conventions"): sizes, counts and time windows both sides
//! enforce. A file of its own because `sign` checks timestamps against [`TS_SKEW_S`] while the
//! crate root re-exports `sign`.

/// Request headers, all together.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// JSON request bodies.
pub const MAX_JSON_BODY: usize = 4 * 1024 * 1024;
/// Chunk bodies: 8 MiB + 16 bytes (an AEAD tag on the real client).
pub const MAX_CHUNK_BODY: usize = 8 * 1024 * 1024 + 16;
/// Timestamps outside now ± this many seconds are stale.
pub const TS_SKEW_S: i64 = 300;
/// A nonce is refused as replayed for this many seconds after first use.
pub const NONCE_WINDOW_S: i64 = 600;
/// `sids` in one `POST /v1/chunks/exists`.
pub const MAX_EXISTS_SIDS: usize = 4096;
/// `sids` in one `POST /v1/chunks/get`.
pub const MAX_GET_SIDS: usize = 64;
/// The real client plugin reads at most three chunks per batch.
pub const CLIENT_GET_BATCH: usize = 3;
/// The real client plugin uploads four files at a time.
pub const CLIENT_UPLOAD_CONCURRENCY: usize = 4;
/// Heads per file before `409 too_many_heads`.
pub const MAX_HEADS: usize = 64;
/// `wait` on `/v1/changes`, seconds.
pub const MAX_WAIT_S: u64 = 55;
/// `limit` on `/v1/changes`.
pub const MAX_CHANGES_LIMIT: usize = 1000;
/// Largest chunk the load generator cuts files into (protocol page: "≤ 1 MiB").
pub const CLIENT_CHUNK_BYTES: usize = 1024 * 1024;

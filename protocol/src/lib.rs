//! The obsync wire protocol v1, as the load generator and the reference server both speak it.
//!
//! One implementation of the parts that must agree byte for byte on both sides: the
//! routes with their methods and labels ([`route`]), the
//! canonical string and HMAC device signatures ([`sign`]), the server-recomputed
//! `version_id` ([`version`]), the JSON bodies ([`wire`]) and the error codes ([`error`]).
//! The source is `shared/protocol-obsync-v1.md` (obsync `docs/protocol.md`, 2026-09-07).
//! No I/O and no clock: timestamps and nonces are parameters.

pub mod error;
pub mod route;
pub mod sign;
pub mod version;
pub mod wire;

pub use error::ErrorCode;
pub use route::{Matched, Route, RouteMethod};
pub use sign::{
    DeviceCredentials, SignedHeaders, canonical_string, sha256_hex, sign_request, write_canonical,
};
pub use version::version_id;

/// Request header carrying the device id (32 hex).
pub const H_DEVICE: &str = "x-obsync-device";
/// Request header carrying the unix timestamp in seconds.
pub const H_TS: &str = "x-obsync-ts";
/// Request header carrying the request nonce (32 hex, fresh per request).
pub const H_NONCE: &str = "x-obsync-nonce";
/// Request header carrying the hex HMAC-SHA-256 signature.
pub const H_SIG: &str = "x-obsync-sig";
/// Multipart part header naming the chunk.
pub const H_PART_SID: &str = "x-obsync-sid";
/// Multipart part header marking a missing chunk.
pub const H_PART_MISSING: &str = "x-obsync-missing";

/// Protocol limits (protocol page, "Conventions").
pub mod limits {
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
}

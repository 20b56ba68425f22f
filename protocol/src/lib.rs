//! The obsync wire protocol v1, as the load generator and the reference server both speak it.
//!
//! One implementation of the parts that must agree byte for byte on both sides: the
//! routes with their methods and labels ([`route`]), the
//! canonical string and HMAC device signatures ([`sign`]), the server-recomputed
//! `version_id` ([`version`]), the JSON bodies ([`wire`]) and the error codes ([`error`]).
//! The source is obsync's published wire protocol v1 (the protocol document in obsync's repository, 2026-09-07),
//! which this crate's comments call "the protocol page";
//! `docs/src/protocol/obsync-v1.md` in this repository describes the protocol as implemented
//! here, and where it differs from that text.
//! No I/O and no clock: timestamps and nonces are parameters.

pub mod error;
pub mod limits;
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

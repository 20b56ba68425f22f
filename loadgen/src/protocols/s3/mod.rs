//! The S3 protocol adapter: a client shaped like Remotely Save's S3 backend (the plugin's
//! `fsS3.ts` over the AWS SDK: ListObjectsV2 following continuation tokens, PutObject then
//! HeadObject, GetObject, DeleteObject), every request signed with AWS Signature V4 here and
//! sent by the generator's own HTTP client, path-style (`http://HOST:PORT/BUCKET/KEY`) on
//! loopback; whole-vault operations on top of it, and a route load over the same lean HTTP/1.1
//! connection every protocol's closed loop uses.
//!
//! Read in this order: [`sign`] (SigV4, pure) → [`listing`] (parse ListObjectsV2 answers) →
//! [`client`] (one signed request: plan, send, time, count) → [`ops`] (push, walk, pull,
//! resync, rename, poll) → [`route`] (route load).
//!
//! # Client conventions
//! - A key is the vault path (`Wiki/Café crème.md`), never normalised; on the wire each
//!   segment is percent-encoded as UTF-8 bytes, everything but RFC 3986's unreserved
//!   characters, which is also SigV4's canonical URI. Folders are not objects: they exist as
//!   the prefixes of their files' keys, as the plugin writes them by default; a scenario can
//!   ask for the plugin's "generate folder objects" (a zero-byte `FOLDER/` key per folder).
//! - Every request carries `x-amz-date`, `x-amz-content-sha256` (the SHA-256 of its body)
//!   and `Cache-Control: no-cache` (the plugin's SDK middleware adds it); PutObject sends the
//!   extension's Content-Type and `x-amz-meta-mtime`/`x-amz-meta-ctime` in seconds.
//! - A listing walk follows `NextContinuationToken` until `IsTruncated` is false and is
//!   bounded by objects and pages (the `--feed-max-*` flags, [`LIST_DEFAULT`]); a token that
//!   repeats, a truncated page without one and a key that could climb out of the vault end it
//!   with an error naming what the server did.
//! - Operations that must succeed retry a transport error or any 5xx up to three attempts
//!   within one deadline, as the AWS SDK's standard retry mode does (the signature stays
//!   valid: S3 allows 15 minutes of skew); a retried answer is still counted under its
//!   status, so a server that answers 500 shows in the phase's `errors` key.

pub mod client;
pub mod crypt;
mod error;
pub mod listing;
pub mod ops;
pub mod route;
pub mod sign;

pub use client::{Head, S3Client};
pub use error::S3Error;
pub use listing::{Object, PageEnd, parse_listing_each};
pub use ops::{
    Listing, PollReport, PushOpts, poll_until_changed, pull_vault, push_vault, rename, resync, walk,
};
pub use route::{S3Route, S3RouteLoadConfig, S3RouteLoadReport, run_s3_route_load};
pub use sign::Credentials;

use crate::feed::FeedBounds;
use crate::launch::{Ready, StatusMatch, TargetDef};
use crate::protocols::spec::Preset;

/// The bucket a target's vault lives in when its definition names none.
pub const DEFAULT_BUCKET: &str = "vaultbench";

/// The bounds of one listing walk. A page holds up to 1,000 keys (S3's `max-keys` default,
/// which the plugin keeps), so `vault100k` (100,000 notes and their attachments, no folder
/// objects) lists in about 100 pages:
/// - objects: 250,000 is 2.5 times `vault100k`'s files; every listed object is kept for the
///   pull (a key and its ETag, about 200 bytes), so the bound keeps a walk's record near
///   50 MB;
/// - pages: 4,096 is 40 times `vault100k`'s and stops a server that pages by one key after
///   4,096 requests, not 250,000;
/// - bytes: not read (the walk holds one page's answer at a time, capped like any answer).
pub const LIST_DEFAULT: FeedBounds = FeedBounds {
    max_entries: 250_000,
    max_pages: 4096,
    max_bytes: FeedBounds::HELD_BYTES_DEFAULT,
};

/// What the rest of the generator and the harness's registry know of this protocol.
pub const SPEC: crate::protocols::spec::Spec = crate::protocols::spec::Spec {
    name: "s3",
    aliases: &[],
    about: "S3-compatible object storage, as the Remotely Save plugin uses it",
    ready,
    feed: Some(LIST_DEFAULT),
    routes: || S3Route::ALL.iter().map(|r| r.name()).collect(),
    presets: &[
        Preset {
            name: "moto-s3",
            text: include_str!("../../../targets/moto-s3.toml"),
        },
        Preset {
            name: "s3rver",
            text: include_str!("../../../targets/s3rver.toml"),
        },
    ],
    database: None,
    former_keys: &[],
};

/// `GET /` answered with any HTTP status: the server is up. An S3 server answers an
/// unsigned request with 403 (MinIO, Garage), a bucket list (moto) or an error naming the
/// missing signature (s3rver); which one does not matter.
fn ready(_def: &TargetDef) -> Ready {
    Ready::Http {
        method: "GET".into(),
        path: "/".into(),
        status: StatusMatch::Any,
    }
}

/// The bucket of `def`: the first segment of its root (`root = "/notes/"`), else
/// [`DEFAULT_BUCKET`].
pub fn bucket_of(def: &TargetDef) -> String {
    def.root()
        .split('/')
        .find(|s| !s.is_empty())
        .unwrap_or(DEFAULT_BUCKET)
        .to_owned()
}

/// The credentials of `def` (`auth = "ACCESS:SECRET"`), else `vaultbench:vaultbench`.
pub fn credentials_of(def: &TargetDef) -> Credentials {
    match &def.auth {
        Some(a) => Credentials {
            access_key: a.user.clone(),
            secret_key: a.password.clone(),
        },
        None => Credentials {
            access_key: "vaultbench".into(),
            secret_key: "vaultbench".into(),
        },
    }
}

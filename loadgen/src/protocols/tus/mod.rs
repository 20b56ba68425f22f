//! The tus adapter: the tus 1.0.0 resumable-upload protocol (tus.io), as file servers take
//! uploads over it (`@tus/server`, tusd, and the servers built on them). An import of a vault
//! is one upload per file: a creation `POST` with `Upload-Length` and `Upload-Metadata` (the
//! vault path, Base64), carrying the first chunk when the server offers
//! creation-with-upload, then `PATCH`es with `Upload-Offset`; a cut `PATCH` resumes from the
//! offset a `HEAD` answers. tus has no listing and no change feed, so a tus target runs
//! push-type phases only; what was pushed is verified by reading each upload back.
//!
//! Read in this order: [`header`] (the headers, parsed strictly; pure) → [`client`] (one
//! exchange per route: discovery, upload with resume, read-back, termination) → [`ops`]
//! (import a vault, read it back); [`cut`] is the seeded hop that cuts `PATCH` bodies for the
//! resume check.
//!
//! # Client conventions
//! - Discovery first: `OPTIONS` of the collection must list version 1.0.0 and the `creation`
//!   extension; `creation-with-upload` makes a note one round trip, else two (`POST`, then
//!   `PATCH`); `checksum` with `sha1` among `Tus-Checksum-Algorithm` adds
//!   `Upload-Checksum: sha1 …` to every body; `Tus-Max-Size` refuses a larger file before it
//!   is sent.
//! - Every request but `OPTIONS` carries `Tus-Resumable: 1.0.0`; bodies are
//!   `application/offset+octet-stream` in chunks of at most [`client::DEFAULT_CHUNK`] unless
//!   set.
//! - A `Location` must be on the target itself (its `host:port`, or a path from `/`); an
//!   offset must be a plain decimal, never go backwards, past the length or past what was
//!   sent; `460` answers and resumes are bounded ([`client::MAX_MISMATCHES`],
//!   [`client::MAX_RESUMES`]); every exchange has its deadline.

pub mod client;
pub mod cut;
mod error;
pub mod header;
pub mod ops;

pub use client::{TusClient, TusRoute, Uploaded};
pub use error::TusError;
pub use header::Capabilities;
pub use ops::{ImportOpts, Imported, Upload, import_vault, metadata_of, read_back, verify_one};

use crate::launch::{Ready, StatusMatch, TargetDef};
use crate::protocols::spec::Preset;

/// The collection a target's uploads are created at when its definition names none
/// (`@tus/server`'s and tusd's usual path).
pub const DEFAULT_COLLECTION: &str = "/files/";

/// What the rest of the generator and the harness's registry know of this protocol.
pub const SPEC: crate::protocols::spec::Spec = crate::protocols::spec::Spec {
    name: "tus",
    aliases: &[],
    about: "tus 1.0.0 resumable uploads (an import: creation, PATCH chunks, resume by HEAD)",
    ready,
    feed: None,
    routes: || TusRoute::ALL.iter().map(|r| r.name()).collect(),
    presets: &[Preset {
        name: "tus-node",
        text: include_str!("../../../targets/tus-node.toml"),
    }],
    database: None,
    former_keys: &[],
};

/// `OPTIONS` of the collection answered 2xx: the server is up and routes tus.
fn ready(def: &TargetDef) -> Ready {
    Ready::Http {
        method: "OPTIONS".into(),
        path: collection_of(def),
        status: StatusMatch::Class(2),
    }
}

/// The collection of `def`: its root (`root = "/files/"`, `--tus-path`) unless that is `/`,
/// else [`DEFAULT_COLLECTION`].
pub fn collection_of(def: &TargetDef) -> String {
    match def.root() {
        "/" => DEFAULT_COLLECTION.to_owned(),
        r => r.to_owned(),
    }
}

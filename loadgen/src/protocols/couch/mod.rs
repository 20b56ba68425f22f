//! The CouchDB protocol adapter, shaped like Self-hosted LiveSync: the vault replicated into
//! a CouchDB database as LiveSync's documents (chunks as `h:` leaf documents, a metadata
//! document per file listing its chunks), by the PouchDB replicator's requests (`_revs_diff`,
//! `_bulk_docs` with `new_edits: false`, `_changes` with `style=all_docs` and long polls,
//! `_bulk_get`, `_all_docs` by keys, checkpoints in `_local` documents), over the plain HTTP
//! client with Basic auth ([`crate::http::HttpClient`]), and a route
//! load of the replicator's main routes through the shared driver.
//!
//! Read in this order: [`xxh64`] and [`chunk`] (a file as LiveSync's documents) → [`wire`]
//! (the messages as they arrive, parsed under the JSON value budget) → [`client`] (one
//! request) → [`ops`] (set-up, push, pull, resync, live replication, rename) → [`route`].

pub mod chunk;
pub mod client;
mod error;
pub mod ops;
pub mod route;
pub mod wire;
pub mod xxh64;

pub use client::CouchClient;
pub use error::CouchError;
pub use ops::{FileState, Pulled, Replica, Writer, Written, setup};
pub use route::{CouchRoute, CouchRouteLoadConfig, CouchRouteLoadReport, run_couch_route_load};

use crate::feed::FeedBounds;
use crate::launch::{Ready, StatusMatch, TargetDef};
use crate::protocols::spec::Preset;

/// The `_changes` feed's walk bounds. The replicator reads 25 rows a page (LiveSync's `batch_size`), and a file is a metadata document and its
/// chunks. `vault100k` through CouchDB lists 1,167,567 documents (1,067,567 chunks) in
/// 46,703 pages; 2^22 = 4,194,304 entries is 3.6 times that and 2^17 = 131,072 pages 2.8
/// times (a feed of one-row pages stops after 131,072 requests). `personal-couchdb`, the
/// largest CouchDB scenario, lists 20,366 documents in 815 pages. (Counted by cutting the
/// generated vaults with [`crate::protocols::couch::chunk::split`]: the slow test
/// `the_default_bounds_hold_personal_couchdb_and_vault100k` in `tests/it/hostile_couch.rs`.)
/// (The default bound on a feed that keeps inventing entries; a user's `--feed-max-*` flags
/// replace either figure.)
pub const FEED_DEFAULT: FeedBounds = FeedBounds {
    max_entries: 1 << 22,
    max_pages: 1 << 17,
    max_bytes: FeedBounds::HELD_BYTES_DEFAULT,
};

/// What the rest of the generator and the harness's registry know of this protocol.
pub const SPEC: crate::protocols::spec::Spec = crate::protocols::spec::Spec {
    name: "couchdb",
    aliases: &[],
    about: "CouchDB replication, as Self-hosted LiveSync uses it",
    ready,
    feed: Some(FEED_DEFAULT),
    routes: || CouchRoute::ALL.iter().map(|r| r.name()).collect(),
    presets: &[
        Preset {
            name: "pouchdb-server",
            text: include_str!("../../../targets/pouchdb-server.toml"),
        },
        Preset {
            name: "pouchdb-memory",
            text: include_str!("../../../targets/pouchdb-memory.toml"),
        },
    ],
    database: Some(database_name),
    former_keys: &[],
};

/// CouchDB's rule for database names (its API reference, "PUT /{db}"): a lower-case letter,
/// then lower-case letters, digits and `_$()+-`.
fn database_name(db: &str) -> Result<(), String> {
    let ok = db.starts_with(|c: char| c.is_ascii_lowercase())
        && db
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{db:?} is not a CouchDB database name (a lower-case letter, then lower-case letters, digits and _$()+-)"
        ))
    }
}

/// CouchDB's welcome at the server's root.
fn ready(_: &TargetDef) -> Ready {
    Ready::Http {
        method: "GET".into(),
        path: "/".into(),
        status: StatusMatch::Code(200),
    }
}

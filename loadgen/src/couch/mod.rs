//! The CouchDB protocol adapter, shaped like Self-hosted LiveSync: the vault replicated into
//! a CouchDB database as LiveSync's documents (chunks as `h:` leaf documents, a metadata
//! document per file listing its chunks), by the PouchDB replicator's requests (`_revs_diff`,
//! `_bulk_docs` with `new_edits: false`, `_changes` with `style=all_docs` and long polls,
//! `_bulk_get`, `_all_docs` by keys, checkpoints in `_local` documents), over the plain HTTP
//! client with Basic auth the WebDAV adapter uses ([`crate::webdav::DavClient`]), and a route
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

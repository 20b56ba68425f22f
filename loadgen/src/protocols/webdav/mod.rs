//! The WebDAV protocol adapter: a client shaped like the Remotely Save plugin's sync (it
//! lists with PROPFIND and moves files with MKCOL, PUT, GET, MOVE and DELETE through the
//! `webdav` npm client), whole-vault operations on top of it, a route load over the same lean
//! HTTP/1.1 connection the signed client uses, and the three third-party servers the harness
//! can start as targets.
//!
//! Read in this order: [`presets`] (credentials, readiness, a started server; the presets themselves are target files read by [`crate::launch`]) →
//! [`multistatus`] (parse PROPFIND answers) → [`client`] (one request: encode, send, time,
//! count) → [`ops`] (push, walk, pull, resync, rename, poll) → [`route`] (route load).
//!
//! # Client conventions
//! - Vault paths are `/`-separated and relative (`Wiki/Café crème.md`); on the wire each
//!   segment is percent-encoded as UTF-8 bytes, everything but RFC 3986's unreserved
//!   characters, and collections end in `/` (nginx's dav module refuses MKCOL, DELETE and
//!   MOVE of a collection without it). Names are never normalised.
//! - PROPFIND is sent as the `webdav` npm client's `getDirectoryContents` sends it: no body
//!   (RFC 4918 §9.1: an empty body means allprop), `Accept: text/plain`, `Depth: 1` or
//!   `Depth: infinity`.
//! - Push: MKCOL every folder (parents first, one at a time), then PUT the files with four
//!   in flight, the same figure the signed client uses. Pull: a PROPFIND walk, then GET with
//!   four in flight, each answer's length checked against the listing.
//! - Operations that must succeed retry a transport error or a 503 up to three attempts
//!   with 50/100 ms back-off, as the signed client does, all within one deadline; an answer
//!   over the size cap, a malformed one and a timeout are not retried.
//! - A walk lists each folder once and stops at its [`WalkBounds`] (requests, entries,
//!   depth, path length), naming the bound.

pub mod client;
mod error;
pub mod multistatus;
pub mod ops;
pub mod presets;
pub mod route;

pub use crate::http::{Answer as DavAnswer, BasicAuth};
pub use crate::walk::WalkBounds;
pub use client::{DavClient, Depth};
pub use error::DavError;
pub use multistatus::{DavEntry, parse_multistatus, parse_multistatus_each};
pub use ops::{
    Listing, PollReport, poll_until_changed, pull_vault, push_vault, push_vault_with, rename,
    resync, walk,
};
pub use presets::{RunningServer, ServerCommand, probe_ready};
pub use route::{DavRoute, DavRouteLoadConfig, DavRouteLoadReport, run_dav_route_load};

use crate::launch::{Ready, StatusMatch, TargetDef};
use crate::protocols::spec::Preset;

/// What the rest of the generator and the harness's registry know of this protocol.
pub const SPEC: crate::protocols::spec::Spec = crate::protocols::spec::Spec {
    name: "webdav",
    aliases: &[],
    about: "WebDAV, as the Remotely Save plugin uses it",
    ready,
    feed: None,
    routes: || DavRoute::ALL.iter().map(|r| r.name()).collect(),
    presets: &[
        Preset {
            name: "apache-webdav",
            text: include_str!("../../../targets/apache-webdav.toml"),
        },
        Preset {
            name: "nginx-webdav",
            text: include_str!("../../../targets/nginx-webdav.toml"),
        },
        Preset {
            name: "rclone-webdav",
            text: include_str!("../../../targets/rclone-webdav.toml"),
        },
    ],
    database: None, // The vault's path was first a WebDAV-only key.
    former_keys: &[("webdav_root", "root")],
};

/// `OPTIONS` of the vault's collection (with the credentials), any 2xx.
fn ready(def: &TargetDef) -> Ready {
    Ready::Http {
        method: "OPTIONS".into(),
        path: def.root().to_owned(),
        status: StatusMatch::Class(2),
    }
}

#[cfg(test)]
mod tests {
    use crate::protocols::target_from_text;

    #[test]
    fn a_target_file_with_the_former_webdav_root_key_still_reads() {
        let old =
            target_from_text("command = \"srv {addr}\"\nwebdav_root = \"/v/\"\n", "o").unwrap();
        assert_eq!(old.root(), "/v/");
        let e = target_from_text(
            "command = \"srv {addr}\"\nwebdav_root = \"/v/\"\nroot = \"/w/\"\n",
            "o",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("webdav_root") && e.contains("former name of `root`"),
            "{e}"
        );
    }
}

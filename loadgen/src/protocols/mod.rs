//! Every protocol the generator speaks, one folder each. A protocol's folder holds its
//! client, its whole-vault operations and its route load; what every protocol shares (the
//! plain HTTP client, the route-load driver, transfer reports, feed bounds, the target) lives
//! outside this folder. Which protocols exist, and what each can do, is the harness's one
//! registry (`harness/src/sample/protocols/`).

pub mod couch;
pub mod obsync;
pub mod s3;
pub mod webdav;

use crate::feed::FeedBounds;
use crate::launch::{Ready, TargetDef};

/// What the generator knows of one protocol, beside its folder's code: the facts the launch
/// of a target and a feed walk need, and what the harness's registry lists. One `SPEC` per
/// protocol folder.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The canonical name (`--protocol`, `protocol =` in scenario and target files).
    pub name: &'static str,
    /// Other accepted spellings.
    pub aliases: &'static [&'static str],
    /// One line for help and lists.
    pub about: &'static str,
    /// The readiness check of a target that sets none.
    pub ready: fn(&TargetDef) -> Ready,
    /// The walk bounds of its changes feed; `None`: it has no feed.
    pub feed: Option<FeedBounds>,
    /// The routes its route load knows, by name.
    pub routes: fn() -> Vec<&'static str>,
}

impl Spec {
    /// The readiness check in force for `def`: its own, else this protocol's default.
    pub fn ready_of(&self, def: &TargetDef) -> Ready {
        match &def.ready {
            Some(r) => r.clone(),
            None => (self.ready)(def),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_without_a_check_gets_its_protocols_default() {
        let webdav = TargetDef {
            protocol: Some(contract::protocol::Protocol::named("webdav")),
            webdav_root: Some("/dav/".into()),
            ..TargetDef::command(vec!["x".into()], "x").unwrap()
        };
        assert_eq!(
            webdav::SPEC.ready_of(&webdav).to_string(),
            "OPTIONS /dav/ 2xx"
        );
        let obsync = TargetDef::command(vec!["x".into()], "x").unwrap();
        assert_eq!(
            obsync::SPEC.ready_of(&obsync).to_string(),
            "GET /readyz 200"
        );
    }
}

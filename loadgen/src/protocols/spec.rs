//! What the generator knows of one protocol beside its folder's code ([`Spec`]), and a
//! built-in target ([`Preset`]). Each protocol folder defines one `SPEC`; the list of them is
//! the folder's `mod.rs`.

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
    /// Its built-in presets: target files under `loadgen/targets/`, embedded.
    pub presets: &'static [Preset],
    /// A target file's `database` key, for a protocol whose server keeps the vault in a named
    /// database: the rule a name must follow (`Err`: why not). `None`: the key is refused.
    pub database: Option<NameRule>,
    /// Target-file keys this protocol's files once used, each with the key it reads as now
    /// (`(former, current)`): a file that still uses one keeps working.
    pub former_keys: &'static [(&'static str, &'static str)],
}

/// A rule a name must follow: `Err` says why a name does not.
pub type NameRule = fn(&str) -> Result<(), String>;

/// A built-in target: a named target file.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The name `--target` takes.
    pub name: &'static str,
    /// The target file's text.
    pub text: &'static str,
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

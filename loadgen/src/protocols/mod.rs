//! Every protocol the generator speaks, one folder each. A protocol's folder holds its
//! client, its whole-vault operations and its route load; what every protocol shares (the
//! plain HTTP client, the route-load driver, transfer reports, feed bounds, the target) lives
//! outside this folder. [`SPECS`] lists them for the generator (presets, readiness, feed bounds);
//! the harness's registry (`harness/src/sample/protocols/`) pairs each with its sample side,
//! in the same order (a test holds the two lists together).

pub mod couch;
pub mod mcp;
pub mod obsync;
pub mod s3;
pub mod tus;
pub mod webdav;

mod spec;
pub use spec::{Preset, Spec};

use crate::launch::{LaunchError, TargetDef};

/// Every protocol's spec, the default protocol first.
pub static SPECS: &[&Spec] = &[
    &obsync::SPEC,
    &webdav::SPEC,
    &couch::SPEC,
    &s3::SPEC,
    &mcp::SPEC,
    &tus::SPEC,
];

/// Every protocol's former target-file keys, `(former, current)`.
pub fn former_keys() -> Vec<(&'static str, &'static str)> {
    SPECS
        .iter()
        .flat_map(|s| s.former_keys.iter().copied())
        .collect()
}

/// Reads a user's target file, a key a protocol once used read under its current name.
pub fn target_from_file(path: &std::path::Path) -> Result<TargetDef, crate::launch::LaunchError> {
    TargetDef::from_file_renaming(path, &former_keys())
}

/// Parses a target file's text as [`target_from_file`] reads it.
pub fn target_from_text(text: &str, name: &str) -> Result<TargetDef, crate::launch::LaunchError> {
    TargetDef::parse_renaming(text, name, &former_keys())
}

/// The spec named `name` (its canonical name or an alias).
pub fn spec_named(name: &str) -> Option<&'static Spec> {
    SPECS
        .iter()
        .copied()
        .find(|s| s.name == name || s.aliases.contains(&name))
}

/// Every built-in preset, in the order of [`SPECS`].
pub fn presets() -> impl Iterator<Item = &'static Preset> {
    SPECS.iter().flat_map(|s| s.presets.iter())
}

/// The names of the built-in presets.
pub fn preset_names() -> Vec<&'static str> {
    presets().map(|p| p.name).collect()
}

/// The preset named `name`, as a target definition, if there is one.
pub fn preset(name: &str) -> Option<TargetDef> {
    let p = presets().find(|p| p.name == name)?;
    // The embedded files are checked by a unit test; a failure here is a build defect.
    Some(TargetDef::parse(p.text, name).expect("built-in preset definitions parse"))
}

/// A target definition's protocol-specific keys checked against its protocol's spec: a
/// `database` only where the protocol keeps the vault in a named database, by its rule.
/// (An unknown protocol is left to the harness's registry, which names the known ones.)
pub fn check_target(def: &TargetDef) -> Result<(), LaunchError> {
    let Some(db) = &def.database else {
        return Ok(());
    };
    let spec = def.protocol.as_ref().and_then(|p| spec_named(p.name()));
    let rule = spec.and_then(|s| s.database);
    match (spec, rule) {
        (_, Some(rule)) => rule(db).map_err(|reason| LaunchError::Invalid {
            what: "database".into(),
            reason,
        }),
        (Some(s), None) => Err(LaunchError::Invalid {
            what: "database".into(),
            reason: format!(
                "is for a protocol whose server keeps the vault in a named database ({}); a {} target takes `root` for its path",
                SPECS
                    .iter()
                    .filter(|s| s.database.is_some())
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                s.name
            ),
        }),
        (None, None) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::path::Path;

    #[test]
    fn presets_parse_and_keep_everything_in_the_data_dir() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        for name in preset_names() {
            let d = preset(name).unwrap();
            assert_eq!(d.name, name);
            assert!(
                d.protocol
                    .as_ref()
                    .and_then(|p| spec_named(p.name()))
                    .is_some_and(|s| s.presets.iter().any(|p| p.name == name)),
                "{name}"
            );
            assert!(d.packages.is_some(), "{name} names its packages");
            // A stdio server has no address: its pipes are the transport.
            let stdio = spec_named(d.protocol.as_ref().unwrap().name())
                .unwrap()
                .ready_of(&d)
                == crate::launch::Ready::Stdio;
            // A server that keeps nothing on disk still runs in its fresh data dir.
            assert!(
                (d.has_address() != stdio) && (d.has_data() || d.run_in_data_dir),
                "{name}"
            );
            let v = d.vars(addr, Path::new("/d/x"));
            let mut texts: Vec<String> = d.argv.iter().map(|a| v.render(a)).collect();
            texts.extend(d.files.values().map(|t| v.render(t)));
            // Comments may name other paths; what the server reads may not.
            let all: String = texts
                .join("\n")
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                stdio
                    || all.contains("127.0.0.1:4321")
                    || (all.contains("127.0.0.1") && all.contains("4321")),
                "{name}: {all}"
            );
            for word in all.split_whitespace().filter(|w| w.len() > 1) {
                let path = word.trim_matches(['"', ';']).trim_start_matches("file:");
                if path.starts_with('/') && !path.contains("/modules/") {
                    assert!(
                        path.starts_with("/d/x"),
                        "{name}: a path outside the data dir: {word}"
                    );
                }
            }
            assert!(!all.contains("mod_unixd"), "{name}");
        }
        assert_eq!(preset("apache"), None);
    }

    #[test]
    fn a_couchdb_target_names_its_database() {
        let d = TargetDef::parse(
            "command = \"srv {addr} {data}\"\nprotocol = \"couchdb\"\ndatabase = \"notes_1\"\n",
            "mine",
        )
        .unwrap();
        check_target(&d).unwrap();
        assert_eq!(d.root(), "/notes_1/");
        for (text, want) in [
            (
                "command = \"srv {addr} {data}\"\nprotocol = \"webdav\"\ndatabase = \"db\"\n",
                "a webdav target takes `root`",
            ),
            (
                "command = \"srv {addr} {data}\"\nprotocol = \"couchdb\"\ndatabase = \"db\"\nroot = \"/db/\"\n",
                "not both",
            ),
            (
                "command = \"srv {addr} {data}\"\nprotocol = \"couchdb\"\ndatabase = \"Notes\"\n",
                "not a CouchDB database name",
            ),
        ] {
            let e = TargetDef::parse(text, "mine")
                .and_then(|d| check_target(&d))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_target_without_a_check_gets_its_protocols_default() {
        let webdav = TargetDef {
            protocol: Some(contract::protocol::Protocol::named("webdav")),
            root: Some("/dav/".into()),
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

//! The protocol registry: every protocol a sample can speak, in one table ([`REGISTRY`]).
//! A protocol is one folder in `loadgen/src/protocols/<name>/` (its client, whole-vault
//! operations, route load, presets and `SPEC`, listed in `loadgen::protocols::SPECS`) and
//! one here (its side of the phase seam `sync_client::SyncClient`, its paired flow if it has
//! one), plus one line in the table below, in the order of `SPECS`. Everything else that varies by protocol — `--protocol` values, help text, the
//! scenario list grouped by protocol, the refusals of what a protocol cannot run, readiness
//! and feed defaults — is read from the table, never matched on a name.

use anyhow::bail;
use contract::protocol::Protocol;
use scenarios::scenario::{Phase, Scenario};

mod couch;
pub mod load;
mod mcp;
mod obsync;
mod s3;
mod seam;
mod tus;
mod webdav;

pub use seam::{Local, ProtocolImpl, Run, Support};

/// The registered protocols, the default first.
pub static REGISTRY: &[&dyn ProtocolImpl] = &[
    &obsync::Impl,
    &webdav::Impl,
    &couch::Impl,
    &s3::Impl,
    &mcp::Impl,
    &tus::Impl,
];

/// The canonical names of the registered protocols.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.spec().name).collect()
}

/// The registered protocol `name` (or an alias of it); an unknown name is an error naming
/// the known ones.
pub fn lookup(name: &str) -> anyhow::Result<&'static dyn ProtocolImpl> {
    REGISTRY
        .iter()
        .copied()
        .find(|p| p.spec().name == name || p.spec().aliases.contains(&name))
        .ok_or_else(|| {
            let shown: String = name
                .chars()
                .take(40)
                .flat_map(char::escape_default)
                .collect();
            anyhow::anyhow!(
                "unknown protocol \"{shown}\": the known protocols are {}",
                names().join(", ")
            )
        })
}

/// `p` resolved: the registered protocol and its canonical name.
pub fn resolve(p: &Protocol) -> anyhow::Result<(&'static dyn ProtocolImpl, Protocol)> {
    let imp = lookup(p.name())?;
    Ok((imp, Protocol::named(imp.spec().name)))
}

/// The protocols that can do what `ask` asks, for messages ("obsync-v1 and webdav").
pub fn those_that(ask: impl Fn(&dyn ProtocolImpl) -> Support) -> String {
    let yes: Vec<&str> = REGISTRY
        .iter()
        .filter(|p| ask(**p) == Support::Yes)
        .map(|p| p.spec().name)
        .collect();
    match yes.split_last() {
        None => "no protocol".into(),
        Some((last, [])) => (*last).into(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Resolves the scenario's protocol in place (an alias becomes the canonical name) and
/// checks the scenario asks of it only what it can run: its options table, fault rules,
/// crash phases and long-polling steps. `origin` names the scenario in errors.
pub fn check_scenario(s: &mut Scenario, origin: &str) -> anyhow::Result<&'static dyn ProtocolImpl> {
    let (imp, canonical) = resolve(&s.protocol).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
    s.protocol = canonical;
    let name = imp.spec().name;
    let refuse = |what: &str, why: Support| -> anyhow::Result<()> {
        match why {
            Support::Yes => Ok(()),
            Support::No(reason) => bail!(
                "{origin}: {what} drive {} targets only; {name} cannot: {reason}",
                those_that(|p| match what {
                    "long-polling steps" => p.long_poll(),
                    _ => p.faults(),
                })
            ),
        }
    };
    for (table, given) in [("webdav", s.webdav.is_some()), ("s3", s.s3.is_some())] {
        if given && imp.options_table() != Some(table) {
            bail!(
                "{origin}: [{table}] options need protocol = \"{table}\" (the scenario speaks {name})"
            );
        }
    }
    if !s.faults.is_empty() {
        refuse("fault rules", imp.faults())?;
    }
    if !s.sizes.is_empty()
        && let Support::No(reason) = imp.sizes()
    {
        bail!(
            "{origin}: sizes drive {} targets only; {name} cannot: {reason}",
            those_that(|p| p.sizes())
        );
    }
    for p in &s.phases {
        if let Support::No(reason) = imp.runs(p) {
            bail!(
                "{origin}: phase {} cannot run against {name}: {reason}",
                p.name()
            );
        }
        match p {
            Phase::Crash { .. } => refuse("crash phases", imp.faults())?,
            p if p.is_fanout() => refuse("long-polling steps", imp.long_poll())?,
            _ => {}
        }
    }
    Ok(imp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_pairs_every_generator_spec_in_its_order() {
        let specs: Vec<&str> = loadgen::protocols::SPECS.iter().map(|s| s.name).collect();
        assert_eq!(names(), specs);
    }

    #[test]
    fn every_protocol_has_one_name_and_unknown_names_list_the_known_ones() {
        let mut all: Vec<&str> = Vec::new();
        for p in REGISTRY {
            all.push(p.spec().name);
            all.extend(p.spec().aliases);
            // A stdio protocol has no HTTP routes; every other lists its route load's.
            let stdio = p
                .spec()
                .ready_of(&loadgen::launch::TargetDef::command(vec!["x".into()], "x").unwrap())
                == loadgen::launch::Ready::Stdio;
            assert_eq!((p.spec().routes)().is_empty(), stdio, "{}", p.spec().name);
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias is registered twice");
        assert_eq!(REGISTRY[0].spec().name, contract::protocol::DEFAULT_NAME);
        let e = lookup("ftp").unwrap_err().to_string();
        for name in names() {
            assert!(e.contains(name), "{e}");
        }
        assert_eq!(lookup("obsync").unwrap().spec().name, "obsync-v1");
    }

    #[test]
    fn a_scenario_asks_only_what_its_protocol_can_run() {
        let parse = |t: &str| scenarios::scenario::parse(t, "f.toml").unwrap();
        let mut s = parse(
            "name='x'\ndoc='d'\nprofile='small'\n[webdav]\npoll_ms=5\n[[phase]]\nkind='cold_start'\n",
        );
        let e = check_scenario(&mut s, "f.toml").unwrap_err().to_string();
        assert!(e.contains("protocol") && e.contains("f.toml"), "{e}");
        let mut s = parse(
            "name='x'\ndoc='d'\nprofile='small'\nprotocol='webdav'\n[[phase]]\nkind='long_poll_fanout'\nwaiters=2\n",
        );
        let e = check_scenario(&mut s, "f.toml").unwrap_err().to_string();
        assert!(e.contains("obsync-v1 targets only"), "{e}");
        let mut s = parse(
            "name='x'\ndoc='d'\nprofile='small'\nprotocol='nope'\n[[phase]]\nkind='cold_start'\n",
        );
        let e = check_scenario(&mut s, "f.toml").unwrap_err().to_string();
        assert!(
            e.contains("unknown protocol") && e.contains("webdav"),
            "{e}"
        );
        let mut s = parse(
            "name='x'\ndoc='d'\nprofile='small'\nprotocol='obsync'\n[[phase]]\nkind='cold_start'\n",
        );
        check_scenario(&mut s, "f.toml").unwrap();
        assert!(s.protocol.is_default());
        // tus's resume check runs against tus targets only, and is named when refused.
        for (protocol, runs) in [("webdav", false), ("obsync", false), ("tus", true)] {
            let mut s = parse(&format!(
                "name='x'\ndoc='d'\nprofile='small'\nprotocol='{protocol}'\n[[phase]]\nkind='tus_resume'\ncuts=3\n"
            ));
            match check_scenario(&mut s, "f.toml") {
                Ok(_) => assert!(runs, "{protocol} ran tus_resume"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        !runs && e.contains("tus_resume") && e.contains("tus target"),
                        "{e}"
                    );
                }
            }
        }
        // Sizes (a growth scenario) run where the protocol boots a server per size.
        for (protocol, runs) in [("mcp", true), ("webdav", false), ("obsync", false)] {
            let mut s = parse(&format!(
                "name='x'\ndoc='d'\nprofile='large'\nprotocol='{protocol}'\nsizes=[100,300,1000]\n[[phase]]\nkind='cold_start'\n"
            ));
            match check_scenario(&mut s, "f.toml") {
                Ok(_) => assert!(runs, "{protocol} ran sizes"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        !runs && e.contains("sizes drive mcp targets only") && e.contains(protocol),
                        "{e}"
                    );
                }
            }
        }
        for name in scenarios::scenario::builtin_names() {
            let mut s = scenarios::scenario::builtin(name).unwrap();
            check_scenario(&mut s, name).unwrap();
        }
    }
}

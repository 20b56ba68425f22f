//! `vaultbench scenarios`: the built-in scenarios grouped by protocol, with their phases and
//! running time; `scenarios show NAME` prints one's TOML to start a `--scenario-file` from.

use contract::protocol::Protocol;
use scenarios::scenario::{BUILTIN, Scenario};

use crate::sample::protocols::{ProtocolImpl, REGISTRY};

/// List the built-in scenarios, or print one's TOML.
#[derive(Debug, clap::Args)]
pub struct ScenariosArgs {
    #[command(subcommand)]
    pub cmd: Option<ScenariosCmd>,
    /// Print the list as one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum ScenariosCmd {
    /// Print a built-in scenario's TOML: copy it, edit it, and pass it with --scenario-file.
    Show {
        /// A built-in scenario's name (`vaultbench scenarios` lists them).
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// The wall time of a whole recording (warm-up and counted samples, default gate) where the
/// book's measured figures have one: release build, quiet Xeon-class 2-vCPU VM (the measured
/// chapter). A data file, `scenario_times.toml` beside this one (scenario name = seconds);
/// others are not measured yet, and the book's scenario chapter gives the command that
/// measures one.
const MEASURED_S: &str = include_str!("scenario_times.toml");

/// A protocol's heading: its name, what it is and the built-in targets that speak it (the
/// reference server for the default protocol, and every preset naming it).
fn heading(imp: &dyn ProtocolImpl) -> String {
    let spec = imp.spec();
    let mut targets: Vec<&str> = Vec::new();
    if Protocol::named(spec.name).is_default() {
        targets.push("ref");
    }
    targets.extend(spec.presets.iter().map(|p| p.name));
    targets.push("or your own server");
    format!(
        "{}: {} (target: {})",
        spec.name,
        spec.about,
        targets.join(", ")
    )
}

/// The scenario file's name of each phase (its `kind`), in order.
pub fn phase_kinds(s: &Scenario) -> Vec<String> {
    s.phases
        .iter()
        .map(|p| {
            serde_json::to_value(p)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
                .unwrap_or_else(|| p.name().to_owned())
        })
        .collect()
}

fn measured(name: &str) -> Option<f64> {
    times().find(|(n, _)| *n == name).map(|(_, s)| s)
}

/// The entries of [`MEASURED_S`]: `name = seconds` lines (the name quoted or bare), `#`
/// comments skipped. A unit test holds every line to that form and every name to a built-in.
fn times() -> impl Iterator<Item = (&'static str, f64)> {
    MEASURED_S
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (n, s) = l.split_once('=')?;
            Some((n.trim().trim_matches('"'), s.trim().parse().ok()?))
        })
}

/// Every built-in, parsed (they are embedded and tested, so a parse error is a build defect
/// and is reported, not unwrapped).
fn all() -> anyhow::Result<Vec<Scenario>> {
    BUILTIN
        .iter()
        .map(|(n, _)| scenarios::scenario::builtin(n).map_err(anyhow::Error::from))
        .collect()
}

pub fn run(args: ScenariosArgs) -> anyhow::Result<i32> {
    if let Some(ScenariosCmd::Show { name }) = args.cmd {
        let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
            anyhow::bail!("{}", crate::hint::unknown_scenario(&name));
        };
        print!("{text}");
        return Ok(crate::exit::OK);
    }
    let list = all()?;
    if args.json {
        let items: Vec<serde_json::Value> = list
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "protocol": s.protocol.name(),
                    "profile": s.profile,
                    "samples": s.samples,
                    "phases": phase_kinds(s),
                    "faults": s.faults.len(),
                    "sizes": s.sizes,
                    "measured_recording_s": measured(&s.name),
                    "doc": s.doc,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "scenarios": items }));
        return Ok(crate::exit::OK);
    }
    for imp in REGISTRY.iter().copied() {
        let group: Vec<&Scenario> = list
            .iter()
            .filter(|s| {
                crate::sample::protocols::lookup(s.protocol.name())
                    .ok()
                    .map(|p| p.spec().name)
                    == Some(imp.spec().name)
            })
            .collect();
        if group.is_empty() {
            continue;
        }
        println!("{}", heading(imp));
        for s in group {
            let time = match measured(&s.name) {
                Some(t) => format!("{t:.0} s a recording"),
                None => "time not measured yet".to_owned(),
            };
            let faults = if s.faults.is_empty() {
                String::new()
            } else {
                format!(", {} fault rules", s.faults.len())
            };
            let samples = if s.samples == 1 { "sample" } else { "samples" };
            let sizes = if s.sizes.is_empty() {
                String::new()
            } else {
                let n: Vec<String> = s.sizes.iter().map(u32::to_string).collect();
                format!(" at sizes {} notes", n.join(", "))
            };
            println!(
                "  {:<17} vault {}{sizes}, 1 warm-up + {} {samples}{faults}, {time}",
                s.name, s.profile, s.samples
            );
            println!("  {:<17} phases: {}", "", phase_kinds(s).join(", "));
        }
        println!();
    }
    println!(
        "`vaultbench scenarios show NAME` prints one's TOML; the book's scenario chapter documents every field."
    );
    Ok(crate::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_measured_time_names_a_built_in_scenario() {
        let lines = MEASURED_S
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .count();
        assert_eq!(
            times().count(),
            lines,
            "a line of scenario_times.toml does not parse"
        );
        for (name, s) in times() {
            assert!(BUILTIN.iter().any(|(n, _)| *n == name), "{name}");
            assert!(s > 0.0, "{name}");
        }
        assert_eq!(measured("small"), Some(28.5));
    }
}

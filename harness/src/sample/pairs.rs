//! What every protocol's paired flow shares (`ab --paired`, see `sample::paired`): the two
//! arms while they run, the job a protocol's flow is handed, the keys of the pairs every flow
//! writes, the vault's files in order and the check that each arm pulled the vault.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::schema::{Better, PairSeries};
use scenarios::scenario::Phase;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::{Server, TargetSpec};

/// The key of the paired cold push's wall time (the sum of its per-file pairs).
pub const COLD_PUSH_WALL: &str = "cold_push.wall_ms";
/// The key of the paired cold pull's wall time (the sum of its per-file pairs).
pub const COLD_PULL_WALL: &str = "cold_pull.wall_ms";
/// The key of the paired edit propagation's median round.
pub const EDIT_P50: &str = "edit.p50_ms";

/// One arm of the paired sample while it runs.
pub struct Arm {
    pub server: Server,
    pub m: Metrics,
}

/// What a protocol's paired flow is handed: the plan, which arm goes first in the first
/// pair, each arm's target, data dir and running server, and where its pairs and the phases
/// it skipped go.
pub struct PairedJob<'a> {
    pub plan: &'a SamplePlan,
    pub a_first: bool,
    pub specs: [&'a TargetSpec; 2],
    pub dirs: [&'a Path; 2],
    pub a: &'a mut Arm,
    pub b: &'a mut Arm,
    pub pairs: &'a mut BTreeMap<String, PairSeries>,
    pub skipped: &'a mut Vec<String>,
}

/// After a paired pull: each arm's tree must be byte-identical to the vault (else the sample
/// fails); each arm's keys are the sum of its per-file times and the file count.
pub fn pulled(
    plan: &SamplePlan,
    pull_dirs: &[PathBuf; 2],
    s: &PairSeries,
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<()> {
    for (i, arm) in [a, b].into_iter().enumerate() {
        let got = crate::tree::tree_digest(&pull_dirs[i]).context("hashing the pulled tree")?;
        if got != plan.vault_digest {
            bail!(
                "arm {}: cold pull: the pulled tree's digest {got} differs from the vault's {}",
                ["A", "B"][i],
                plan.vault_digest
            );
        }
        arm.m
            .passed(contract::key::PhaseKey::new("cold_pull", "byte_identical"));
        let series = if i == 0 { &s.a } else { &s.b };
        arm.m
            .timing(COLD_PULL_WALL, series.iter().sum(), "ms", Better::Lower);
        arm.m.exact("cold_pull.files", series.len() as f64, "count");
    }
    Ok(())
}

/// The vault's files, as relative paths in sorted order (the order both arms push them in).
pub fn vault_files(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e.with_context(|| format!("reading {}", dir.display()))?;
            let ft = e.file_type()?;
            let p = e.path();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p
                    .strip_prefix(root)
                    .context("a vault file outside the vault")?
                    .to_string_lossy()
                    .into_owned();
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}
/// Each arm's log counts over the phase just driven (its own server's log, so exact per arm
/// however the phase interleaved the arms); `before` is each arm's reading at the phase's
/// start. Nothing for a cold start or a phase the flow skipped.
pub fn log_window(
    phase: &Phase,
    before: [crate::sample::logtap::Reading; 2],
    skipped: &[String],
    a: &mut Arm,
    b: &mut Arm,
) {
    let name = phase.name();
    if matches!(phase, Phase::ColdStart) || skipped.iter().any(|x| x == name) {
        return;
    }
    for (arm, r0) in [a, b].into_iter().zip(before) {
        if !arm.server.log.counting() {
            continue;
        }
        let d = r0.until(&arm.server.log.settle());
        let files = arm
            .m
            .map
            .get(&format!("{name}.files"))
            .map(|m| m.value as u64);
        crate::sample::phases::log_keys(&format!("{name}.log"), &d, files, &mut arm.m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_files_are_sorted_relative_paths() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("z/y")).unwrap();
        std::fs::write(d.path().join("z/y/a.md"), "a").unwrap();
        std::fs::write(d.path().join("b.md"), "b").unwrap();
        std::fs::write(d.path().join("a.md"), "a").unwrap();
        assert_eq!(vault_files(d.path()).unwrap(), ["a.md", "b.md", "z/y/a.md"]);
    }
}

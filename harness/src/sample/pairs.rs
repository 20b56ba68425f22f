//! What every protocol's paired flow shares (`ab --paired`, see `sample::paired`): the two
//! arms while they run, the job a protocol's flow is handed, the keys of the pairs every flow
//! writes, the vault's files in order, the alternation of one pair, the keys of a paired push
//! and the check that each arm pulled the vault; and the whole flow of a protocol whose
//! paired sample is a cold push and a cold pull object by object ([`push_and_pull`]).

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::schema::{Better, PairAggregate, PairSeries};
use scenarios::scenario::Phase;

use crate::sample::phases::within_phase;
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

/// A protocol's cold push and cold pull, object by object, each arm a client of its own
/// server: what [`push_and_pull`] drives.
#[allow(async_fn_in_trait)]
pub trait PushPullPairs {
    /// The cold push's pairs (its keys written on each arm, as [`pushed`] writes them).
    async fn push_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries>;

    /// The cold pull's pairs into each arm's pull folder (checked by [`pulled`]).
    async fn pull_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries>;
}

/// What one phase of [`push_and_pull`] is handed: the plan, which arm goes first in the first
/// pair, the folder each arm pulls into, and the two arms.
pub struct Turns<'a> {
    pub plan: &'a SamplePlan,
    pub a_first: bool,
    pub pull_dirs: &'a [PathBuf; 2],
    pub a: &'a mut Arm,
    pub b: &'a mut Arm,
}

/// The paired flow of a protocol that pairs only the cold push and the cold pull: every other
/// phase is named as skipped (edit propagation is poll-bounded there, route loads are not
/// paired). Each phase runs within its time bound, and each arm's log is counted over it.
pub async fn push_and_pull(job: PairedJob<'_>, flow: &impl PushPullPairs) -> anyhow::Result<()> {
    let PairedJob {
        plan,
        a_first,
        dirs,
        a,
        b,
        pairs,
        skipped,
        ..
    } = job;
    let pull_dirs = dirs.map(|d| d.join("pull-b"));
    for phase in &plan.scenario.phases {
        let logs = [a.server.log.read(), b.server.log.read()];
        let step = async {
            let t = Turns {
                plan,
                a_first,
                pull_dirs: &pull_dirs,
                a: &mut *a,
                b: &mut *b,
            };
            let (key, s) = match phase {
                Phase::ColdStart => return Ok(()),
                Phase::ColdPush { .. } => (COLD_PUSH_WALL, flow.push_pairs(t).await?),
                Phase::ColdPull => (COLD_PULL_WALL, flow.pull_pairs(t).await?),
                other => {
                    skipped.push(other.name().to_owned());
                    return Ok(());
                }
            };
            pairs.insert(key.to_owned(), s);
            Ok::<(), anyhow::Error>(())
        };
        within_phase(plan, phase.name(), step).await?;
        log_window(phase, logs, skipped, a, b);
    }
    Ok(())
}

/// Runs `one` on arm A (0) and arm B (1) in the order of pair `i` (ABBA from `a_first`);
/// returns A's and B's result.
pub async fn in_turn<T, F>(i: usize, a_first: bool, mut one: F) -> anyhow::Result<(T, T)>
where
    F: AsyncFnMut(usize) -> anyhow::Result<T>,
{
    if loadgen::a_first_in(i as u64) == a_first {
        let x = one(0).await.context("arm A")?;
        Ok((x, one(1).await.context("arm B")?))
    } else {
        let y = one(1).await.context("arm B")?;
        Ok((one(0).await.context("arm A")?, y))
    }
}

/// An empty series of `n` per-file pairs, its aggregate the median pair.
pub fn file_series(n: usize) -> PairSeries {
    PairSeries {
        a: Vec::with_capacity(n),
        b: Vec::with_capacity(n),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    }
}

/// A vault file's bytes, to push.
pub fn vault_file(plan: &SamplePlan, rel: &str) -> anyhow::Result<bytes::Bytes> {
    let body = std::fs::read(plan.vault_dir.join(rel)).with_context(|| format!("reading {rel}"))?;
    Ok(body.into())
}

/// Writes a pulled file at vault path `rel` (the vault's own path, never the server's) under
/// `dir`, its folders made first.
pub fn write_pulled(dir: &Path, rel: &str, body: &[u8]) -> anyhow::Result<()> {
    let dest = dir.join(rel);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&dest, body).with_context(|| format!("writing {}", dest.display()))
}

/// Whether a server's listing of files is the vault's, path for path.
pub fn lists_vault(listed: &[&String], files: &[String]) -> bool {
    listed.len() == files.len() && listed.iter().zip(files).all(|(l, f)| *l == f)
}

/// After a paired push: each arm's keys are the sum of its per-file times, the file count and
/// the bytes pushed.
pub fn pushed(s: &PairSeries, files: usize, bytes: u64, a: &mut Arm, b: &mut Arm) {
    for (arm, series) in [(a, &s.a), (b, &s.b)] {
        arm.m
            .timing(COLD_PUSH_WALL, series.iter().sum(), "ms", Better::Lower);
        arm.m.exact("cold_push.files", files as f64, "count");
        arm.m.exact("cold_push.bytes", bytes as f64, "bytes");
    }
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

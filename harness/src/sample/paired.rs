//! The paired sample (`ab --paired`): A's and B's servers up at once in one fresh sample
//! process, each with its own data dir and enrolled devices on the same vault, and the
//! generator alternating between them so that the two arms never overlap in time and each
//! sees the same host conditions.
//!
//! - Cold push: file by file, the same file to A and then to B (or B then A, alternating
//!   ABBA), each with its own device; a pair is one file.
//! - Cold pull: each arm's second device lists its feed, then fetches the same file from A
//!   and from B in turn (ABBA); a pair is one file. Each arm's pulled tree must then be
//!   byte-identical to the vault.
//! - Edit propagation: round by round, A's edit-and-wait on its arm then B's (ABBA); a pair is
//!   one round.
//! - Route loads: request by request at 1 in flight, short slices at N (see
//!   `loadgen::run_paired_route_load`); a pair is one slice.
//!
//! The other phases (idle resync, folder rename, crash) are not run in paired mode; the result
//! names them, so a report never implies they were compared.
//!
//! A client-mode scenario is paired by its own client instead (`sample::client::paired`):
//! a pair is a whole phase, or one edit round, of the client's runs on each arm.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::Path;

use reports::schema::{Better, PairedSample};

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::{Server, TargetSpec};

use crate::sample::pairs::{Arm, PairedJob};
pub use crate::sample::pairs::{COLD_PULL_WALL, COLD_PUSH_WALL, EDIT_P50};

/// Runs the paired sample: A is `plan.target`, B is `b`. A's keys go to `m`; B's keys and the
/// pairs are returned.
pub fn measure(
    plan: &SamplePlan,
    b: &TargetSpec,
    a_first: bool,
    sample_dir: &Path,
    m: &mut Metrics,
    server_pid: &mut u32,
    in_sample: &mut Option<reports::schema::Contention>,
) -> anyhow::Result<PairedSample> {
    if !plan.scenario.faults.is_empty() {
        bail!(
            "ab --paired runs no fault rules; scenario {} has some",
            plan.scenario.name
        );
    }
    let (dir_a, dir_b) = (sample_dir.join("a"), sample_dir.join("b"));
    for d in [&dir_a, &dir_b] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    // Started on this (main) thread: PR_SET_PDEATHSIG follows the spawning thread. The arm
    // started first alternates with the round's order, as the first arm of each pair does.
    let imp = crate::sample::protocols::lookup(plan.scenario.protocol.name())?;
    let start = |spec: &TargetSpec, dir: &Path, arm: &str| {
        // The data dir filled as a sample's is (an MCP server's copy of the vault).
        imp.seed_data_dir(plan, &dir.join("data"))
            .with_context(|| format!("seeding {arm}'s data dir"))?;
        Server::start(spec, &dir.join("data")).with_context(|| format!("starting {arm}"))
    };
    let (sa, sb) = if a_first {
        let sa = start(&plan.target, &dir_a, "A")?;
        (sa, start(b, &dir_b, "B")?)
    } else {
        let sb = start(b, &dir_b, "B")?;
        (start(&plan.target, &dir_a, "A")?, sb)
    };
    sa.count_log(&plan.scenario.counts)?;
    sb.count_log(&plan.scenario.counts)?;
    *server_pid = sa.pid;
    let b_server_pid = sb.pid;
    let mut arm_a = Arm {
        server: sa,
        m: Metrics::default(),
    };
    let mut arm_b = Arm {
        server: sb,
        m: Metrics::default(),
    };
    for arm in [&mut arm_a, &mut arm_b] {
        let ready = arm.server.ready_after.as_secs_f64() * 1e3;
        arm.m
            .timing("cold_start.ready_ms", ready, "ms", Better::Lower);
    }
    let threads = loadgen::worker_threads(
        crate::sample::contention::connections(&plan.scenario),
        crate::sample::contention::allowed_cpus()
            .map(|c| c.len())
            .unwrap_or(1),
    );
    let rt = loadgen::runtime(threads).context("building the tokio runtime")?;
    let window = crate::sample::contention::Window::start();
    let mut pairs = BTreeMap::new();
    let mut skipped = Vec::new();
    let job = PairedJob {
        plan,
        a_first,
        specs: [&plan.target, b],
        dirs: [&dir_a, &dir_b],
        a: &mut arm_a,
        b: &mut arm_b,
        pairs: &mut pairs,
        skipped: &mut skipped,
    };
    let driven = match imp.paired() {
        // Client mode: the scenario's own client on each arm in turn, whatever the protocol.
        _ if plan.scenario.client.is_some() => {
            rt.block_on(crate::sample::client::paired::drive(job))
        }
        crate::sample::protocols::Support::Yes => rt.block_on(imp.drive_paired(job)),
        crate::sample::protocols::Support::No(why) => Err(anyhow::anyhow!(
            "ab --paired does not drive {} ({} speaks {}): {why}",
            plan.scenario.name,
            plan.scenario.name,
            plan.scenario.protocol
        )),
    };
    *in_sample =
        Some(
            window
                .finish(arm_a.server.pid)
                .unwrap_or_else(|e| reports::schema::Contention {
                    unavailable: vec![e],
                    ..Default::default()
                }),
        );
    drop(rt);
    let usage_a = stop(arm_a.server, "A");
    let usage_b = stop(arm_b.server, "B");
    driven?;
    crate::sample::stopped::server_metrics(&usage_a?, &mut arm_a.m);
    crate::sample::stopped::server_metrics(&usage_b?, &mut arm_b.m);
    m.map.extend(arm_a.m.map);
    m.histograms.extend(arm_a.m.histograms);
    Ok(PairedSample {
        b_server_pid,
        a_first,
        b_metrics: arm_b.m.map,
        pairs,
        skipped_phases: skipped,
    })
}

fn stop(server: Server, arm: &str) -> anyhow::Result<crate::sample::target::ServerUsage> {
    crate::sample::stopped::stop_live(server, &format!(" (arm {arm})"))
}

//! The paired sample (`ab --paired`): A's and B's servers up at once in one fresh sample
//! process, each with its own data dir and enrolled devices on the same vault, and the
//! generator alternating between them so that the two arms never overlap in time and each
//! sees the same host conditions.
//!
//! - Cold push: file by file, the same file to A and then to B (or B then A, alternating
//!   ABBA), each with its own device; a pair is one file.
//! - Route loads: request by request at 1 in flight, short slices at N (see
//!   `loadgen::run_paired_route_load`); a pair is one slice.
//!
//! The other phases (cold pull, idle resync, edit propagation, folder rename, crash) are not
//! run in paired mode; the result names them, so a report never implies they were compared.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::key::RouteLoadKey;
use loadgen::Device;
use reports::schema::{Better, PairAggregate, PairSeries, PairedSample};
use scenarios::scenario::{Phase, Protocol, RouteBound};

use crate::sample::obsync_client::ObsyncClient;
use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::sync_client::{SyncClient, encode_histogram};
use crate::sample::target::{Server, TargetSpec};

/// The key of the paired cold push's wall time (the sum of its per-file pairs).
pub const COLD_PUSH_WALL: &str = "cold_push.wall_ms";

/// One arm of the paired sample while it runs.
struct Arm {
    server: Server,
    m: Metrics,
}

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
    if plan.scenario.protocol != Protocol::ObsyncV1 {
        bail!(
            "ab --paired drives obsync-v1 scenarios; {} speaks WebDAV",
            plan.scenario.name
        );
    }
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
    let start = |spec: &TargetSpec, dir: &Path, arm: &str| {
        Server::start(spec, &dir.join("data")).with_context(|| format!("starting {arm}"))
    };
    let (sa, sb) = if a_first {
        let sa = start(&plan.target, &dir_a, "A")?;
        (sa, start(b, &dir_b, "B")?)
    } else {
        let sb = start(b, &dir_b, "B")?;
        (start(&plan.target, &dir_a, "A")?, sb)
    };
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
    let driven = rt.block_on(drive(
        plan,
        a_first,
        &mut arm_a,
        &mut arm_b,
        &mut pairs,
        &mut skipped,
    ));
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

async fn drive(
    plan: &SamplePlan,
    a_first: bool,
    a: &mut Arm,
    b: &mut Arm,
    pairs: &mut BTreeMap<String, PairSeries>,
    skipped: &mut Vec<String>,
) -> anyhow::Result<()> {
    let ca = ObsyncClient::connect(plan, &a.server, false)
        .await
        .context("arm A")?;
    let cb = ObsyncClient::connect(plan, &b.server, false)
        .await
        .context("arm B")?;
    for phase in &plan.scenario.phases {
        match phase {
            Phase::ColdStart => {}
            Phase::ColdPush { .. } => {
                let s = push_pairs(plan, a_first, ca.devices(), cb.devices(), a, b).await?;
                pairs.insert(COLD_PUSH_WALL.to_owned(), s);
            }
            Phase::RouteLoad {
                routes, in_flight, ..
            } => {
                let bound = phase
                    .route_bound()
                    .context("route_load step without a valid bound")?;
                let RouteBound::Requests(requests) = bound else {
                    bail!(
                        "ab --paired needs fixed-work route loads (requests = N); {} has a time-bounded one",
                        plan.scenario.name
                    );
                };
                let known = ca.routes();
                for route in routes {
                    if !known.contains(&route.as_str()) {
                        bail!("route load: unknown obsync-v1 route {route:?}");
                    }
                    for &level in in_flight {
                        let key = RouteLoadKey::new(route, level as u32, "p50_us");
                        let s = route_pairs(
                            ca.devices(),
                            cb.devices(),
                            route,
                            level,
                            requests,
                            plan.seed,
                            a,
                            b,
                        )
                        .await
                        .with_context(|| {
                            format!("paired route load {route} at {level} in flight")
                        })?;
                        pairs.insert(key.to_string(), s);
                    }
                }
            }
            other => skipped.push(other.name().to_owned()),
        }
    }
    Ok(())
}

/// The vault's files, as relative paths in sorted order (the order both arms push them in).
fn vault_files(root: &Path) -> anyhow::Result<Vec<String>> {
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

/// Cold push, file by file: each file goes to both arms, the first arm alternating ABBA.
async fn push_pairs(
    plan: &SamplePlan,
    a_first: bool,
    da: &[Device],
    db: &[Device],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let (dev_a, dev_b) = (&da[0], &db[0]);
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::Sum,
        slice: 1,
    };
    let (mut bytes, mut requests_a, mut requests_b) = (0u64, 0u64, 0u64);
    for (i, rel) in files.iter().enumerate() {
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |dev: &Device| -> anyhow::Result<(f64, u64, u64)> {
            let t = Instant::now();
            let v = loadgen::push_file(dev, &plan.vault_dir, rel)
                .await
                .with_context(|| format!("pushing {rel}"))?;
            Ok((ms(t.elapsed()), v.requests, v.bytes))
        };
        let ((ta, ra, by), (tb, rb, _)) = if first_a {
            let x = one(dev_a).await.context("arm A")?;
            (x, one(dev_b).await.context("arm B")?)
        } else {
            let y = one(dev_b).await.context("arm B")?;
            (one(dev_a).await.context("arm A")?, y)
        };
        s.a.push(ta);
        s.b.push(tb);
        bytes += by;
        requests_a += ra;
        requests_b += rb;
    }
    let (wa, wb): (f64, f64) = (s.a.iter().sum(), s.b.iter().sum());
    a.m.timing(COLD_PUSH_WALL, wa, "ms", Better::Lower);
    b.m.timing(COLD_PUSH_WALL, wb, "ms", Better::Lower);
    for (arm, req) in [(&mut *a, requests_a), (&mut *b, requests_b)] {
        arm.m.exact("cold_push.files", files.len() as f64, "count");
        arm.m.exact("cold_push.bytes", bytes as f64, "bytes");
        arm.m.exact("cold_push.requests", req as f64, "count");
    }
    Ok(s)
}

/// One route at one level, paired: the arms' keys as a route load's, and the slices' pairs.
#[allow(clippy::too_many_arguments)]
async fn route_pairs(
    da: &[Device],
    db: &[Device],
    route: &str,
    level: usize,
    requests: u64,
    seed: u64,
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let r = loadgen::Route::ALL
        .into_iter()
        .find(|r| r.name() == route)
        .with_context(|| format!("unknown route {route:?}"))?;
    let cfg = loadgen::PairedRouteConfig {
        route: r,
        in_flight: level,
        requests,
        slice: loadgen::default_slice(level),
        duration: Duration::from_secs_f64(scenarios::scenario::FIXED_WORK_DEADLINE_S),
        seed,
    };
    let rep = loadgen::run_paired_route_load(da, db, &cfg).await?;
    let key = RouteLoadKey::new(route, level as u32, "p50_us");
    for (arm, stats, name) in [(&mut *a, &rep.a, "A"), (&mut *b, &rep.b, "B")] {
        if stats.errors() > 0 {
            let bad: Vec<String> = stats
                .status
                .iter()
                .filter(|(k, _)| !k.starts_with('2'))
                .map(|(k, v)| format!("{v} x {k}"))
                .collect();
            bail!(
                "arm {name}: {} of {} requests failed ({})",
                stats.errors(),
                stats.requests,
                bad.join(", ")
            );
        }
        if stats.requests != requests {
            bail!(
                "arm {name}: {} of the step's {requests} requests done within {} s",
                stats.requests,
                scenarios::scenario::FIXED_WORK_DEADLINE_S
            );
        }
        let sum = stats.summary();
        arm.m.timing(key.clone(), sum.p50_us, "us", Better::Lower);
        arm.m
            .timing(key.with_stat("p99_us"), sum.p99_us, "us", Better::Lower);
        arm.m
            .exact(key.with_stat("requests"), stats.requests as f64, "count");
        arm.m
            .exact(key.with_stat("errors"), stats.errors() as f64, "count");
        if let Some(h) = encode_histogram(stats.headline()) {
            arm.m
                .histograms
                .insert(contract::key::HistogramKey::from(key.level()).into(), h);
        }
    }
    Ok(PairSeries {
        a: rep.pairs.iter().map(|p| p.0).collect(),
        b: rep.pairs.iter().map(|p| p.1).collect(),
        aggregate: PairAggregate::Median,
        slice: cfg.slice,
    })
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

//! The signed protocol's paired flow (`ab --paired`): each arm's own enrolled devices, cold
//! push and pull file by file, edit propagation round by round, route loads slice by slice;
//! see `sample::paired` for the alternation.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::key::RouteLoadKey;
use loadgen::Device;
use reports::schema::{Better, PairAggregate, PairSeries};
use scenarios::scenario::{Phase, RouteBound};

use super::client::ObsyncClient;
use crate::sample::pairs::{
    Arm, COLD_PULL_WALL, COLD_PUSH_WALL, EDIT_P50, file_series, in_turn, pulled, pushed,
    vault_files,
};
use crate::sample::plan::{SamplePlan, ms};
use crate::sample::sync_client::{SyncClient, encode_histogram, failures};

pub(super) async fn drive(
    plan: &SamplePlan,
    a_first: bool,
    dirs: [&Path; 2],
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
    // Each arm's second device's place in its feed, once it has pulled.
    let mut b_seq: Option<[u64; 2]> = None;
    let pull_dirs = dirs.map(|d| d.join("pull-b"));
    for phase in &plan.scenario.phases {
        let logs = [a.server.log.read(), b.server.log.read()];
        let step = async {
            match phase {
                Phase::ColdStart => {}
                Phase::ColdPush { .. } => {
                    let s = push_pairs(plan, a_first, ca.devices(), cb.devices(), a, b).await?;
                    pairs.insert(COLD_PUSH_WALL.to_owned(), s);
                }
                Phase::ColdPull => {
                    let (s, seq) = pull_pairs(
                        plan,
                        a_first,
                        [ca.devices(), cb.devices()],
                        &pull_dirs,
                        a,
                        b,
                    )
                    .await?;
                    b_seq = Some(seq);
                    pairs.insert(COLD_PULL_WALL.to_owned(), s);
                }
                Phase::EditPropagation { rounds } => {
                    let seq = match b_seq {
                        Some(s) => s,
                        None => feed_heads([ca.devices(), cb.devices()]).await?,
                    };
                    let (s, seq) = edit_pairs(
                        plan,
                        a_first,
                        [ca.devices(), cb.devices()],
                        dirs,
                        &pull_dirs,
                        *rounds,
                        seq,
                        a,
                        b,
                    )
                    .await?;
                    b_seq = Some(seq);
                    pairs.insert(EDIT_P50.to_owned(), s);
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
            Ok::<(), anyhow::Error>(())
        };
        crate::sample::phases::within_phase(plan, phase.name(), step).await?;
        crate::sample::pairs::log_window(phase, logs, skipped, a, b);
    }
    Ok(())
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
    let devs = [&da[0], &db[0]];
    let mut s = file_series(files.len());
    let (mut bytes, mut requests_a, mut requests_b) = (0u64, 0u64, 0u64);
    for (i, rel) in files.iter().enumerate() {
        let ((ta, ra, by), (tb, rb, _)) = in_turn(i, a_first, async |k: usize| {
            let t = Instant::now();
            let v = loadgen::push_file(devs[k], &plan.vault_dir, rel)
                .await
                .with_context(|| format!("pushing {rel}"))?;
            Ok((ms(t.elapsed()), v.requests, v.bytes))
        })
        .await?;
        s.a.push(ta);
        s.b.push(tb);
        bytes += by;
        requests_a += ra;
        requests_b += rb;
    }
    pushed(&s, files.len(), bytes, a, b);
    for (arm, req) in [(a, requests_a), (b, requests_b)] {
        arm.m.exact("cold_push.requests", req as f64, "count");
    }
    Ok(s)
}

/// At most this many files in a feed a paired pull lists, over the vault's own count: a
/// server's feed may also list deletions and renames, but not a vault of its own invention.
const FEED_SLACK: usize = 1024;

/// Each arm's second device's place at the end of its feed (the edit phase without a pull
/// before it).
async fn feed_heads(devs: [&[Device]; 2]) -> anyhow::Result<[u64; 2]> {
    let mut out = [0u64; 2];
    for (i, d) in devs.iter().enumerate() {
        let dev = d
            .get(1)
            .context("the paired sample needs two devices per arm")?;
        out[i] = loadgen::list_changes(dev, 0, usize::MAX)
            .await
            .with_context(|| format!("arm {}: reading the feed", ["A", "B"][i]))?
            .1;
    }
    Ok(out)
}

/// Cold pull, file by file: each arm's second device lists its feed (not timed), then the same
/// file is fetched from both arms in turn, the first arm alternating ABBA. Each arm's pulled
/// tree must then be byte-identical to the vault. Returns the pairs and each arm's feed
/// position.
async fn pull_pairs(
    plan: &SamplePlan,
    a_first: bool,
    devs: [&[Device]; 2],
    pull_dirs: &[PathBuf; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<(PairSeries, [u64; 2])> {
    let max_files = vault_files(&plan.vault_dir)?.len() + FEED_SLACK;
    let mut lists = Vec::with_capacity(2);
    for (i, d) in devs.iter().enumerate() {
        let arm = ["A", "B"][i];
        let dev = d
            .get(1)
            .context("the paired sample needs two devices per arm")?;
        std::fs::create_dir_all(&pull_dirs[i])
            .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
        let (changes, seq) = loadgen::list_changes(dev, 0, max_files)
            .await
            .with_context(|| format!("arm {arm}: cold pull: listing the feed"))?;
        let by_file: BTreeMap<String, loadgen::Change> = changes
            .into_iter()
            .map(|c| (c.file_id.clone(), c))
            .collect();
        lists.push((dev, by_file, seq));
    }
    let (la, lb) = (&lists[0], &lists[1]);
    if la.1.keys().ne(lb.1.keys()) {
        bail!(
            "cold pull: the arms' feeds list different files (A {}, B {}): the builds stored different vaults",
            la.1.len(),
            lb.1.len()
        );
    }
    let mut s = file_series(la.1.len());
    for (i, (fid, ca)) in la.1.iter().enumerate() {
        let arms = [(la.0, ca), (lb.0, &lb.1[fid])];
        let (ta, tb) = in_turn(i, a_first, async |k: usize| {
            let t = Instant::now();
            loadgen::fetch_and_write(arms[k].0, &pull_dirs[k], arms[k].1)
                .await
                .with_context(|| format!("fetching file {fid}"))?;
            Ok(ms(t.elapsed()))
        })
        .await?;
        s.a.push(ta);
        s.b.push(tb);
    }
    pulled(plan, pull_dirs, &s, a, b)?;
    Ok((s, [la.2, lb.2]))
}

/// Edit propagation, round by round: each round edits the note on one arm and waits for its
/// second device, then on the other, the first arm alternating ABBA. A pair is one round.
#[allow(clippy::too_many_arguments)]
async fn edit_pairs(
    plan: &SamplePlan,
    a_first: bool,
    devs: [&[Device]; 2],
    dirs: [&Path; 2],
    pull_dirs: &[PathBuf; 2],
    rounds: usize,
    mut seq: [u64; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<(PairSeries, [u64; 2])> {
    use super::client::{EditFile, edit_round};
    let rel = crate::sample::sync_client::first_note(&plan.vault_dir)?
        .context("edit propagation: the vault has no note")?;
    let mut edits = Vec::with_capacity(2);
    for (i, d) in dirs.iter().enumerate() {
        std::fs::create_dir_all(&pull_dirs[i])
            .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
        edits.push(EditFile::prepare(plan, &rel, &d.join("edit-a"))?);
    }
    let mut lat: [Vec<f64>; 2] = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    let mut requests = [0u64; 2];
    for round in 0..rounds {
        let first_a = loadgen::a_first_in(round as u64) == a_first;
        let order = if first_a { [0, 1] } else { [1, 0] };
        for i in order {
            let d = devs[i];
            let (da, db) = (
                d.first()
                    .context("the paired sample needs two devices per arm")?,
                d.get(1)
                    .context("the paired sample needs two devices per arm")?,
            );
            let r = edit_round(da, db, &edits[i], &pull_dirs[i], round, seq[i])
                .await
                .with_context(|| format!("arm {}", ["A", "B"][i]))?;
            lat[i].push(r.latency_ms);
            requests[i] += r.requests;
            seq[i] = r.b_seq;
        }
    }
    for (i, arm) in [&mut *a, &mut *b].into_iter().enumerate() {
        let mut l = lat[i].clone();
        l.sort_by(f64::total_cmp);
        let q = |p: f64| crate::sample::sync_client::nearest_rank(&l, p);
        arm.m.timing(EDIT_P50, q(0.50), "ms", Better::Lower);
        arm.m.timing("edit.p95_ms", q(0.95), "ms", Better::Lower);
        arm.m.exact("edit.rounds", rounds as f64, "count");
        arm.m
            .exact("edit.push_requests", requests[i] as f64, "count");
    }
    let [la, lb] = lat;
    Ok((
        PairSeries {
            a: la,
            b: lb,
            aggregate: PairAggregate::Median,
            slice: 1,
        },
        seq,
    ))
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
        if let Some(bad) = failures(stats) {
            bail!(
                "arm {name}: {} of {} requests failed ({bad})",
                stats.errors(),
                stats.requests,
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

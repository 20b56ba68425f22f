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

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::key::RouteLoadKey;
use loadgen::Device;
use loadgen::webdav::client::Recorder as DavRecorder;
use loadgen::webdav::{DavClient, Depth};
use reports::schema::{Better, PairAggregate, PairSeries, PairedSample};
use scenarios::scenario::{Phase, Protocol, RouteBound};

use crate::sample::obsync_client::ObsyncClient;
use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::sync_client::{SyncClient, encode_histogram};
use crate::sample::target::{Server, TargetSpec};

/// The key of the paired cold push's wall time (the sum of its per-file pairs).
pub const COLD_PUSH_WALL: &str = "cold_push.wall_ms";
/// The key of the paired cold pull's wall time (the sum of its per-file pairs).
pub const COLD_PULL_WALL: &str = "cold_pull.wall_ms";
/// The key of the paired edit propagation's median round.
pub const EDIT_P50: &str = "edit.p50_ms";

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
    let driven = match plan.scenario.protocol {
        Protocol::ObsyncV1 => rt.block_on(drive(
            plan,
            a_first,
            [&dir_a, &dir_b],
            &mut arm_a,
            &mut arm_b,
            &mut pairs,
            &mut skipped,
        )),
        Protocol::Webdav => rt.block_on(drive_dav(
            plan,
            a_first,
            [&plan.target, b],
            [&dir_a, &dir_b],
            &mut arm_a,
            &mut arm_b,
            &mut pairs,
            &mut skipped,
        )),
        Protocol::Couchdb => Err(anyhow::anyhow!(
            "ab --paired drives obsync-v1 and WebDAV scenarios; {} speaks CouchDB",
            plan.scenario.name
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

async fn drive(
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
        if !skipped.iter().any(|x| x == phase.name()) {
            log_window(phase, logs, a, b);
        }
    }
    Ok(())
}

/// Each arm's log counts over the phase just driven (its own server's log, so exact per arm
/// however the phase interleaved the arms).
fn log_window(
    phase: &Phase,
    before: [crate::sample::logtap::Reading; 2],
    a: &mut Arm,
    b: &mut Arm,
) {
    if matches!(phase, Phase::ColdStart) {
        return;
    }
    let name = phase.name();
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

/// The WebDAV flow: cold push and cold pull file by file (WebDAV has no devices: each arm is
/// a client of its own server); edit propagation (poll-bounded there) and route loads are
/// named as skipped.
#[allow(clippy::too_many_arguments)]
async fn drive_dav(
    plan: &SamplePlan,
    a_first: bool,
    specs: [&TargetSpec; 2],
    dirs: [&Path; 2],
    a: &mut Arm,
    b: &mut Arm,
    pairs: &mut BTreeMap<String, PairSeries>,
    skipped: &mut Vec<String>,
) -> anyhow::Result<()> {
    let client = |spec: &TargetSpec, server: &Server| -> anyhow::Result<DavClient> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        Ok(
            DavClient::with_root(target, spec.def.auth.as_ref(), spec.def.root())
                .with_walk_bounds(spec.def.walk.unwrap_or_default()),
        )
    };
    let clients = [client(specs[0], &a.server)?, client(specs[1], &b.server)?];
    let depth = match plan.scenario.webdav.as_ref().map(|o| o.depth.as_str()) {
        Some("infinity") => Depth::Infinity,
        _ => Depth::One,
    };
    let pull_dirs = dirs.map(|d| d.join("pull-b"));
    for phase in &plan.scenario.phases {
        let logs = [a.server.log.read(), b.server.log.read()];
        match phase {
            Phase::ColdStart => {}
            Phase::ColdPush { .. } => {
                let s = dav_push_pairs(plan, a_first, &clients, a, b).await?;
                pairs.insert(COLD_PUSH_WALL.to_owned(), s);
            }
            Phase::ColdPull => {
                let s = dav_pull_pairs(plan, a_first, &clients, depth, &pull_dirs, a, b).await?;
                pairs.insert(COLD_PULL_WALL.to_owned(), s);
            }
            other => skipped.push(other.name().to_owned()),
        }
        if !skipped.iter().any(|x| x == phase.name()) {
            log_window(phase, logs, a, b);
        }
    }
    Ok(())
}

/// A WebDAV cold push, file by file: the folders are made on both arms first (MKCOL, not
/// timed), then each file is PUT to both arms in turn, the first arm alternating ABBA.
async fn dav_push_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[DavClient; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let folders: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            let parts: Vec<&str> = f.split('/').collect();
            (1..parts.len())
                .map(|n| parts[..n].join("/"))
                .collect::<Vec<_>>()
        })
        .collect();
    let rec = DavRecorder::new(false);
    // A BTreeSet of paths sorts a parent before its children.
    for (i, c) in clients.iter().enumerate() {
        for d in &folders {
            c.mkcol(&rec, d)
                .await
                .with_context(|| format!("arm {}: cold push: MKCOL {d}", ["A", "B"][i]))?;
        }
    }
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    let mut bytes = 0u64;
    for (i, rel) in files.iter().enumerate() {
        let body = bytes::Bytes::from(
            std::fs::read(plan.vault_dir.join(rel)).with_context(|| format!("reading {rel}"))?,
        );
        bytes += body.len() as u64;
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |c: &DavClient| -> anyhow::Result<f64> {
            let t = Instant::now();
            c.put(&rec, rel, body.clone())
                .await
                .with_context(|| format!("PUT {rel}"))?;
            Ok(ms(t.elapsed()))
        };
        let (ta, tb) = if first_a {
            let x = one(&clients[0]).await.context("arm A")?;
            (x, one(&clients[1]).await.context("arm B")?)
        } else {
            let y = one(&clients[1]).await.context("arm B")?;
            (one(&clients[0]).await.context("arm A")?, y)
        };
        s.a.push(ta);
        s.b.push(tb);
    }
    for (arm, series) in [(&mut *a, &s.a), (&mut *b, &s.b)] {
        arm.m
            .timing(COLD_PUSH_WALL, series.iter().sum(), "ms", Better::Lower);
        arm.m.exact("cold_push.files", files.len() as f64, "count");
        arm.m.exact("cold_push.bytes", bytes as f64, "bytes");
        arm.m.exact("cold_push.dirs", folders.len() as f64, "count");
    }
    Ok(s)
}

/// A WebDAV cold pull, file by file: each arm's tree is walked first (not timed) and must list
/// the vault's files; then each file is fetched from both arms in turn (ABBA) into each arm's
/// own copy, which must end byte-identical to the vault.
async fn dav_pull_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[DavClient; 2],
    depth: Depth,
    pull_dirs: &[PathBuf; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let rec = DavRecorder::new(false);
    for (i, c) in clients.iter().enumerate() {
        let arm = ["A", "B"][i];
        let listing = loadgen::webdav::walk(c, &rec, "", depth)
            .await
            .with_context(|| format!("arm {arm}: cold pull: the walk"))?;
        let listed: Vec<&String> = listing.files().map(|(p, _)| p).collect();
        if listed.len() != files.len() || listed.iter().zip(&files).any(|(l, f)| *l != f) {
            bail!(
                "arm {arm}: cold pull: the server lists {} files where the vault has {}",
                listed.len(),
                files.len()
            );
        }
        std::fs::create_dir_all(&pull_dirs[i])
            .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
    }
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    for (i, rel) in files.iter().enumerate() {
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |k: usize| -> anyhow::Result<f64> {
            let t = Instant::now();
            let body = clients[k]
                .get(&rec, rel)
                .await
                .with_context(|| format!("arm {}: GET {rel}", ["A", "B"][k]))?;
            let took = ms(t.elapsed());
            // `rel` is the vault's own path, never the server's.
            let dest = pull_dirs[k].join(rel);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&dest, &body).with_context(|| format!("writing {}", dest.display()))?;
            Ok(took)
        };
        let (ta, tb) = if first_a {
            let x = one(0).await?;
            (x, one(1).await?)
        } else {
            let y = one(1).await?;
            (one(0).await?, y)
        };
        s.a.push(ta);
        s.b.push(tb);
    }
    pulled(plan, pull_dirs, &s, a, b)?;
    Ok(s)
}

/// After a paired pull: each arm's tree must be byte-identical to the vault (else the sample
/// fails); each arm's keys are the sum of its per-file times and the file count.
fn pulled(
    plan: &SamplePlan,
    pull_dirs: &[PathBuf; 2],
    s: &PairSeries,
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<()> {
    for (i, arm) in [a, b].into_iter().enumerate() {
        let got =
            crate::prepare::vault::tree_digest(&pull_dirs[i]).context("hashing the pulled tree")?;
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
        aggregate: PairAggregate::PairMedian,
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
    let mut s = PairSeries {
        a: Vec::with_capacity(la.1.len()),
        b: Vec::with_capacity(la.1.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    for (i, (fid, ca)) in la.1.iter().enumerate() {
        let cb = &lb.1[fid];
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |dev: &Device, dir: &Path, c: &loadgen::Change| -> anyhow::Result<f64> {
            let t = Instant::now();
            loadgen::fetch_and_write(dev, dir, c)
                .await
                .with_context(|| format!("fetching file {fid}"))?;
            Ok(ms(t.elapsed()))
        };
        let (ta, tb) = if first_a {
            let x = one(la.0, &pull_dirs[0], ca).await.context("arm A")?;
            (x, one(lb.0, &pull_dirs[1], cb).await.context("arm B")?)
        } else {
            let y = one(lb.0, &pull_dirs[1], cb).await.context("arm B")?;
            (one(la.0, &pull_dirs[0], ca).await.context("arm A")?, y)
        };
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
    use crate::sample::obsync_client::{EditFile, edit_round};
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

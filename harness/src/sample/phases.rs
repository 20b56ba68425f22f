//! The scenario's phases, driven inside a sample with signed devices: cold push with the
//! uploader's own long poll counting its echo, cold pull verified against the vault digest,
//! idle resync, edit propagation, folder rename, route load. Each phase's server counters
//! (fsyncs by kind, journal flushes, ...) are read from `/metrics` before and after, and its
//! server cost (CPU, io per request or file) at its boundaries through a [`Boundary`].

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::{Device, PushOpts, Target, TransferReport};
use reports::schema::Better;
use scenarios::scenario::{Phase, RouteBound};

use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::server_cost::{PhaseCost, Work};
use crate::sample::target::Server;

/// What happens at every phase boundary: a timing sample reads the server's cost through
/// `procstat` ([`PhaseCost`]); a cost sample marks the boundary for its instruction counter or
/// syscall trace (`sample::cost`).
pub trait Boundary {
    /// A phase (or route-load step) starts.
    fn begin(&mut self) -> anyhow::Result<()>;
    /// The phase begun last ended after `work`; its keys go under `prefix`.
    fn end(
        &mut self,
        prefix: &str,
        work: Work,
        route_step: bool,
        m: &mut Metrics,
    ) -> anyhow::Result<()>;
    /// Whether to read the server's `/metrics` around phases (an instruction-count run does
    /// not: the reads would be counted).
    fn scrapes(&self) -> bool {
        true
    }
    /// The server was restarted (a crash phase) and now runs as `pid`.
    fn restarted(&mut self, _pid: u32) {}
}

impl Boundary for PhaseCost {
    fn begin(&mut self) -> anyhow::Result<()> {
        PhaseCost::begin(self)
    }
    fn end(
        &mut self,
        prefix: &str,
        work: Work,
        route_step: bool,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        PhaseCost::end(self, prefix, work, route_step, m)
    }
    fn restarted(&mut self, pid: u32) {
        *self = PhaseCost::new(pid);
    }
}

/// Runs every phase of the plan's scenario against `server`, with `bounds` at each phase
/// boundary. A target without `/metrics` (a 404 or any failed first read) gets no server
/// counter keys; its cost keys come from `/proc`.
pub async fn drive(
    plan: &SamplePlan,
    server: &mut Server,
    sample_dir: &Path,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
) -> anyhow::Result<()> {
    let target = Target::parse(&server.url(), false)?;
    let token = read_setup_token(&server.data_dir)?;
    let has_metrics = bounds.scrapes() && loadgen::scrape_metrics(&target).await.is_ok();
    // With fault rules the devices talk to the target through the hop; `/metrics` is read
    // directly.
    let hop = match plan.scenario.faults.as_slice() {
        [] => None,
        rules => Some(
            loadgen::faulthop::FaultHop::start(server.addr, hop_rules(rules), plan.seed)
                .await
                .context("starting the fault hop")?,
        ),
    };
    let device_target = match &hop {
        Some(h) => Target::parse(&h.url(), false)?,
        None => target.clone(),
    };
    let devices = loadgen::enroll(&device_target, &token, plan.scenario.devices, plan.seed)
        .await
        .context("enrolling devices")?;
    let (a, b) = (&devices[0], &devices[1]);
    let pull_dir = sample_dir.join("pull-b");
    let mut b_seq = 0u64;
    for phase in &plan.scenario.phases {
        let name = phase.name();
        if matches!(phase, Phase::ColdStart) {
            continue;
        }
        let before = scrape(&target, has_metrics).await?;
        bounds.begin()?;
        let work = match phase {
            Phase::ColdStart => continue,
            Phase::ColdPush {
                in_flight,
                checkpoint_every,
            } => {
                let opts = PushOpts {
                    in_flight: *in_flight,
                    checkpoint_every: *checkpoint_every,
                };
                let (r, echo) = push_with_echo(a, &plan.vault_dir, &opts).await?;
                bounds.end(name, transfer_work(&r), false, m)?;
                transfer_metrics(name, &r, m);
                m.timing(
                    format!("{name}.own_echo.answers"),
                    echo.answers as f64,
                    "count",
                    Better::Lower,
                );
                m.exact(
                    format!("{name}.own_echo.changes"),
                    echo.changes as f64,
                    "count",
                );
                if r.checkpoints.len() > 1 {
                    for cp in &r.checkpoints {
                        m.timing(
                            format!("{name}.checkpoint.{:07}.files_per_s", cp.files),
                            cp.files_per_s,
                            "files/s",
                            Better::Higher,
                        );
                    }
                }
                let after = scrape(&target, has_metrics).await?;
                let delta = counter_delta(&before, &after);
                let fsyncs: f64 = delta
                    .iter()
                    .filter(|(k, _)| k.starts_with("fsyncs."))
                    .map(|(_, v)| v)
                    .sum();
                let data: f64 = delta
                    .iter()
                    .filter(|(k, _)| k.starts_with("fsyncs.") && !k.ends_with("nonce_log"))
                    .map(|(_, v)| v)
                    .sum();
                if r.files > 0 && has_metrics {
                    // Data fsyncs (chunk file, chunk dir, journal) per file are a property of the
                    // build; all fsyncs also count the nonce log, which the echo long poll feeds.
                    m.exact(
                        format!("{name}.server.data_fsyncs_per_file"),
                        round6(data / r.files as f64),
                        "fsyncs/file",
                    );
                    m.resource(
                        format!("{name}.server.fsyncs_per_file"),
                        round6(fsyncs / r.files as f64),
                        "fsyncs/file",
                    );
                }
                None
            }
            Phase::ColdPull => {
                let r = loadgen::pull_vault(b, &pull_dir, b_seq)
                    .await
                    .context("cold pull")?;
                let work = transfer_work(&r);
                b_seq = r.last_seq;
                transfer_metrics(name, &r, m);
                let got = crate::commands::vault::tree_digest(&pull_dir)
                    .context("hashing the pulled tree")?;
                if got != plan.vault_digest {
                    bail!(
                        "cold pull: the pulled tree's digest {got} differs from the vault's {}",
                        plan.vault_digest
                    );
                }
                // Checked above: a pulled tree that differs fails the sample.
                m.passed(format!("{name}.byte_identical"));
                Some(work)
            }
            Phase::IdleResync => {
                let r = loadgen::resync(b, &pull_dir, b_seq)
                    .await
                    .context("idle resync")?;
                let work = Work {
                    requests: r.requests,
                    files: None,
                };
                b_seq = b_seq.max(r.last_seq);
                m.exact(format!("{name}.requests"), r.requests as f64, "count");
                m.exact(format!("{name}.mismatched"), r.mismatched as f64, "count");
                m.exact(format!("{name}.files_examined"), r.files as f64, "count");
                m.timing(
                    format!("{name}.wall_ms"),
                    r.wall_ns as f64 / 1e6,
                    "ms",
                    Better::Lower,
                );
                Some(work)
            }
            Phase::EditPropagation { rounds } => {
                let (seq, requests) =
                    edit_propagation(a, b, plan, sample_dir, &pull_dir, b_seq, *rounds, m).await?;
                b_seq = seq;
                Some(Work {
                    requests,
                    files: None,
                })
            }
            Phase::FolderRename => {
                let Some(folder) = largest_folder(&plan.vault_dir)? else {
                    bail!("folder rename: the vault has no folder");
                };
                let to = format!("{folder} renamed");
                let t0 = Instant::now();
                let v = loadgen::rename_path(a, &folder, &to)
                    .await
                    .context("folder rename")?;
                m.timing(
                    format!("{name}.wall_ms"),
                    ms(t0.elapsed()),
                    "ms",
                    Better::Lower,
                );
                m.exact(format!("{name}.versions"), v.len() as f64, "count");
                m.exact(
                    format!("{name}.requests"),
                    v.iter().map(|p| p.requests).sum::<u64>() as f64,
                    "count",
                );
                let t1 = Instant::now();
                let r = loadgen::pull_vault(b, &pull_dir, b_seq)
                    .await
                    .context("folder rename: pull on B")?;
                b_seq = r.last_seq;
                m.timing(
                    format!("{name}.propagate_ms"),
                    ms(t1.elapsed()),
                    "ms",
                    Better::Lower,
                );
                m.exact(format!("{name}.pull_requests"), r.requests as f64, "count");
                // Every file must have moved; an emptied old folder may stay behind on B.
                let work = Work {
                    requests: v.iter().map(|p| p.requests).sum::<u64>() + r.requests,
                    files: None,
                };
                let old = pull_dir.join(&folder);
                let (new_there, old_gone) = (
                    pull_dir.join(&to).is_dir(),
                    !old.exists() || count_files(&old)? == 0,
                );
                if !new_there || !old_gone {
                    bail!(
                        "folder rename: B does not show {folder:?} renamed to {to:?} (new folder present: {new_there}, old folder emptied: {old_gone})"
                    );
                }
                Some(work)
            }
            Phase::Crash {
                in_flight,
                crashes,
                kill_at,
            } => {
                let how = crate::sample::crash::How {
                    in_flight: *in_flight,
                    crashes: *crashes,
                    kill_at: *kill_at,
                };
                crate::sample::crash::run(plan, server, a, b, how, sample_dir, m).await?;
                bounds.restarted(server.pid);
                continue; // the restarted server's counters start again from zero
            }
            Phase::RouteLoad {
                routes, in_flight, ..
            } => {
                let bound = phase
                    .route_bound()
                    .context("route_load step without a valid bound")?;
                // Each step is its own cost window; the phase's begin above is closed unused.
                route_load(&devices, routes, in_flight, bound, plan.seed, m, bounds).await?;
                continue; // counters under a timed load are not exact
            }
        };
        if let Some(work) = work {
            bounds.end(name, work, false, m)?;
        }
        if !has_metrics {
            continue;
        }
        let after = scrape(&target, has_metrics).await?;
        for (k, v) in counter_delta(&before, &after) {
            let key = format!("{name}.server.{k}");
            let unit = if k.contains("bytes") {
                "bytes"
            } else {
                "count"
            };
            // Nonce records and long-poll wake-ups include the long polls held during the phase,
            // whose number depends on timing: load-dependent, so not exact.
            if k.starts_with("nonce") || k.ends_with("nonce_log") || k.starts_with("longpoll") {
                m.resource(key, v, unit);
            } else {
                m.exact(key, v, unit);
            }
        }
    }
    if let Some(h) = hop {
        hop_metrics(&h.counts(), deterministic(&plan.scenario.phases), m);
    }
    Ok(())
}

fn hop_rules(rules: &[scenarios::scenario::FaultRule]) -> Vec<loadgen::faulthop::FaultRule> {
    use loadgen::faulthop::FaultKind as K;
    use scenarios::scenario::FaultKind as S;
    rules
        .iter()
        .map(|r| loadgen::faulthop::FaultRule {
            route: r.route.clone(),
            kind: match r.kind {
                S::StatusBefore => K::StatusBefore,
                S::StatusAfter => K::StatusAfter,
                S::ResetAfter => K::ResetAfter,
                S::Delay => K::Delay,
                S::StallBody => K::StallBody,
            },
            rate: r.rate,
            ms: r.ms,
        })
        .collect()
}

/// True when every request happens in an order fixed by the scenario: one file in flight and
/// no timed or concurrent phase, so the hop's seeded schedule picks the same requests on every
/// run and its counts are exact.
fn deterministic(phases: &[Phase]) -> bool {
    phases.iter().all(|p| match p {
        Phase::ColdStart | Phase::ColdPull | Phase::IdleResync | Phase::FolderRename => true,
        Phase::ColdPush { in_flight, .. } => *in_flight == 1,
        Phase::EditPropagation { .. } | Phase::Crash { .. } | Phase::RouteLoad { .. } => false,
    })
}

/// The hop's counts as keys: faults injected, requests seen, and what the target did twice
/// under the client's retries (a version created twice, a chunk stored twice).
fn hop_metrics(c: &loadgen::faulthop::HopCounts, exact: bool, m: &mut Metrics) {
    let put = |m: &mut Metrics, key: String, v: f64| {
        if exact {
            m.exact(key, v, "count");
        } else {
            m.resource(key, v, "count");
        }
    };
    for (k, v) in &c.injected {
        put(m, format!("faults.injected.{k}"), *v as f64);
    }
    for (k, v) in &c.requests {
        let key = format!("faults.requests.{k}");
        if k == "changes" {
            // The uploader's own long poll: how often it is answered depends on timing.
            m.resource(key, *v as f64, "count");
        } else {
            put(m, key, *v as f64);
        }
    }
    let twice = |route: &str| c.created_twice.get(route).copied().unwrap_or(0) as f64;
    put(m, "faults.duplicate_versions".into(), twice("post-version"));
    put(m, "faults.chunks_stored_twice".into(), twice("put-chunk"));
    let files = m.map.get("cold_push.files").map(|x| x.value);
    let reqs = m.map.get("cold_push.requests").map(|x| x.value);
    if let (Some(f), Some(r)) = (files, reqs)
        && f > 0.0
    {
        let per = round6(r / f);
        if exact {
            m.exact("faults.push_requests_per_file", per, "requests/file");
        } else {
            m.resource("faults.push_requests_per_file", per, "requests/file");
        }
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The setup token the server wrote into its data dir at first start.
fn read_setup_token(data_dir: &Path) -> anyhow::Result<String> {
    let p = data_dir.join("setup-token");
    let t = std::fs::read_to_string(&p)
        .with_context(|| format!("reading the server's setup token {}", p.display()))?;
    Ok(t.trim().to_owned())
}

/// The server's `/metrics` (nothing for a target without them).
async fn scrape(target: &Target, has_metrics: bool) -> anyhow::Result<BTreeMap<String, f64>> {
    if !has_metrics {
        return Ok(BTreeMap::new());
    }
    loadgen::scrape_metrics(target)
        .await
        .context("reading the server's /metrics")
}

/// The work of a push or pull: its requests and files.
fn transfer_work(r: &TransferReport) -> Work {
    Work {
        requests: r.requests,
        files: Some(r.files),
    }
}

/// Deltas of the server's durability counters, named without the `obsync_` prefix:
/// `fsyncs.journal`, `journal_flushes`, `journal_records`, ...
fn counter_delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (k, v) in after {
        let Some(rest) = k.strip_prefix("obsync_") else {
            continue;
        };
        if rest.starts_with("requests_total") || !rest.contains("_total") {
            continue; // per-request counts are measured client-side; gauges are not deltas
        }
        let (name, labels) = match rest.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (rest, ""),
        };
        let mut key = name.trim_end_matches("_total").to_owned();
        for l in labels.split(',').filter(|l| !l.is_empty()) {
            if let Some((_, val)) = l.split_once('=') {
                key.push('.');
                key.push_str(val.trim_matches('"'));
            }
        }
        out.insert(key, v - before.get(k).copied().unwrap_or(0.0));
    }
    out
}

/// Persists a histogram through the contract's codec (base64 of V2 + DEFLATE).
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<String> {
    contract::histogram::encode(h)
}

fn transfer_metrics(p: &str, r: &TransferReport, m: &mut Metrics) {
    m.timing(
        format!("{p}.wall_ms"),
        r.wall_ns as f64 / 1e6,
        "ms",
        Better::Lower,
    );
    m.timing(
        format!("{p}.files_per_s"),
        r.files_per_s(),
        "files/s",
        Better::Higher,
    );
    m.exact(format!("{p}.files"), r.files as f64, "count");
    m.exact(format!("{p}.dirs"), r.dirs as f64, "count");
    m.exact(format!("{p}.bytes"), r.bytes as f64, "bytes");
    m.exact(format!("{p}.requests"), r.requests as f64, "count");
    m.exact(
        format!("{p}.chunks_transferred"),
        r.chunks_transferred as f64,
        "count",
    );
    if p == "cold_push" {
        m.exact(
            format!("{p}.chunks_present"),
            r.chunks_present as f64,
            "count",
        );
    }
    let mut errors = 0;
    for (route, s) in &r.routes {
        m.exact(format!("{p}.requests.{route}"), s.requests as f64, "count");
        errors += s.errors();
        let sum = s.summary();
        m.timing(
            format!("{p}.{route}.p50_us"),
            sum.p50_us,
            "us",
            Better::Lower,
        );
        m.timing(
            format!("{p}.{route}.p95_us"),
            sum.p95_us,
            "us",
            Better::Lower,
        );
        m.timing(
            format!("{p}.{route}.p99_us"),
            sum.p99_us,
            "us",
            Better::Lower,
        );
        if let Some(h) = encode_histogram(s.headline()) {
            m.histograms.insert(format!("{p}.{route}"), h);
        }
    }
    m.exact(format!("{p}.errors"), errors as f64, "count");
}

#[derive(Default)]
struct Echo {
    answers: u64,
    changes: u64,
}

/// Pushes the vault while the same device holds its long poll, as the real plugin does, and
/// counts the answers it gets for its own posts (obsync-speed-report: a quarter of the
/// uploading device's requests were its own echo).
async fn push_with_echo(
    a: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> anyhow::Result<(TransferReport, Echo)> {
    let (tx, mut rx) = tokio::sync::watch::channel(None::<u64>);
    let poller = a.clone();
    let me = a.device_id().to_owned();
    let echo = tokio::spawn(async move {
        let mut e = Echo::default();
        let mut since = 0u64;
        let mut deadline: Option<Instant> = None;
        loop {
            if let Some(last) = *rx.borrow_and_update() {
                if since >= last {
                    break;
                }
                let d = *deadline.get_or_insert_with(|| Instant::now() + Duration::from_secs(30));
                if Instant::now() > d {
                    break;
                }
            }
            let r = tokio::select! {
                r = loadgen::wait_changes(&poller, since, 1) => r,
                _ = rx.changed() => continue,
            };
            let Ok(r) = r else { break };
            let own = r.changes.iter().filter(|c| c.device_id == me).count() as u64;
            if own > 0 {
                e.answers += 1;
                e.changes += own;
            }
            since = since.max(r.seq);
        }
        e
    });
    let pushed = loadgen::push_vault(a, dir, opts).await;
    let last = pushed.as_ref().map(|r| r.last_seq).unwrap_or(0);
    let _ = tx.send(Some(last));
    let echo = echo.await.unwrap_or_default();
    Ok((pushed.context("cold push")?, echo))
}

/// A edits one note while B holds a long poll; the time from the edit until B has the new bytes
/// on disk, `rounds` times (obsync-speed-report: 20 rounds, p50/p95).
#[allow(clippy::too_many_arguments)]
async fn edit_propagation(
    a: &Device,
    b: &Device,
    plan: &SamplePlan,
    sample_dir: &Path,
    pull_dir: &Path,
    mut b_seq: u64,
    rounds: usize,
    m: &mut Metrics,
) -> anyhow::Result<(u64, u64)> {
    let rel = first_note(&plan.vault_dir)?.context("edit propagation: the vault has no note")?;
    let edit_dir = sample_dir.join("edit-a");
    let src = edit_dir.join(&rel);
    std::fs::create_dir_all(src.parent().unwrap_or(&edit_dir))?;
    std::fs::copy(plan.vault_dir.join(&rel), &src)
        .with_context(|| format!("copying {rel} for editing"))?;
    let file_id = loadgen::file_id_for(&rel);
    let mut lat = Vec::with_capacity(rounds);
    let mut requests = 0u64;
    for round in 0..rounds {
        let (bd, dir, fid) = (b.clone(), pull_dir.to_path_buf(), file_id.clone());
        let waiter = tokio::spawn(async move {
            let mut since = b_seq;
            let give_up = Instant::now() + Duration::from_secs(30);
            while Instant::now() < give_up {
                let r = loadgen::wait_changes(&bd, since, 10).await?;
                for c in &r.changes {
                    if c.file_id == fid {
                        loadgen::fetch_and_write(&bd, &dir, c).await?;
                        return Ok::<_, loadgen::LoadError>(Some((Instant::now(), r.seq)));
                    }
                }
                since = since.max(r.seq);
            }
            Ok(None)
        });
        // Let B's poll be parked on the server before A writes.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t0 = Instant::now();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&src)?;
            writeln!(f, "\nedit round {round}: vaultbench edit propagation")?;
        }
        let pushed = loadgen::push_file(a, &edit_dir, &rel)
            .await
            .context("edit propagation: push on A")?;
        requests += pushed.requests;
        let got = waiter.await.context("edit propagation: B's waiter")??;
        let Some((done, seq)) = got else {
            bail!("edit propagation: B never saw round {round}'s edit within 30 s")
        };
        lat.push(ms(done - t0));
        b_seq = seq.max(pushed.seq);
        if std::fs::read(pull_dir.join(&rel))? != std::fs::read(&src)? {
            bail!("edit propagation: B's copy of {rel} differs from A's after round {round}");
        }
    }
    lat.sort_by(|x, y| x.total_cmp(y));
    m.timing("edit.p50_ms", nearest_rank(&lat, 0.50), "ms", Better::Lower);
    m.timing("edit.p95_ms", nearest_rank(&lat, 0.95), "ms", Better::Lower);
    m.timing(
        "edit.max_ms",
        *lat.last().unwrap_or(&0.0),
        "ms",
        Better::Lower,
    );
    m.exact("edit.rounds", rounds as f64, "count");
    m.exact("edit.push_requests", requests as f64, "count");
    Ok((b_seq, requests))
}

/// Nearest-rank percentile of sorted values (p95 of 20 is the 19th).
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

async fn route_load(
    devices: &[Device],
    routes: &[String],
    levels: &[usize],
    bound: RouteBound,
    seed: u64,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
) -> anyhow::Result<()> {
    let (seconds, max_requests) = bound.duration_and_ceiling();
    for route in routes {
        let Some(r) = loadgen::Route::ALL.into_iter().find(|r| r.name() == route) else {
            let known: Vec<&str> = loadgen::Route::ALL.iter().map(|r| r.name()).collect();
            bail!(
                "route load: unknown route {route:?} (known: {})",
                known.join(", ")
            );
        };
        for &level in levels {
            let cfg = loadgen::RouteLoadConfig {
                route: r,
                mode: loadgen::Mode::Closed { in_flight: level },
                duration: Duration::from_secs_f64(seconds),
                max_requests,
                seed,
            };
            bounds.begin()?;
            let rep = loadgen::run_route_load(devices, &cfg)
                .await
                .with_context(|| format!("route load {route} at {level} in flight"))?;
            let key = contract::key::RouteLoadKey::new(route, level as u32, "p50_us");
            // The step's preparation (a few chunk uploads and versions, the same in every run)
            // falls in its window too.
            bounds.end(
                &key.level(),
                Work {
                    requests: rep.requests,
                    files: None,
                },
                true,
                m,
            )?;
            let stats = &rep.stats;
            // A failed request is data for the load generator, but a recording of a target that
            // answers 5xx or drops connections is not a measurement of the build: fail the sample.
            if stats.errors() > 0 {
                let bad: Vec<String> = stats
                    .status
                    .iter()
                    .filter(|(k, _)| !k.starts_with('2'))
                    .map(|(k, v)| format!("{v} x {k}"))
                    .collect();
                bail!(
                    "route load {route} at {level} in flight: {} of {} requests failed ({})",
                    stats.errors(),
                    stats.requests,
                    bad.join(", ")
                );
            }
            if let RouteBound::Requests(n) = bound
                && rep.requests != n
            {
                bail!(
                    "route load {route} at {level} in flight: {} of the step's {n} requests done within {seconds} s",
                    rep.requests
                );
            }
            let sum = stats.summary();
            m.timing(key.to_string(), sum.p50_us, "us", Better::Lower);
            m.timing(
                key.with_stat("p99_us").to_string(),
                sum.p99_us,
                "us",
                Better::Lower,
            );
            // Throughput is a property of a time-bounded step; a fixed-work step's is the
            // same work over a wall time the machine's load decides, so it is not reported.
            if matches!(bound, RouteBound::Time { .. }) {
                m.timing(
                    key.with_stat("rps").to_string(),
                    rep.throughput_per_s,
                    "req/s",
                    Better::Higher,
                );
            } else {
                m.exact(
                    key.with_stat("requests").to_string(),
                    rep.requests as f64,
                    "count",
                );
            }
            // A count of failed requests, not a timing (any failure also fails the sample).
            m.exact(
                key.with_stat("errors").to_string(),
                stats.errors() as f64,
                "count",
            );
            if let Some(h) = encode_histogram(stats.headline()) {
                m.histograms.insert(key.level(), h);
            }
        }
    }
    Ok(())
}

/// The first Markdown note in sorted order (deterministic for a vault).
fn first_note(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut stack = vec![dir.to_path_buf()];
    let mut best: Option<String> = None;
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)?.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
            if rel.starts_with('.') {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if rel.ends_with(".md")
                && std::fs::metadata(&p)?.len() > 0
                && best.as_ref().is_none_or(|b| rel < *b)
            {
                best = Some(rel);
            }
        }
    }
    Ok(best)
}

/// The top-level folder with the most files under it (ties: the first by name).
fn largest_folder(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut best: Option<(u64, String)> = None;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type()?.is_dir() || name.starts_with('.') {
            continue;
        }
        let n = count_files(&e.path())?;
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, name));
        }
    }
    Ok(best.map(|(_, n)| n))
}

fn count_files(d: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(d)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            n += count_files(&e.path())?;
        } else {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_the_report() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.95), 19.0); // "p95: the 19th of 20"
        assert_eq!(nearest_rank(&v, 0.50), 10.0);
    }

    #[test]
    fn counter_names() {
        let before: BTreeMap<String, f64> =
            [("obsync_fsyncs_total{kind=\"journal\"}".to_owned(), 2.0)]
                .into_iter()
                .collect();
        let after: BTreeMap<String, f64> = [
            ("obsync_fsyncs_total{kind=\"journal\"}".to_owned(), 7.0),
            ("obsync_journal_flushes_total".to_owned(), 3.0),
            (
                "obsync_requests_total{route=\"x\",status=\"200\"}".to_owned(),
                9.0,
            ),
            ("obsync_head_seq".to_owned(), 4.0),
        ]
        .into_iter()
        .collect();
        let d = counter_delta(&before, &after);
        assert_eq!(d.get("fsyncs.journal"), Some(&5.0));
        assert_eq!(d.get("journal_flushes"), Some(&3.0));
        assert_eq!(d.len(), 2);
    }
}

//! The scenario's phases, driven once for every protocol over a [`SyncClient`] (the seam in
//! `sample::sync_client`): cold push, cold pull verified against the vault digest, idle
//! resync, edit propagation, folder rename, route load (and the crash phase, where the
//! protocol supports it). Each phase's server cost (CPU, io per request or file) is read at its
//! boundaries through a [`Boundary`]; the client adds its protocol's own keys (a server's
//! `/metrics` counters, a push echo, poll counts).

use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

use contract::key::{HistogramKey, PhaseKey, PhaseRouteKey, RouteLoadKey, Scope};
use loadgen::TransferReport;
use reports::schema::Better;
use scenarios::scenario::{Phase, RouteBound};

use crate::sample::fanout;
use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::server_cost::{PhaseCost, Work};
use crate::sample::sync_client::{
    EditJob, PushJob, RouteStep, SyncClient, count_files, encode_histogram, failures, first_note,
    largest_folder, nearest_rank,
};
use crate::sample::target::Server;

/// What happens at every phase boundary: a timing sample reads the server's cost through
/// `procstat` ([`PhaseCost`]); a cost sample marks the boundary for its instruction counter or
/// syscall trace (`sample::cost`).
pub trait Boundary {
    /// A phase (or route-load step) starts.
    fn begin(&mut self) -> anyhow::Result<()>;
    /// The phase begun last ended after `work`; its keys go under `scope`.
    fn end(
        &mut self,
        scope: &Scope,
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
    /// A cold push of `phase` with checkpoints starts (after [`Boundary::begin`]): a cost run
    /// starts cutting it into checkpoint windows.
    fn push_started(&mut self, _phase: &str) -> anyhow::Result<()> {
        Ok(())
    }
    /// That push returned `r` (before [`Boundary::end`]).
    fn push_ended(&mut self, _r: &loadgen::TransferReport) -> anyhow::Result<()> {
        Ok(())
    }
}

impl Boundary for PhaseCost {
    fn begin(&mut self) -> anyhow::Result<()> {
        PhaseCost::begin(self)
    }
    fn end(
        &mut self,
        scope: &Scope,
        work: Work,
        route_step: bool,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        PhaseCost::end(self, scope, work, route_step, m)
    }
    fn restarted(&mut self, pid: u32) {
        *self = PhaseCost::new(pid);
    }
}

/// A [`Boundary`] as the cost window a client opens around its own measured steps.
struct Window<'a>(&'a mut dyn Boundary);

impl crate::sample::sync_client::CostWindow for Window<'_> {
    fn begin(&mut self) -> anyhow::Result<()> {
        self.0.begin()
    }
    fn end(
        &mut self,
        scope: &str,
        requests: u64,
        files: u64,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        let work = Work {
            requests,
            files: Some(files),
            timed: false,
        };
        self.0.end(&Scope::phase(scope), work, false, m)
    }
}

/// Runs every phase of the plan's scenario with `client` against `server`, with `bounds` at
/// each phase boundary. Keys shared by every protocol are written here; the client adds its
/// own.
pub async fn drive<C: SyncClient>(
    plan: &SamplePlan,
    server: &mut Server,
    client: &mut C,
    sample_dir: &Path,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
) -> anyhow::Result<()> {
    for phase in &plan.scenario.phases {
        let run = run_phase(plan, phase, server, client, sample_dir, m, bounds);
        within_phase(plan, phase.name(), run).await?;
    }
    client.finish(m);
    Ok(())
}

/// Runs one phase's work within the plan's `--phase-timeout`: past it, an error naming the
/// phase and the flag (the work is dropped).
pub async fn within_phase<T>(
    plan: &SamplePlan,
    name: &str,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(plan.phase_timeout, work).await {
        Ok(r) => r,
        Err(_) => bail!(
            "{name}: the phase did not finish within {} (bound --phase-timeout)",
            contract::quote::duration(plan.phase_timeout)
        ),
    }
}

/// One phase of the plan's scenario (`drive` bounds it by `--phase-timeout`; paired client
/// mode runs it on each arm in turn).
pub(crate) async fn run_phase<C: SyncClient>(
    plan: &SamplePlan,
    phase: &Phase,
    server: &mut Server,
    client: &mut C,
    sample_dir: &Path,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
) -> anyhow::Result<()> {
    let pull_dir = client.pull_dir(sample_dir);
    let name = phase.name();
    {
        match phase {
            Phase::ColdStart => return Ok(()),
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
                client.crash(plan, server, how, sample_dir, m).await?;
                bounds.restarted(server.pid);
                return Ok(()); // the restarted server's counters start again from zero
            }
            Phase::RouteLoad {
                routes, in_flight, ..
            } => {
                let bound = phase
                    .route_bound()
                    .context("route_load step without a valid bound")?;
                // Each step is its own cost window; counters under a timed load are not exact.
                route_load(
                    client,
                    routes,
                    in_flight,
                    bound,
                    plan.seed,
                    m,
                    bounds,
                    &server.log,
                )
                .await?;
                return Ok(());
            }
            Phase::LongPollFanout { .. } | Phase::ConcurrentPush { .. } => {
                long_poll_step(plan, phase, server, client, sample_dir, m, bounds).await?;
                return Ok(());
            }
            Phase::TusResume { cuts } => {
                let job = crate::sample::sync_client::TusResumeJob {
                    plan,
                    server,
                    cuts: *cuts,
                    sample_dir,
                };
                client.tus_resume(job, &mut Window(bounds), m).await?;
                return Ok(());
            }
            // `check_scenario` refuses them before any sample; a plan made otherwise fails.
            Phase::McpListWarm { .. } | Phase::McpCalls { .. } => {
                bail!("{name}: an MCP phase runs only in an MCP scenario")
            }
            _ => {}
        }
        if bounds.scrapes() {
            client.phase_started().await?;
        }
        let log0 = server.log.read();
        bounds.begin()?;
        let mut log_files = None;
        let (work, push_files) = match phase {
            Phase::ColdPush {
                in_flight,
                checkpoint_every,
            } => {
                let sampler = crate::sample::growth::Sampler::start(server.pid, server.log.clone());
                let job = PushJob {
                    vault: &plan.vault_dir,
                    in_flight: *in_flight,
                    checkpoint_every: *checkpoint_every,
                };
                bounds.push_started(name)?;
                let r = client.push(job, m).await?;
                bounds.push_ended(&r)?;
                bounds.end(&Scope::phase(name), transfer_work(&r), false, m)?;
                transfer_metrics(client, name, &r, m);
                for line in sampler.finish(name, &r, m) {
                    eprintln!("{name}: {line}");
                }
                log_files = Some(r.files);
                (None, Some(r.files))
            }
            Phase::ColdPull => {
                let r = client.pull(&pull_dir).await?;
                transfer_metrics(client, name, &r, m);
                log_files = Some(r.files);
                let got = crate::tree::tree_digest(&pull_dir).context("hashing the pulled tree")?;
                if got != plan.vault_digest {
                    bail!(
                        "cold pull: the pulled tree's digest {got} differs from the vault's {} ({} files pulled over {})",
                        plan.vault_digest,
                        r.files,
                        client.protocol()
                    );
                }
                // Checked above: a pulled tree that differs fails the sample.
                m.passed(PhaseKey::new(name, "byte_identical"));
                (Some(transfer_work(&r)), None)
            }
            Phase::IdleResync => {
                let r = client.resync(&pull_dir).await?;
                let key = |stat: &str| PhaseKey::new(name, stat);
                if client.counts_requests() {
                    m.exact(key("requests"), r.requests as f64, "count");
                    m.exact(key("mismatched"), r.mismatched as f64, "count");
                    m.exact(key("files_examined"), r.files as f64, "count");
                }
                m.timing(key("wall_ms"), r.wall_ns as f64 / 1e6, "ms", Better::Lower);
                let work = Work {
                    requests: r.requests,
                    files: None,
                    timed: false,
                };
                (Some(work), None)
            }
            Phase::EditPropagation { rounds } => {
                let rel = first_note(&plan.vault_dir)?
                    .context("edit propagation: the vault has no note")?;
                let job = EditJob {
                    plan,
                    rel: &rel,
                    sample_dir,
                    pull_dir: &pull_dir,
                    rounds: *rounds,
                };
                let mut r = client.edit_propagation(&job, m).await?;
                edit_keys(&mut r.latencies_ms, *rounds, m);
                let work = Work {
                    requests: r.requests,
                    files: None,
                    timed: false,
                };
                (Some(work), None)
            }
            Phase::FolderRename => {
                let requests = folder_rename(client, plan, &pull_dir, name, m).await?;
                let work = Work {
                    requests,
                    files: None,
                    timed: false,
                };
                (Some(work), None)
            }
            Phase::ColdStart
            | Phase::Crash { .. }
            | Phase::RouteLoad { .. }
            | Phase::LongPollFanout { .. }
            | Phase::ConcurrentPush { .. }
            | Phase::McpListWarm { .. }
            | Phase::McpCalls { .. }
            | Phase::TusResume { .. } => {
                unreachable!("handled above")
            }
        };
        if let Some(work) = work {
            bounds.end(&Scope::phase(name), work, false, m)?;
        }
        if server.log.counting() {
            let d = log0.until(&server.log.settle());
            log_keys(&PhaseKey::new(name, "log").to_string(), &d, log_files, m);
        }
        if bounds.scrapes() {
            client.phase_ended(name, push_files, m).await?;
        }
    }
    Ok(())
}

/// Edit propagation's keys from its rounds' delays (sorted here): median, p95, the slowest,
/// and the round count.
pub(crate) fn edit_keys(lat: &mut [f64], rounds: usize, m: &mut Metrics) {
    lat.sort_by(|x, y| x.total_cmp(y));
    m.timing("edit.p50_ms", nearest_rank(lat, 0.50), "ms", Better::Lower);
    m.timing("edit.p95_ms", nearest_rank(lat, 0.95), "ms", Better::Lower);
    m.timing(
        "edit.max_ms",
        *lat.last().unwrap_or(&0.0),
        "ms",
        Better::Lower,
    );
    m.exact("edit.rounds", rounds as f64, "count");
}

/// The log counters of one window under `prefix` (`cold_push.log`): each count, and per file
/// where the phase moved files. A phase's work is fixed (the same files, the same requests),
/// so a count of what the server did for it is exact; a line a server writes on a timer of
/// its own is not, and shows as an unsteady exact key.
pub(crate) fn log_keys(
    prefix: &str,
    d: &crate::sample::logtap::Reading,
    files: Option<u64>,
    m: &mut Metrics,
) {
    for (name, v) in &d.totals {
        m.exact(format!("{prefix}.{name}"), *v, "lines");
        if let Some(f) = files.filter(|f| *f > 0) {
            m.exact(
                format!("{prefix}.{name}_per_file"),
                (v / f as f64 * 1e3).round() / 1e3,
                "lines/file",
            );
        }
    }
    if d.truncated > 0 {
        m.exact(
            format!("{prefix}.lines_truncated"),
            d.truncated as f64,
            "lines",
        );
    }
    if d.unparsed > 0 {
        m.exact(
            format!("{prefix}.values_unparsed"),
            d.unparsed as f64,
            "lines",
        );
    }
}

/// A long-polling step, level by level: each level's server cost window opens when every
/// waiter holds its poll and closes when the deliveries are in (`sample::fanout`).
async fn long_poll_step<C: SyncClient>(
    plan: &SamplePlan,
    phase: &Phase,
    server: &Server,
    client: &mut C,
    sample_dir: &Path,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
) -> anyhow::Result<()> {
    let cfg = |wait_s: u64, settle_ms: u64, work_dir: &Path| loadgen::fanout::FanoutConfig {
        posts: 0,
        interval: Duration::ZERO,
        wait: Duration::from_secs(wait_s),
        settle: Duration::from_millis(settle_ms),
        work_dir: work_dir.to_owned(),
        seed: plan.seed,
        parts: Vec::new(),
    };
    let mut levels = Vec::new();
    match phase {
        Phase::LongPollFanout {
            waiters,
            pushers,
            posts,
            interval_ms,
            wait_s,
            settle_ms,
        } => {
            let mut c = cfg(*wait_s, *settle_ms, &sample_dir.join("fanout"));
            c.posts = *posts;
            c.interval = Duration::from_millis(*interval_ms);
            levels.push(fanout::Level {
                scope: "fanout".into(),
                waiters: *waiters,
                pushers: *pushers,
                cfg: c,
            });
        }
        Phase::ConcurrentPush {
            pushers,
            waiters,
            files,
            wait_s,
            settle_ms,
        } => {
            for &d in pushers {
                let scope = scenarios::scenario::push_level_scope(d);
                let dir = sample_dir.join(&scope);
                let mut c = cfg(*wait_s, *settle_ms, &dir);
                c.parts = fanout::split_vault(&plan.vault_dir, *files, d, &dir)?;
                levels.push(fanout::Level {
                    scope,
                    waiters: *waiters,
                    pushers: d,
                    cfg: c,
                });
            }
        }
        _ => bail!("{} is not a long-polling step", phase.name()),
    }
    let scrapes = bounds.scrapes();
    for level in levels {
        let scope = Scope::phase(&level.scope);
        let work = {
            let mut begin = || bounds.begin();
            fanout::run_level(client, server, level, scrapes, m, &mut begin).await?
        };
        bounds.end(&scope, work, false, m)?;
    }
    Ok(())
}

/// A renames the largest folder, B picks the rename up; B's copy must show every file moved
/// (an emptied old folder may stay behind). Returns the phase's requests.
async fn folder_rename<C: SyncClient>(
    client: &mut C,
    plan: &SamplePlan,
    pull_dir: &Path,
    name: &str,
    m: &mut Metrics,
) -> anyhow::Result<u64> {
    let Some(folder) = largest_folder(&plan.vault_dir)? else {
        bail!("folder rename: the vault has no folder");
    };
    let to = format!("{folder} renamed");
    let counts = client.counts_requests();
    // One step's wall time and, when the client counts them, its requests.
    let step = |m: &mut Metrics, t: Instant, wall: &str, requests: &str, n: u64| {
        m.timing(
            PhaseKey::new(name, wall),
            ms(t.elapsed()),
            "ms",
            Better::Lower,
        );
        if counts {
            m.exact(PhaseKey::new(name, requests), n as f64, "count");
        }
    };
    let t0 = Instant::now();
    let sent = client.rename(&folder, &to, m).await?;
    step(m, t0, "wall_ms", "requests", sent);
    let t1 = Instant::now();
    let pulled = client.propagate_rename(&folder, &to, pull_dir).await?;
    step(m, t1, "propagate_ms", "pull_requests", pulled);
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
    Ok(sent + pulled)
}

/// The work of a push or pull: its requests and files.
fn transfer_work(r: &TransferReport) -> Work {
    Work {
        requests: r.requests,
        files: Some(r.files),
        timed: false,
    }
}

fn transfer_metrics<C: SyncClient>(client: &C, p: &str, r: &TransferReport, m: &mut Metrics) {
    let key = |stat: &str| PhaseKey::new(p, stat);
    m.timing(key("wall_ms"), r.wall_ns as f64 / 1e6, "ms", Better::Lower);
    m.timing(
        key("files_per_s"),
        r.files_per_s(),
        "files/s",
        Better::Higher,
    );
    m.exact(key("files"), r.files as f64, "count");
    m.exact(key("dirs"), r.dirs as f64, "count");
    m.exact(key("bytes"), r.bytes as f64, "bytes");
    if !client.counts_requests() {
        return;
    }
    m.exact(key("requests"), r.requests as f64, "count");
    client.transfer_keys(p, r, m);
    let mut errors = 0;
    for (route, s) in &r.routes {
        m.exact(PhaseKey::requests(p, route), s.requests as f64, "count");
        errors += s.errors();
        let sum = s.summary();
        for (q, v) in [(50, sum.p50_us), (95, sum.p95_us), (99, sum.p99_us)] {
            m.timing(PhaseRouteKey::new(p, route, q), v, "us", Better::Lower);
        }
        if let Some(h) = encode_histogram(s.headline()) {
            m.histograms
                .insert(PhaseRouteKey::new(p, route, 50).histogram().into(), h);
        }
    }
    m.exact(key("errors"), errors as f64, "count");
}

#[allow(clippy::too_many_arguments)]
async fn route_load<C: SyncClient>(
    client: &mut C,
    routes: &[String],
    levels: &[usize],
    bound: RouteBound,
    seed: u64,
    m: &mut Metrics,
    bounds: &mut dyn Boundary,
    log: &crate::sample::logtap::Tap,
) -> anyhow::Result<()> {
    let (seconds, max_requests) = bound.duration_and_ceiling();
    let known = client.routes();
    for route in routes {
        if !known.contains(&route.as_str()) {
            bail!(
                "route load: unknown {} route {route:?} (known: {})",
                client.protocol(),
                known.join(", ")
            );
        }
        for &level in levels {
            let log0 = log.read();
            bounds.begin()?;
            let step = RouteStep {
                route,
                in_flight: level,
                duration: Duration::from_secs_f64(seconds),
                max_requests,
                seed,
            };
            let rep = client
                .route_step(step)
                .await
                .with_context(|| format!("route load {route} at {level} in flight"))?;
            let key = RouteLoadKey::new(route, level as u32, "p50_us");
            // The step's preparation (a few uploads, the same in every run) falls in its
            // window too.
            bounds.end(
                &key.level().into(),
                Work {
                    requests: rep.requests,
                    files: None,
                    timed: matches!(bound, RouteBound::Time { .. }),
                },
                true,
                m,
            )?;
            if log.counting() && rep.requests > 0 {
                // Per request only: a time-bounded step's request count depends on speed.
                let d = log0.until(&log.settle());
                for (name, v) in &d.totals {
                    m.cost(
                        key.with_stat(&format!("log.{name}_per_request"))
                            .to_string(),
                        (v / rep.requests as f64 * 1e3).round() / 1e3,
                        "lines/request",
                    );
                }
            }
            let stats = &rep.stats;
            // A failed request is data for the load generator, but a recording of a target that
            // answers 5xx or drops connections is not a measurement of the build: fail the sample.
            if let Some(bad) = failures(stats) {
                bail!(
                    "route load {route} at {level} in flight: {} of {} requests failed ({bad})",
                    stats.errors(),
                    stats.requests,
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
            m.timing(key.clone(), sum.p50_us, "us", Better::Lower);
            m.timing(key.with_stat("p99_us"), sum.p99_us, "us", Better::Lower);
            // Throughput is a property of a time-bounded step; a fixed-work step's is the
            // same work over a wall time the machine's load decides, so it is not reported.
            if matches!(bound, RouteBound::Time { .. }) {
                m.timing(
                    key.with_stat("rps"),
                    rep.throughput_per_s,
                    "req/s",
                    Better::Higher,
                );
            } else {
                m.exact(key.with_stat("requests"), rep.requests as f64, "count");
            }
            // A count of failed requests, not a timing (any failure also fails the sample).
            m.exact(key.with_stat("errors"), stats.errors() as f64, "count");
            if let Some(h) = encode_histogram(stats.headline()) {
                m.histograms
                    .insert(HistogramKey::from(key.level()).into(), h);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A phase past `--phase-timeout` ends there, named with the flag and a rounded duration;
    /// one within it gives its result.
    #[tokio::test]
    async fn a_phase_past_its_timeout_is_named() {
        let prep = crate::sample::runner::mock::prepared();
        let spec = crate::sample::target::TargetSpec {
            given: "ref".into(),
            def: loadgen::launch::TargetDef::command(vec!["ref".into()], "ref").unwrap(),
        };
        let mut plan = prep.plan(&spec, 1, false);
        plan.phase_timeout = Duration::from_millis(1500);
        let t0 = Instant::now();
        let slow = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        };
        let e = within_phase(&plan, "cold_pull", slow).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "cold_pull: the phase did not finish within 2s (bound --phase-timeout)"
        );
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        let quick = async { Ok(7) };
        assert_eq!(within_phase(&plan, "cold_push", quick).await.unwrap(), 7);
    }
}

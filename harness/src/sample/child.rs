//! One sample, run inside a fresh `vaultbench sample` subprocess: calibration reading, a fresh
//! server with a fresh data dir, the scenario's phases driven through the protocol seam with
//! its protocol's devices or client (the registry's), the server
//! stopped and reaped for its rusage, a second reading; one JSON result on stdout. The
//! measured phases are bracketed by two `/proc` snapshots (in-sample contention), and the
//! server and the generator run on disjoint CPU sets unless the plan says not to pin.

use anyhow::{Context, bail};
use std::path::Path;

use contract::key::{FSYNCS, MetricKey, PhaseKey};
use reports::schema::{Better, ChannelReading, SampleResult};

use crate::sample::contention::{self, Window};
use crate::sample::phases;
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::stopped::{server_metrics, stop_live};
use crate::sample::target::Server;

/// Runs the plan; never panics on a failing target: failures become `errors`.
pub fn execute(plan: &SamplePlan) -> SampleResult {
    let mut result = SampleResult::started(
        plan.scenario.name.clone(),
        plan.index,
        plan.warmup,
        (std::process::id(), 0),
        plan.vault_digest.clone(),
    );
    let sample_dir = plan.work_dir.join(format!("sample-{}", plan.index));
    // Without a cgroup for its targets, this process is their subreaper: started here, before
    // any thread is pinned, so the tracker runs on the whole CPU set, not the server's.
    if !crate::sample::guard::cgroup_possible() {
        crate::sample::subreaper::enable();
    }
    match read_channels(&plan.work_dir) {
        Ok(r) => result.calibration.push(r),
        Err(e) => result
            .errors
            .push(format!("calibration reading before: {e:#}")),
    }
    let mut m = Metrics::default();
    let measured = match &plan.paired_with {
        Some(b) => std::fs::create_dir_all(&sample_dir)
            .with_context(|| format!("creating {}", sample_dir.display()))
            .and_then(|()| {
                crate::sample::paired::measure(
                    plan,
                    b,
                    plan.a_first,
                    &sample_dir,
                    &mut m,
                    &mut result.server_pid,
                    &mut result.contention,
                )
            })
            .map(|p| result.paired = Some(p)),
        None => measure(
            plan,
            &sample_dir,
            &mut m,
            &mut result.server_pid,
            &mut result.contention,
        ),
    };
    if let Err(e) = measured {
        result.errors.push(format!("{e:#}"));
    }
    match read_channels(&plan.work_dir) {
        Ok(r) => result.calibration.push(r),
        Err(e) => result
            .errors
            .push(format!("calibration reading after: {e:#}")),
    }
    // After the reading, not before: deleting the data dir first put its unlinks' journal
    // commit and writeback under the io kernel's flushes (docs/src/gate.md, "In-sample contention").
    let _ = std::fs::remove_dir_all(&sample_dir);
    result.metrics = m.map;
    result.histograms = m.histograms;
    result.profiles = m.profiles;
    result.blocked = m.blocked;
    result
}

fn read_channels(dir: &Path) -> anyhow::Result<ChannelReading> {
    // Writeback left by the previous sample or this one is flushed outside the timed kernels.
    contention::settle(dir).with_context(|| format!("syncfs on {}", dir.display()))?;
    let r = calibration::read_channels(dir)
        .with_context(|| format!("calibration channels in {}", dir.display()))?;
    Ok(ChannelReading {
        cpu_ms: r.cpu_ms,
        io_ms: r.io_ms,
        rtt_ms: r.rtt_ms,
    })
}

fn measure(
    plan: &SamplePlan,
    sample_dir: &Path,
    m: &mut Metrics,
    server_pid: &mut u32,
    in_sample: &mut Option<reports::schema::Contention>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(sample_dir)
        .with_context(|| format!("creating {}", sample_dir.display()))?;
    let want = &plan.scenario.protocol;
    if let Some(has) = plan.target.protocol()
        && has != want.name()
    {
        bail!(
            "target {} speaks {} but scenario {} speaks {}: choose a {} target or a {} scenario",
            plan.target.given,
            has,
            plan.scenario.name,
            want,
            want,
            has
        );
    }
    if plan.cost {
        return measure_cost(plan, sample_dir, m, server_pid);
    }
    // Pinning: this thread takes the server's set before the spawn (the server's tree inherits
    // it) and the generator's set after (the runtime's threads inherit that); the guard puts
    // the original set back before the second calibration reading.
    let allowed = contention::allowed_cpus().context("reading this process's CPU set")?;
    let _restore = Restore(allowed.clone());
    let split = if plan.no_pin {
        None
    } else {
        contention::split_cpus(&allowed)
    };
    if let Some((server_cpus, _)) = &split {
        contention::pin_this_thread(server_cpus).context("pinning the server's CPU set")?;
    }
    let imp = crate::sample::protocols::lookup(plan.scenario.protocol.name())?;
    let data_dir = sample_dir.join("data");
    imp.seed_data_dir(plan, &data_dir)?;
    // Started on this (main) thread: PR_SET_PDEATHSIG follows the spawning thread.
    let mut server = Server::start(&plan.target, &data_dir)?;
    *server_pid = server.pid;
    server.count_log(&plan.scenario.counts)?;
    if let Some((_, generator_cpus)) = &split {
        contention::pin_this_thread(generator_cpus).context("pinning the generator's CPU set")?;
    }
    let threads = loadgen::worker_threads(
        contention::connections(&plan.scenario),
        split.as_ref().map_or(allowed.len(), |(_, g)| g.len()),
    );
    // A stdio server has no readiness probe: its protocol times its boot step by step.
    if !server.is_stdio() {
        m.timing(
            "cold_start.ready_ms",
            server.ready_after.as_secs_f64() * 1e3,
            "ms",
            Better::Lower,
        );
    }
    let rt = loadgen::runtime(threads).context("building the tokio runtime")?;
    let window = Window::start();
    // One phase flow for every protocol; the per-phase server cost reads the target's whole
    // process tree (a forking server's master and workers too).
    let mut cost = crate::sample::server_cost::PhaseCost::new(server.pid);
    let driven = rt.block_on(drive(plan, &mut server, sample_dir, m, &mut cost));
    let mut reading = window
        .finish(server.pid)
        .unwrap_or_else(|e| reports::schema::Contention {
            unavailable: vec![e],
            ..Default::default()
        });
    if let Some((server_cpus, generator_cpus)) = split {
        reading.server_cpus = server_cpus;
        reading.generator_cpus = generator_cpus;
    }
    *in_sample = Some(reading);
    m.resource("generator.threads", threads as f64, "count");
    drop(rt);
    let usage = stop_live(server, "")?;
    driven?;
    server_metrics(&usage, m);
    Ok(())
}

/// Drives the plan's phases against `server` through the scenario's protocol client (the
/// registry's), or through its own client in client mode.
async fn drive(
    plan: &SamplePlan,
    server: &mut Server,
    dir: &Path,
    m: &mut Metrics,
    bounds: &mut dyn phases::Boundary,
) -> anyhow::Result<()> {
    let run = crate::sample::protocols::Run {
        plan,
        server,
        dir,
        m,
        bounds,
    };
    if plan.scenario.client.is_some() {
        // Client mode: the scenario's own client is the devices; the target is as ever.
        return crate::sample::client::drive(run).await;
    }
    let imp = crate::sample::protocols::lookup(plan.scenario.protocol.name())?;
    imp.drive(run).await
}

/// Puts this thread's original CPU set back when dropped.
struct Restore(Vec<usize>);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = contention::pin_this_thread(&self.0);
    }
}

/// The cost sample: the scenario once under callgrind (instructions per phase) and once under
/// strace (syscalls by name per phase), each against a fresh server and data dir. The two runs
/// go side by side, each on a thread of its own: neither count depends on time, and a
/// callgrind run spends most of its wall time waiting (its server's threads take turns on
/// valgrind's one lock, its fsyncs wait for the disk), so the pair takes little longer than
/// callgrind alone. Its other keys are dropped, except the strace run's own `/metrics` fsync
/// counters, kept beside the syscall counts of the same run so the two can be checked against
/// each other.
fn measure_cost(
    plan: &SamplePlan,
    sample_dir: &Path,
    m: &mut Metrics,
    server_pid: &mut u32,
) -> anyhow::Result<()> {
    use crate::sample::cost::CostTool;
    if plan
        .scenario
        .phases
        .iter()
        .any(|p| matches!(p, scenarios::scenario::Phase::Crash { .. }))
    {
        // Instruction counts of a process killed mid-phase are lost with it.
        bail!(
            "--cost does not run crash phases; {} has one",
            plan.scenario.name
        );
    }
    // Each thread spawns its own server: PR_SET_PDEATHSIG follows the spawning thread, and
    // each thread outlives its server (stopped and reaped before the thread returns).
    let (callgrind, strace) = std::thread::scope(|s| {
        let cg = std::thread::Builder::new()
            .name("cost-callgrind".into())
            .spawn_scoped(s, || cost_run(plan, sample_dir, CostTool::Callgrind))
            .map_err(anyhow::Error::from);
        let st = std::thread::Builder::new()
            .name("cost-strace".into())
            .spawn_scoped(s, || cost_run(plan, sample_dir, CostTool::Strace))
            .map_err(anyhow::Error::from);
        let join = |h: anyhow::Result<std::thread::ScopedJoinHandle<'_, _>>| {
            h.and_then(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("cost run thread panicked")))
            })
        };
        (join(cg), join(st))
    });
    let (cg_keys, cg_pid) = callgrind?;
    let (st_keys, _) = strace?;
    *server_pid = cg_pid;
    m.map.extend(cg_keys.map);
    m.map.extend(st_keys.map);
    m.profiles = cg_keys.profiles;
    m.blocked = st_keys.blocked;
    Ok(())
}

/// One run of the cost sample under `tool`, in `sample_dir/<tool>/`: its keys and its
/// server's pid.
fn cost_run(
    plan: &SamplePlan,
    sample_dir: &Path,
    tool: crate::sample::cost::CostTool,
) -> anyhow::Result<(Metrics, u32)> {
    use crate::sample::checkpoint_cost;
    use crate::sample::cost::{self, CallgrindMarks, CostTool, StraceMarks};
    let name = match tool {
        CostTool::Callgrind => "callgrind",
        CostTool::Strace => "strace",
    };
    let out = sample_dir.join(name);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let t0 = std::time::Instant::now();
    let mut server =
        Server::start_wrapped(&plan.target, &out.join("data"), &cost::wrapper(tool, &out))?;
    let pid = server.pid;
    server.count_log(&plan.scenario.counts)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(loadgen::WORKER_THREAD)
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let mut scratch = Metrics::default();
    let mut cg = CallgrindMarks::new(server.pid);
    let mut st = StraceMarks::default();
    st.root = server.pid;
    let bounds: &mut dyn phases::Boundary = match tool {
        CostTool::Callgrind => &mut cg,
        CostTool::Strace => &mut st,
    };
    let driven = rt.block_on(drive(plan, &mut server, &out, &mut scratch, bounds));
    drop(rt);
    stop_live(server, &format!(" under {tool:?}"))?;
    driven.with_context(|| format!("cost sample under {tool:?}"))?;
    let mut m = Metrics::default();
    // How long the run took, spawn to reaped: the sidecar's record of what `--cost` costs.
    m.resource(
        PhaseKey::new("cost_sample", &format!("{name}_wall_s")),
        t0.elapsed().as_secs_f64(),
        "s",
    );
    match tool {
        CostTool::Callgrind => {
            let mut counts = cost::read_callgrind_dir(&out)?;
            let ticks = checkpoint_cost::fold_ticks(&mut counts);
            cost::instruction_keys(&counts, &cg.work, &mut m)?;
            for t in &cg.pushes {
                let total = counts.get(&t.phase).copied().unwrap_or(0);
                checkpoint_cost::instruction_keys(t, &ticks, total, &mut m);
                // The findings are the recording's to print, from these keys.
                crate::sample::growth::fit(&t.phase, &mut m);
            }
            m.profiles = cost::read_profiles_dir(&out, &cg.work)?;
            let d = &cg.dump_ms;
            if let (Some(max), Some(median)) = (
                d.iter().copied().reduce(f64::max),
                contract::schema::median(d),
            ) {
                m.resource("cost_sample.vgdb_dump_ms.max", max, "ms");
                m.resource("cost_sample.vgdb_dump_ms.median", median, "ms");
            }
        }
        CostTool::Strace => {
            let log = out.join("strace.log");
            let text = std::fs::read_to_string(&log)
                .with_context(|| format!("reading {}", log.display()))?;
            cost::syscall_keys(&cost::parse_strace(&text, &st.windows), &st.timed, &mut m);
            for t in &st.pushes {
                let counts = cost::parse_strace(&text, &t.strace_windows());
                checkpoint_cost::syscall_keys(t, &counts, &mut m);
                crate::sample::growth::fit(&t.phase, &mut m);
            }
            m.blocked = cost::blocked_tables(
                &cost::parse_strace_times(&text, &st.windows),
                &st.windows,
                &st.threads,
            );
            for (k, v) in scratch.map {
                if MetricKey::is_scoped_server_member(&k, FSYNCS) {
                    m.map.insert(k, v);
                }
            }
        }
    }
    if let Some(dir) = &plan.keep_profiles {
        keep_profiles(&out, &dir.join(format!("cost-{}", plan.index)))?;
    }
    Ok((m, pid))
}

/// Copies a cost run's raw profiles (`callgrind.out.*`, `strace.log`) from `out` into `dir`.
fn keep_profiles(out: &Path, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for e in std::fs::read_dir(out).with_context(|| format!("reading {}", out.display()))? {
        let p = e?.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with("callgrind.out.") || name == "strace.log" {
            std::fs::copy(&p, dir.join(name))
                .with_context(|| format!("copying {} into {}", p.display(), dir.display()))?;
        }
    }
    Ok(())
}

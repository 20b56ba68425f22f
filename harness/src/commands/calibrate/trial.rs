//! `vaultbench calibrate --gate-trial K`: measures the gate itself. Each trial recording runs
//! `--samples` fresh trial-sample subprocesses (reading, ~0.3 s of sample-like work, reading)
//! beside a contender (nothing, one CPU burner per core, or an fsync loop) and judges their
//! readings and their in-sample contention (run-queue delay, PSI, steal over the work) as a
//! recording would be judged. The fsync contender competes like a second server: several
//! threads each storing small files durably (write, fsync, rename, directory fsync).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use calibration::gate::judge_with_contention;
use calibration::{
    GateConfig, MachineLock, Reading, cpu_kernel_ms, fingerprint, load_reference, loadavg,
    read_channels,
};
use contract::exit;

use crate::subprocess::{Reaper, SelfExec, run_json_child};

/// Most recordings one gate trial runs.
const MAX_TRIALS: usize = 1000;
/// Longest a contender of the gate trial may live; the trial kills it sooner.
const MAX_BURN_SECONDS: u64 = 3600;
/// A trial sample that has not answered by then is killed (a quiet one takes ~0.4 s).
const TRIAL_SAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the gate trial runs beside its recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Contender {
    /// Nothing.
    Quiet,
    /// One busy loop per core.
    Cpu,
    /// One process with `--burn-threads` threads storing small files durably in a loop on the
    /// io dir's filesystem, like a second server.
    Fsync,
    /// quiet, cpu, fsync, quiet, ... one recording each.
    Rotate,
}

/// A contender process's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Burn {
    Cpu,
    Fsync,
}

/// One gate-trial sample: the readings bracketing ~0.3 s of sample-like work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialSample {
    pub before: Reading,
    pub after: Reading,
    pub work_ms: f64,
    /// In-sample contention over the work (this process is both "server" and "generator").
    #[serde(default)]
    pub contention: Option<contract::schema::Contention>,
}

/// Work between a trial sample's readings, shaped like a small sample: some hashing (a
/// server verifying chunk digests) and durable small-file writes (temp + fsync + rename, as
/// the reference server stores a chunk). Fixed work, so it takes ~0.3 s here when quiet.
pub(crate) fn trial_sample(dir: &Path) -> anyhow::Result<TrialSample> {
    let ctx = || format!("trial sample in {}", dir.display());
    let before = read_channels(dir).with_context(ctx)?;
    let window = crate::sample::contention::Window::start();
    let t0 = Instant::now();
    for _ in 0..6 {
        std::hint::black_box(cpu_kernel_ms());
    }
    let work = tempfile::Builder::new()
        .prefix(".vaultbench-trial-")
        .tempdir_in(dir)
        .with_context(ctx)?;
    for i in 0..24 {
        let tmp = work.path().join(format!("c{i}.tmp"));
        let mut f = std::fs::File::create(&tmp).with_context(ctx)?;
        std::io::Write::write_all(&mut f, &[i as u8; 4096]).with_context(ctx)?;
        f.sync_all().with_context(ctx)?;
        std::fs::rename(&tmp, work.path().join(format!("c{i}"))).with_context(ctx)?;
    }
    std::fs::File::open(work.path())
        .and_then(|d| d.sync_all())
        .with_context(ctx)?;
    let work_ms = t0.elapsed().as_secs_f64() * 1e3;
    let contention = window.finish(std::process::id()).ok();
    drop(work);
    let after = read_channels(dir).with_context(ctx)?;
    Ok(TrialSample {
        before,
        after,
        work_ms,
        contention,
    })
}

/// `--work-dir` or the temp dir, checked to be a directory.
pub(crate) fn io_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = flag.map(Path::to_owned).unwrap_or_else(std::env::temp_dir);
    let meta = std::fs::metadata(&dir).with_context(|| format!("--work-dir {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("--work-dir {}: not a directory", dir.display());
    }
    Ok(dir)
}

/// Bytes of one file the fsync contender stores: a typical small chunk of the `small` vault's
/// notes (a few KiB of Markdown), as the reference server stores it.
const BURN_FILE_BYTES: usize = 16 * 1024;

/// One fsync-contender thread: stores small files the way the reference server stores a
/// chunk (temp file, write, fsync, rename, directory fsync) in its own subdirectory of
/// `dir`, until `deadline`.
fn store_files_until(dir: &Path, thread: usize, deadline: Instant) -> anyhow::Result<()> {
    let own = tempfile::Builder::new()
        .prefix(&format!(".vaultbench-burn-{thread}-"))
        .tempdir_in(dir)
        .with_context(|| format!("fsync contender in {}", dir.display()))?;
    let body = vec![0xa5u8; BURN_FILE_BYTES];
    let mut i = 0u64;
    while Instant::now() < deadline {
        let tmp = own.path().join("chunk.tmp");
        let dst = own.path().join(format!("c{}", i % 64));
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, &body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &dst)?;
        std::fs::File::open(own.path())?.sync_all()?;
        i += 1;
    }
    Ok(())
}

/// A contender: burns CPU, or stores files durably on `threads` threads, until killed or
/// `seconds` pass. Dies with its parent.
pub(crate) fn burn(
    kind: Burn,
    dir: Option<&Path>,
    seconds: u64,
    threads: usize,
) -> anyhow::Result<i32> {
    // SAFETY: prctl with integer arguments only; asks the kernel to SIGKILL this process
    // when the parent (the trial) dies, so a contender can never outlive the trial.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(seconds.min(MAX_BURN_SECONDS));
    match kind {
        Burn::Cpu => {
            while Instant::now() < deadline {
                std::hint::black_box(cpu_kernel_ms());
            }
        }
        Burn::Fsync => {
            let dir = io_dir(dir)?;
            std::thread::scope(|s| {
                let workers: Vec<_> = (0..threads.max(1))
                    .map(|t| {
                        let dir = &dir;
                        s.spawn(move || store_files_until(dir, t, deadline))
                    })
                    .collect();
                for w in workers {
                    w.join()
                        .map_err(|_| anyhow::anyhow!("fsync contender thread panicked"))??;
                }
                Ok::<_, anyhow::Error>(())
            })?;
        }
    }
    Ok(exit::OK)
}

/// One recording of the gate trial.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialRecording {
    pub contender: Contender,
    pub accepted: bool,
    pub cpu_cv: f64,
    pub io_cv: f64,
    pub cpu_max_over_median: f64,
    pub io_max_over_median: f64,
    pub cpu_median: f64,
    pub io_median: f64,
    pub cpu_drift: Option<f64>,
    pub io_drift: Option<f64>,
    pub work_ms_median: f64,
    /// CPU used during the recording by processes foreign to the trial, in cores: machine
    /// busy time from /proc/stat minus this process, its samples and its contenders, over
    /// wall time. On a shared machine this is what makes "quiet" true or not. `None` where
    /// /proc/stat is unreadable.
    pub background_cores: Option<f64>,
    /// CPU the contenders used during the recording, in cores.
    pub contender_cores: f64,
    /// Worst sample of each in-sample channel (share), where the kernel offered it.
    #[serde(default)]
    pub in_sample_max: std::collections::BTreeMap<String, f64>,
    pub failures: Vec<String>,
}

/// Busy seconds of the whole machine (all cores) from /proc/stat: user + nice + system +
/// irq + softirq + steal. iowait is idle time, not load.
fn machine_busy_s() -> Option<f64> {
    let cpu = procstat::read::system_cpu().ok()?;
    Some(cpu.busy() as f64 / procstat::clock_ticks_per_second() as f64)
}

/// Waits until 2 s pass with foreign processes using < 0.1 cores, or `limit` passes.
fn wait_quiet(limit: Duration, contenders: &[u32]) {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        let (Some(a), own) = (machine_busy_s(), own_cpu_s(contenders)) else {
            return;
        };
        std::thread::sleep(Duration::from_secs(2));
        let Some(b) = machine_busy_s() else { return };
        if ((b - a) - (own_cpu_s(contenders) - own)) / 2.0 < 0.1 {
            return;
        }
    }
    eprintln!(
        "gate trial: machine did not go quiet within {} s",
        limit.as_secs()
    );
}

/// CPU seconds of live children (the contenders) from /proc/<pid>/stat utime + stime.
fn children_cpu_s(pids: &[u32]) -> f64 {
    let ticks: u64 = pids
        .iter()
        .filter_map(|&pid| procstat::read::process_stat(procstat::Pid::Of(pid)).ok()?)
        .map(|st| st.utime_ticks + st.stime_ticks)
        .sum();
    ticks as f64 / procstat::clock_ticks_per_second() as f64
}

/// CPU seconds (user + system) of this process, its reaped children and the live `contenders`.
fn own_cpu_s(contenders: &[u32]) -> f64 {
    let mut total = children_cpu_s(contenders);
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage writes one rusage struct we own.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            for tv in [ru.ru_utime, ru.ru_stime] {
                total += tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
            }
        }
    }
    total
}

/// The gate trial's result (`--gate-trial K --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialReport {
    pub contender: Contender,
    pub recordings: usize,
    pub samples_per_recording: usize,
    pub accepted: usize,
    pub refused: usize,
    pub drift_checked: bool,
    pub reference_id: Option<String>,
    pub config: GateConfig,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    /// How many recordings each kind of failure refused (channel + figure).
    pub refused_by: std::collections::BTreeMap<String, usize>,
    /// Per condition: [accepted, recordings].
    pub by_contender: std::collections::BTreeMap<String, [usize; 2]>,
    pub runs: Vec<TrialRecording>,
}

impl TrialReport {
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "gate trial, contender {:?}: {} of {} recordings accepted, {} refused (drift {}checked)",
            self.contender,
            self.accepted,
            self.recordings,
            self.refused,
            if self.drift_checked { "" } else { "not " }
        )];
        for (condition, [acc, n]) in &self.by_contender {
            out.push(format!("  {condition}: {acc} of {n} accepted"));
        }
        for (why, n) in &self.refused_by {
            out.push(format!("  refused by {why}: {n}"));
        }
        out.push(format!(
            "  loadavg before {:?} after {:?}",
            self.loadavg_before, self.loadavg_after
        ));
        out
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn gate_trial(
    exec: &SelfExec,
    dir: &Path,
    k: usize,
    samples: usize,
    contender: Contender,
    cfg: &GateConfig,
    reference_path: Option<&Path>,
    wait_for_lock: bool,
    wait_quiet_s: u64,
) -> anyhow::Result<TrialReport> {
    if !(1..=MAX_TRIALS).contains(&k) {
        bail!("--gate-trial {k}: must be 1..={MAX_TRIALS}");
    }
    if !(1..=100).contains(&samples) {
        bail!("--samples {samples}: must be 1..=100");
    }
    let _lock = MachineLock::acquire(None, wait_for_lock)?;
    let fp = fingerprint(dir);
    let reference = load_reference(reference_path, &fp)?;
    let loadavg_before = loadavg();
    let burn_args = |kind: &str| -> Vec<OsString> {
        vec![
            "--burn".into(),
            kind.into(),
            "--work-dir".into(),
            dir.as_os_str().to_owned(),
        ]
    };
    let mut runs = Vec::with_capacity(k);
    let mut refused_by = std::collections::BTreeMap::new();
    let mut by_contender = std::collections::BTreeMap::new();
    for rec in 0..k {
        // Rotate interleaves the conditions, so on a shared machine each meets the same
        // background; contenders live for one recording only.
        let condition = match contender {
            Contender::Rotate => [Contender::Quiet, Contender::Cpu, Contender::Fsync][rec % 3],
            c => c,
        };
        if wait_quiet_s > 0 {
            wait_quiet(Duration::from_secs(wait_quiet_s), &[]);
        }
        let (n_burners, kind) = match condition {
            Contender::Cpu => (
                std::thread::available_parallelism().map_or(2, |n| n.get()),
                "cpu",
            ),
            Contender::Fsync => (1, "fsync"),
            Contender::Quiet | Contender::Rotate => (0, ""),
        };
        let mut contenders = Reaper(Vec::new());
        for _ in 0..n_burners {
            let child = exec
                .command(&burn_args(kind))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("cannot start a contender")?;
            contenders.0.push(child);
        }
        if n_burners > 0 {
            // Let the contenders reach steady state before the recording starts.
            std::thread::sleep(Duration::from_millis(300));
        }
        let contender_pids: Vec<u32> = contenders.0.iter().map(Child::id).collect();
        let (busy0, own0, t0) = (machine_busy_s(), own_cpu_s(&contender_pids), Instant::now());
        let contender0 = children_cpu_s(&contender_pids);
        let mut cpu = Vec::new();
        let mut io = Vec::new();
        let mut rtt = Vec::new();
        let mut work = Vec::new();
        let mut contention = Vec::new();
        for s in 0..samples {
            let cmd = exec.command(&["--trial-sample".into(), dir.as_os_str().to_owned()]);
            let what = format!("trial recording {} sample {}", rec + 1, s + 1);
            let sample: TrialSample =
                run_json_child(cmd, &what, TRIAL_SAMPLE_TIMEOUT)?.success(&what)?;
            cpu.extend([sample.before.cpu_ms, sample.after.cpu_ms]);
            io.extend([sample.before.io_ms, sample.after.io_ms]);
            rtt.extend(
                [sample.before.rtt_ms, sample.after.rtt_ms]
                    .into_iter()
                    .flatten(),
            );
            work.push(sample.work_ms);
            contention.push(sample.contention);
        }
        let wall = t0.elapsed().as_secs_f64();
        let background_cores = match (busy0, machine_busy_s()) {
            (Some(a), Some(b)) if wall > 0.0 => {
                Some((((b - a) - (own_cpu_s(&contender_pids) - own0)) / wall).max(0.0))
            }
            _ => None,
        };
        let contender_cores = (children_cpu_s(&contender_pids) - contender0) / wall;
        let refs: Vec<_> = contention.iter().map(Option::as_ref).collect();
        let mut v = judge_with_contention(&cpu, &io, &refs, reference.as_ref(), cfg);
        calibration::gate::judge_rtt(&mut v, &rtt, reference.as_ref(), cfg);
        let c = &v.channels[calibration::gate::CPU];
        let o = &v.channels[calibration::gate::IO];
        for f in &v.failures {
            // "cpu_ms cv 0.310 > 0.20" -> "cpu_ms cv"; "psi_cpu_some 0.62 > 0.50 in sample 3"
            // -> "psi_cpu_some" (an in-sample channel has one figure).
            let key: Vec<&str> = f
                .split_whitespace()
                .take(2)
                .filter(|w| w.parse::<f64>().is_err())
                .collect();
            *refused_by.entry(key.join(" ")).or_insert(0) += 1;
        }
        eprintln!(
            "trial {}/{k} {:?}: {}  background {:.2} cores  contender {:.2} cores  cpu cv {:.3} m/m {:.2}  io cv {:.3} m/m {:.2}  cpu median {:.1} io median {:.1}  in-sample max {}",
            rec + 1,
            condition,
            if v.accepted { "accepted" } else { "refused " },
            background_cores.unwrap_or(f64::NAN),
            contender_cores,
            c.cv,
            c.max_over_median,
            o.cv,
            o.max_over_median,
            c.median,
            o.median,
            v.in_sample
                .iter()
                .map(|(k, s)| format!("{k} {:.3}", s.max))
                .collect::<Vec<_>>()
                .join(" ")
        );
        drop(contenders);
        let entry = by_contender
            .entry(format!("{condition:?}").to_lowercase())
            .or_insert([0, 0]);
        entry[0] += usize::from(v.accepted);
        entry[1] += 1;
        runs.push(TrialRecording {
            contender: condition,
            accepted: v.accepted,
            cpu_cv: c.cv,
            io_cv: o.cv,
            cpu_max_over_median: c.max_over_median,
            io_max_over_median: o.max_over_median,
            cpu_median: c.median,
            io_median: o.median,
            cpu_drift: c.drift,
            io_drift: o.drift,
            work_ms_median: contract::schema::median(&work).unwrap_or(f64::NAN),
            background_cores,
            contender_cores,
            in_sample_max: v
                .in_sample
                .iter()
                .map(|(k, s)| (k.clone(), s.max))
                .collect(),
            failures: v.failures.clone(),
        });
    }
    let accepted = runs.iter().filter(|r| r.accepted).count();
    Ok(TrialReport {
        contender,
        recordings: k,
        samples_per_recording: samples,
        accepted,
        refused: k - accepted,
        drift_checked: reference.is_some(),
        reference_id: reference.map(|r| r.fingerprint_id),
        config: *cfg,
        loadavg_before,
        loadavg_after: loadavg(),
        refused_by,
        by_contender,
        runs,
    })
}

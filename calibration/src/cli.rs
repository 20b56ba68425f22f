//! `vaultbench calibrate` and `vaultbench probe fsync`: arguments and flows.
//!
//! Every calibration reading is taken in a fresh subprocess (this binary re-executed with the
//! hidden `calibrate --one-reading DIR`), because that is how a sample takes its readings:
//! a warm process would give the reference an advantage recordings never get.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::Refused;
use crate::channels::{Reading, cpu_kernel_ms, io_kernel_ms, read_channels};
use crate::fingerprint::{Fingerprint, fingerprint, loadavg};
use crate::gate::{GateConfig, GateVerdict, judge, median};
use crate::lock::MachineLock;
use crate::probe::{ProbeConfig, SyncMode, run_fsync_probe};
use crate::reference::{Reference, load_reference, store_reference};

/// Most readings one `calibrate` takes (a bound on its run time: ~0.1 s each here).
const MAX_READINGS: usize = 1000;
/// Most recordings one gate trial runs.
const MAX_TRIALS: usize = 1000;
/// A reading subprocess that has not answered by then is killed (a quiet reading takes ~0.1 s).
const READING_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a contender of the gate trial may live; the trial kills it sooner.
const MAX_BURN_SECONDS: u64 = 3600;

/// Measure this machine's calibration channels while quiet and store the reference.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Readings to take, each in a fresh subprocess.
    #[arg(long, default_value_t = 20)]
    pub readings: usize,
    /// Directory on the filesystem the server's data will live on (the io channel writes there).
    /// Defaults to the system temp dir, where recordings put their data dirs.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Reference file (default $VAULTBENCH_REFERENCE, else $XDG_DATA_HOME/vaultbench/reference.json).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// Gate thresholds file (TOML; default $VAULTBENCH_GATE_CONFIG, else built-in defaults).
    #[arg(long)]
    pub gate_config: Option<PathBuf>,
    /// Print the gate config in effect as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Write one JSON document to stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Fail (exit 5) instead of waiting when another recording holds the machine lock.
    #[arg(long)]
    pub no_wait: bool,

    /// Internal: take one reading of both channels in DIR, print it as JSON, exit.
    #[arg(long, hide = true, value_name = "DIR")]
    pub one_reading: Option<PathBuf>,
    /// Internal: measure the gate itself with K recordings (see `--contender`, `--samples`).
    #[arg(long, hide = true, value_name = "K")]
    pub gate_trial: Option<usize>,
    /// Internal: what runs beside the gate trial.
    #[arg(long, hide = true, value_enum, default_value_t = Contender::Quiet)]
    pub contender: Contender,
    /// Internal: samples per gate-trial recording (2 readings each).
    #[arg(long, hide = true, default_value_t = 6)]
    pub samples: usize,
    /// Internal: one gate-trial sample in DIR (reading, ~0.3 s of work, reading), printed as JSON.
    #[arg(long, hide = true, value_name = "DIR")]
    pub trial_sample: Option<PathBuf>,
    /// Internal: before each gate-trial recording, wait up to SECS for 2 s of machine
    /// background load < 0.1 cores (a shared machine is quiet only in windows).
    #[arg(long, hide = true, value_name = "SECS", default_value_t = 0)]
    pub trial_wait_quiet: u64,
    /// Internal: a gate-trial contender process (busy CPU loop, or fsync loop in --dir).
    #[arg(long, hide = true, value_enum)]
    pub burn: Option<Burn>,
    /// Internal: how long a contender lives at most.
    #[arg(long, hide = true, default_value_t = 900)]
    pub burn_seconds: u64,
}

/// What the gate trial runs beside its recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Contender {
    /// Nothing.
    Quiet,
    /// One busy loop per core.
    Cpu,
    /// One process appending + fsyncing in a loop on the io dir's filesystem.
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

/// Probe what this machine can do.
#[derive(Debug, Clone, Subcommand)]
pub enum ProbeCmd {
    /// Flushes per second at 1..N threads: does the device serialise flushes, does group commit pay?
    Fsync(FsyncArgs),
}

/// `probe fsync` arguments.
#[derive(Debug, Clone, Args)]
pub struct FsyncArgs {
    /// Thread counts to run in turn.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub threads: Vec<usize>,
    /// Seconds per thread count.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Directory on the filesystem to probe (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Flush call.
    #[arg(long, value_enum, default_value_t = ModeArg::Fsync)]
    pub mode: ModeArg,
    /// All threads append to one shared file instead of one file each.
    #[arg(long)]
    pub shared_file: bool,
    /// Write one JSON document to stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fail (exit 5) instead of waiting when a recording holds the machine lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Fsync,
    Fdatasync,
}

/// How to re-execute this program for one reading or one trial sample: the running
/// executable with the binary's own subcommand words before `<flag> DIR` (the binary says
/// which); tests substitute their own binary.
#[derive(Debug, Clone)]
pub struct SelfExec {
    pub program: PathBuf,
    /// Arguments placed before the flag, e.g. `["calibrate"]`.
    pub prefix: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

impl SelfExec {
    /// This executable, re-run with `subcommand` (e.g. `["calibrate"]`) before the flag.
    pub fn current(subcommand: &[&str]) -> anyhow::Result<SelfExec> {
        Ok(SelfExec {
            program: std::env::current_exe().context("cannot find this executable to re-run it")?,
            prefix: subcommand.iter().map(OsString::from).collect(),
            env: Vec::new(),
        })
    }

    fn command(&self, tail: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix).args(tail);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// Kills and reaps its children when dropped (contenders, stuck readings).
struct Reaper(Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs one child to completion (killing it after `timeout`) and parses the last line of its
/// stdout that starts with `{` as `T`. Earlier lines are ignored, so a wrapper that prints a
/// banner does not break the protocol.
pub fn run_json_child<T: for<'de> Deserialize<'de>>(
    mut cmd: Command,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<T> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .with_context(|| format!("{what}: cannot start"))?;
    let mut reaper = Reaper(vec![child]);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = reaper.0[0]
            .try_wait()
            .with_context(|| format!("{what}: wait"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            bail!("{what}: no answer within {} s, killed", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let child = &mut reaper.0[0];
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out)
            .with_context(|| format!("{what}: stdout"))?;
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!("{what}: exited with {status}: {last}");
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{what}: printed no JSON"))?;
    serde_json::from_str(line).with_context(|| format!("{what}: bad JSON {line:?}"))
}

/// `vaultbench calibrate`.
/// `subcommand`: the words that reach this command in the calling binary (`["calibrate"]` in
/// `vaultbench`), used to re-run it for each reading and trial sample.
pub fn run_calibrate(args: CalibrateArgs, subcommand: &[&str]) -> anyhow::Result<i32> {
    if let Some(dir) = &args.one_reading {
        let reading =
            read_channels(dir).with_context(|| format!("io channel in {}", dir.display()))?;
        println!("{}", serde_json::to_string(&reading)?);
        return Ok(0);
    }
    if let Some(dir) = &args.trial_sample {
        let sample = trial_sample(dir)?;
        println!("{}", serde_json::to_string(&sample)?);
        return Ok(0);
    }
    if let Some(kind) = args.burn {
        return burn(kind, args.dir.as_deref(), args.burn_seconds);
    }
    let cfg = GateConfig::load(args.gate_config.as_deref())?;
    if args.print_config {
        println!("{}", cfg.to_toml().trim_end());
        return Ok(0);
    }
    let dir = io_dir(args.dir.as_deref())?;
    let exec = SelfExec::current(subcommand)?;
    if let Some(k) = args.gate_trial {
        let report = gate_trial(&exec, &dir, k, args.samples, args.contender, &cfg, &args)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            for line in report.lines() {
                println!("{line}");
            }
        }
        return Ok(0);
    }
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let outcome = calibrate(&exec, &dir, args.readings, &cfg, args.reference.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        // The reference is what drift is measured against, so "drift not checked" is not news here.
        for line in outcome.verdict.lines() {
            if !line.starts_with("no calibration reference") {
                println!("{line}");
            }
        }
    }
    match (&outcome.stored_at, outcome.verdict.accepted) {
        (Some(path), true) => {
            if !args.json {
                let r = outcome.reference.as_ref();
                println!(
                    "stored reference for machine {} in {}: cpu_ms {:.2} ms, io_ms {:.2} ms",
                    outcome.fingerprint_id,
                    path.display(),
                    r.map_or(f64::NAN, |r| r.cpu_ms),
                    r.map_or(f64::NAN, |r| r.io_ms)
                );
            }
            Ok(0)
        }
        _ => Err(Refused(format!(
            "calibration readings too noisy, no reference stored: {}",
            outcome.verdict.summary()
        ))
        .into()),
    }
}

/// `--dir` or the temp dir, checked to be a directory.
fn io_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = flag.map(Path::to_owned).unwrap_or_else(std::env::temp_dir);
    let meta = std::fs::metadata(&dir).with_context(|| format!("--dir {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("--dir {}: not a directory", dir.display());
    }
    Ok(dir)
}

/// The result of `calibrate` (its `--json` document).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrateOutcome {
    pub fingerprint_id: String,
    pub fingerprint: Fingerprint,
    pub io_dir: PathBuf,
    pub readings: Vec<Reading>,
    pub verdict: GateVerdict,
    /// The stored reference; `None` when the gate refused the readings.
    pub reference: Option<Reference>,
    pub stored_at: Option<PathBuf>,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
}

/// Takes `n` readings in fresh subprocesses, gates them (CV and max/median; drift does not
/// apply to the reference itself) and, when accepted, stores them as this machine's reference.
pub fn calibrate(
    exec: &SelfExec,
    dir: &Path,
    n: usize,
    cfg: &GateConfig,
    reference_path: Option<&Path>,
) -> anyhow::Result<CalibrateOutcome> {
    if !(2..=MAX_READINGS).contains(&n) {
        bail!("--readings {n}: must be 2..={MAX_READINGS}");
    }
    // Fail on a corrupt reference file before spending time on readings.
    let fp = fingerprint(dir);
    load_reference(reference_path, &fp)?;
    let loadavg_before = loadavg();
    let mut readings = Vec::with_capacity(n);
    for i in 0..n {
        let cmd = exec.command(&["--one-reading".into(), dir.as_os_str().to_owned()]);
        let reading: Reading = run_json_child(
            cmd,
            &format!("calibration reading {}", i + 1),
            READING_TIMEOUT,
        )?;
        readings.push(reading);
    }
    let loadavg_after = loadavg();
    let cpu: Vec<f64> = readings.iter().map(|r| r.cpu_ms).collect();
    let io: Vec<f64> = readings.iter().map(|r| r.io_ms).collect();
    let verdict = judge(&cpu, &io, None, cfg);
    let fingerprint_id = fp.id();
    let (reference, stored_at) = if verdict.accepted {
        let c = &verdict.channels[crate::gate::CPU];
        let o = &verdict.channels[crate::gate::IO];
        let reference = Reference {
            fingerprint_id: fingerprint_id.clone(),
            fingerprint: fp.clone(),
            cpu_ms: c.median,
            io_ms: o.median,
            cpu_cv: c.cv,
            io_cv: o.cv,
            n,
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            loadavg_before,
            loadavg_after,
            vaultbench_version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let path = store_reference(reference_path, &reference)?;
        (Some(reference), Some(path))
    } else {
        (None, None)
    };
    Ok(CalibrateOutcome {
        fingerprint_id,
        fingerprint: fp,
        io_dir: dir.to_owned(),
        readings,
        verdict,
        reference,
        stored_at,
        loadavg_before,
        loadavg_after,
    })
}

/// One gate-trial sample: the readings bracketing ~0.3 s of sample-like work.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TrialSample {
    pub before: Reading,
    pub after: Reading,
    pub work_ms: f64,
}

/// Work between a trial sample's readings, shaped like a small sample: some hashing (a
/// server verifying chunk digests) and durable small-file writes (temp + fsync + rename, as
/// the reference server stores a chunk). Fixed work, so it takes ~0.3 s here when quiet.
fn trial_sample(dir: &Path) -> anyhow::Result<TrialSample> {
    let ctx = || format!("trial sample in {}", dir.display());
    let before = read_channels(dir).with_context(ctx)?;
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
    drop(work);
    let after = read_channels(dir).with_context(ctx)?;
    Ok(TrialSample {
        before,
        after,
        work_ms,
    })
}

/// A contender: burns CPU or fsyncs until killed or `seconds` pass. Dies with its parent.
fn burn(kind: Burn, dir: Option<&Path>, seconds: u64) -> anyhow::Result<i32> {
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
            while Instant::now() < deadline {
                // The io kernel is exactly the flush pattern the io channel is sensitive to.
                io_kernel_ms(&dir)
                    .with_context(|| format!("fsync contender in {}", dir.display()))?;
            }
        }
    }
    Ok(0)
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
    pub failures: Vec<String>,
}

/// Busy seconds of the whole machine (all cores) from /proc/stat: user + nice + system +
/// irq + softirq + steal. iowait is idle time, not load.
fn machine_busy_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| busy as f64 / hz as f64)
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
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return 0.0;
    }
    let mut ticks = 0u64;
    for pid in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name; utime and stime are fields 14, 15.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        for i in [11, 12] {
            ticks += f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ticks as f64 / hz as f64
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
fn gate_trial(
    exec: &SelfExec,
    dir: &Path,
    k: usize,
    samples: usize,
    contender: Contender,
    cfg: &GateConfig,
    args: &CalibrateArgs,
) -> anyhow::Result<TrialReport> {
    if !(1..=MAX_TRIALS).contains(&k) {
        bail!("--gate-trial {k}: must be 1..={MAX_TRIALS}");
    }
    if !(1..=100).contains(&samples) {
        bail!("--samples {samples}: must be 1..=100");
    }
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let fp = fingerprint(dir);
    let reference = load_reference(args.reference.as_deref(), &fp)?;
    let loadavg_before = loadavg();
    let burn_args = |kind: &str| -> Vec<OsString> {
        vec![
            "--burn".into(),
            kind.into(),
            "--dir".into(),
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
        if args.trial_wait_quiet > 0 {
            wait_quiet(Duration::from_secs(args.trial_wait_quiet), &[]);
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
        let mut work = Vec::new();
        for s in 0..samples {
            let cmd = exec.command(&["--trial-sample".into(), dir.as_os_str().to_owned()]);
            let sample: TrialSample = run_json_child(
                cmd,
                &format!("trial recording {} sample {}", rec + 1, s + 1),
                READING_TIMEOUT * 2,
            )?;
            cpu.extend([sample.before.cpu_ms, sample.after.cpu_ms]);
            io.extend([sample.before.io_ms, sample.after.io_ms]);
            work.push(sample.work_ms);
        }
        let wall = t0.elapsed().as_secs_f64();
        let background_cores = match (busy0, machine_busy_s()) {
            (Some(a), Some(b)) if wall > 0.0 => {
                Some((((b - a) - (own_cpu_s(&contender_pids) - own0)) / wall).max(0.0))
            }
            _ => None,
        };
        let contender_cores = (children_cpu_s(&contender_pids) - contender0) / wall;
        let v = judge(&cpu, &io, reference.as_ref(), cfg);
        let c = &v.channels[crate::gate::CPU];
        let o = &v.channels[crate::gate::IO];
        for f in &v.failures {
            // "cpu_ms cv 0.310 > 0.20" -> "cpu_ms cv"
            let key: Vec<&str> = f.split_whitespace().take(2).collect();
            *refused_by.entry(key.join(" ")).or_insert(0) += 1;
        }
        eprintln!(
            "trial {}/{k} {:?}: {}  background {:.2} cores  contender {:.2} cores  cpu cv {:.3} m/m {:.2}  io cv {:.3} m/m {:.2}  cpu median {:.1} io median {:.1}",
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
            o.median
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
            work_ms_median: median(&work),
            background_cores,
            contender_cores,
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

/// `vaultbench probe ...`.
pub fn run_probe(cmd: ProbeCmd) -> anyhow::Result<i32> {
    match cmd {
        ProbeCmd::Fsync(args) => probe_fsync(args),
    }
}

fn probe_fsync(args: FsyncArgs) -> anyhow::Result<i32> {
    let cfg = ProbeConfig {
        threads: args.threads.clone(),
        seconds: args.seconds,
        dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
        mode: match args.mode {
            ModeArg::Fsync => SyncMode::Fsync,
            ModeArg::Fdatasync => SyncMode::Fdatasync,
        },
        shared_file: args.shared_file,
    };
    crate::probe::validate(&cfg)?;
    // Check the dir before waiting for the lock: a typo should fail at once.
    match std::fs::metadata(&cfg.dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("probe dir {}: not a directory", cfg.dir.display()),
        Err(e) => bail!("probe dir {}: {e}", cfg.dir.display()),
    }
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let report = run_fsync_probe(&cfg, |row| {
        eprintln!(
            "probe fsync: {} threads: {:.0} flushes/s",
            row.threads, row.flushes_per_s
        );
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for line in report.lines() {
            println!("{line}");
        }
    }
    Ok(0)
}

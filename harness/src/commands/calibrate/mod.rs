//! `vaultbench calibrate`: arguments and flow (the gate trial is `trial.rs`).
//!
//! Every calibration reading is taken in a fresh subprocess (this binary re-executed with the
//! hidden `calibrate --one-reading DIR`), because that is how a sample takes its readings:
//! a warm process would give the reference an advantage recordings never get.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use calibration::{
    Fingerprint, GateConfig, GateVerdict, MachineLock, Reading, Reference, fingerprint, judge,
    load_reference, loadavg, read_channels, store_reference,
};
use contract::exit::{self, Refused};

pub mod trial;

use trial::{Burn, Contender, burn, gate_trial, io_dir, trial_sample};

use crate::subprocess::{SelfExec, run_json_child};

/// Most readings one `calibrate` takes (a bound on its run time: ~0.1 s each here).
const MAX_READINGS: usize = 1000;
/// A reading subprocess that has not answered by then is killed (a quiet reading takes ~0.1 s).
const READING_TIMEOUT: Duration = Duration::from_secs(60);

/// Measure this machine's calibration channels while quiet and store the reference.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Readings to take, each in a fresh subprocess.
    #[arg(long, default_value_t = 20)]
    pub readings: usize,
    /// Directory on the filesystem the server's data will live on (the io channel writes there).
    /// Defaults to the system temp dir, where recordings put their data dirs.
    #[arg(long = "work-dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Deprecated spelling of --work-dir.
    #[arg(long = "dir", hide = true, value_name = "DIR", conflicts_with = "dir")]
    pub old_dir: Option<PathBuf>,
    /// Reference file (default $VAULTBENCH_REFERENCE, else $XDG_DATA_HOME/vaultbench/reference.json).
    #[arg(long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Gate thresholds file (TOML; default $VAULTBENCH_GATE_CONFIG, else built-in defaults).
    #[arg(long, value_name = "FILE")]
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
    /// Internal: threads of an fsync contender (each stores small files durably, like a
    /// server's request handlers).
    #[arg(long, hide = true, default_value_t = 4)]
    pub burn_threads: usize,
}

/// `vaultbench calibrate`.
/// `subcommand`: the words that reach this command in the calling binary (`["calibrate"]` in
/// `vaultbench`), used to re-run it for each reading and trial sample.
pub fn run(args: CalibrateArgs, subcommand: &[&str]) -> anyhow::Result<i32> {
    if let Some(dir) = &args.one_reading {
        let reading =
            read_channels(dir).with_context(|| format!("io channel in {}", dir.display()))?;
        println!("{}", serde_json::to_string(&reading)?);
        return Ok(exit::OK);
    }
    if let Some(dir) = &args.trial_sample {
        let sample = trial_sample(dir)?;
        println!("{}", serde_json::to_string(&sample)?);
        return Ok(exit::OK);
    }
    if args.old_dir.is_some() {
        eprintln!(
            "vaultbench: {}",
            crate::commands::renamed("--dir", "--work-dir")
        );
    }
    let args = CalibrateArgs {
        dir: args.dir.clone().or(args.old_dir.clone()),
        ..args
    };
    if let Some(kind) = args.burn {
        return burn(
            kind,
            args.dir.as_deref(),
            args.burn_seconds,
            args.burn_threads,
        );
    }
    let cfg = <GateConfig as calibration::GateFile>::load(args.gate_config.as_deref())?;
    if args.print_config {
        println!("{}", calibration::GateFile::to_toml(&cfg).trim_end());
        return Ok(exit::OK);
    }
    let dir = io_dir(args.dir.as_deref())?;
    let exec = SelfExec::current(subcommand)?;
    if let Some(k) = args.gate_trial {
        let report = gate_trial(
            &exec,
            &dir,
            k,
            args.samples,
            args.contender,
            &cfg,
            args.reference.as_deref(),
            !args.no_wait,
            args.trial_wait_quiet,
        )?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            for line in report.lines() {
                println!("{line}");
            }
        }
        return Ok(exit::OK);
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
                    "stored reference for machine {} in {}: cpu_ms {:.2} ms, io_ms {:.2} ms, rtt_ms {:.2} ms",
                    outcome.fingerprint_id,
                    path.display(),
                    r.map_or(f64::NAN, |r| r.cpu_ms),
                    r.map_or(f64::NAN, |r| r.io_ms),
                    r.and_then(|r| r.rtt_ms).unwrap_or(f64::NAN)
                );
            }
            Ok(exit::OK)
        }
        _ => Err(Refused(format!(
            "calibration readings too noisy, no reference stored: {}",
            outcome.verdict.summary()
        ))
        .into()),
    }
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
        let what = format!("calibration reading {}", i + 1);
        let reading: Reading = run_json_child(cmd, &what, READING_TIMEOUT)?.success(&what)?;
        readings.push(reading);
    }
    let loadavg_after = loadavg();
    let cpu: Vec<f64> = readings.iter().map(|r| r.cpu_ms).collect();
    let io: Vec<f64> = readings.iter().map(|r| r.io_ms).collect();
    let rtt: Vec<f64> = readings.iter().filter_map(|r| r.rtt_ms).collect();
    let mut verdict = judge(&cpu, &io, None, cfg);
    calibration::gate::judge_rtt(&mut verdict, &rtt, None, cfg);
    let fingerprint_id = fp.id();
    let (reference, stored_at) = if verdict.accepted {
        let c = &verdict.channels[calibration::gate::CPU];
        let o = &verdict.channels[calibration::gate::IO];
        let reference = Reference {
            fingerprint_id: fingerprint_id.clone(),
            fingerprint: fp.clone(),
            cpu_ms: c.median,
            io_ms: o.median,
            cpu_cv: c.cv,
            io_cv: o.cv,
            rtt_ms: verdict
                .channels
                .get(calibration::gate::RTT)
                .map(|s| s.median),
            rtt_cv: verdict.channels.get(calibration::gate::RTT).map(|s| s.cv),
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

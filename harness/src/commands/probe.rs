//! `vaultbench probe fsync`: arguments and flow over `calibration::probe`.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand, ValueEnum};

use calibration::MachineLock;
use calibration::probe::{ProbeConfig, SyncMode, run_fsync_probe};
use contract::exit;

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
    /// How long each thread count runs: `3s`, `500ms`.
    #[arg(long, default_value = "3s", value_parser = contract::parse::duration)]
    pub duration: std::time::Duration,
    /// Deprecated: seconds per thread count (use --duration).
    #[arg(long, hide = true, conflicts_with = "duration")]
    pub seconds: Option<f64>,
    /// Directory on the filesystem to probe (default: the system temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Deprecated spelling of --work-dir.
    #[arg(
        long = "dir",
        hide = true,
        value_name = "DIR",
        conflicts_with = "work_dir"
    )]
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

/// `vaultbench probe ...`.
pub fn run(cmd: ProbeCmd) -> anyhow::Result<i32> {
    match cmd {
        ProbeCmd::Fsync(args) => probe_fsync(args),
    }
}

fn probe_fsync(args: FsyncArgs) -> anyhow::Result<i32> {
    let cfg = ProbeConfig {
        threads: args.threads.clone(),
        seconds: args.seconds.unwrap_or(args.duration.as_secs_f64()),
        dir: args
            .work_dir
            .clone()
            .or(args.dir.clone())
            .unwrap_or_else(std::env::temp_dir),
        mode: match args.mode {
            ModeArg::Fsync => SyncMode::Fsync,
            ModeArg::Fdatasync => SyncMode::Fdatasync,
        },
        shared_file: args.shared_file,
    };
    if args.seconds.is_none() && args.duration > std::time::Duration::from_secs(60) {
        bail!(
            "--duration {}: must be at most 1m",
            contract::parse::format_duration(args.duration)
        );
    }
    calibration::probe::validate(&cfg)?;
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
    Ok(exit::OK)
}

impl FsyncArgs {
    /// Notes for the deprecated spellings this command line used.
    pub fn deprecations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = self.seconds {
            out.push(format!(
                "note: --seconds is deprecated and will be removed in the next release: write --duration {}",
                contract::parse::format_duration(std::time::Duration::from_secs_f64(s.max(0.0)))
            ));
        }
        if self.dir.is_some() {
            out.push(crate::commands::renamed("--dir", "--work-dir"));
        }
        out
    }
}

//! vaultbench: a signed load generator and scenario runner for note-vault sync servers.
//!
//! This crate is the glue: the CLI, sample subprocesses, server lifecycle, and the
//! record / ab / verify / compare flows. It is the only crate that knows the others.
//! The pipeline reads in module order: prepare (scenario, vault, target) -> sample -> gate ->
//! recording; `commands` holds one file per subcommand on top of it. A module only imports
//! modules above it in this list (tests/it/layout.rs checks that no file imports back).

use clap::{Parser, Subcommand};

/// Durable atomic file writes (temp file, fsync, rename).
pub mod atomic;
/// One file per subcommand: argument structs and flows.
pub mod commands;
/// Exit codes of the binary.
pub mod exit;
/// The calibration gate over samples, and the A/B loop's retried gated sample.
pub mod gate;
/// Ctrl-C: a flag the loops poll, and the error that stops them.
pub mod interrupt;
/// Resolving a run before any sample: scenario, cached vault, work dir, gate, reference.
pub mod prepare;
/// The record loop: samples through a runner, the gate, the written recording and ledger.
pub mod recording;
/// One sample: plan, runner seam, parent and child sides, phases, target server.
pub mod sample;
/// Child processes that answer with one JSON document, under a deadline.
pub mod subprocess;

use commands::{
    ab, calibrate, class, load, probe, record, report as report_cmd, sample as sample_cmd, vault,
    verify,
};

/// Reproducible, gated performance numbers for self-hosted note-vault sync servers.
#[derive(Debug, Parser)]
#[command(name = "vaultbench", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate, verify and benchmark seeded synthetic vaults.
    #[command(subcommand)]
    Vault(vault::VaultCmd),
    /// Run the reference obsync-v1 server (the default target).
    ServeRef(refserver::cli::ServeArgs),
    /// Drive a server with signed requests: route load, or a whole-vault push/pull.
    Load(load::LoadArgs),
    /// Measure this machine's calibration channels while quiet and store the reference.
    Calibrate(calibrate::CalibrateArgs),
    /// Probe what this machine can do (fsync throughput).
    #[command(subcommand)]
    Probe(probe::ProbeCmd),
    /// Record a scenario into a gated baseline with a provenance sidecar.
    Record(record::RecordArgs),
    /// Compare two server builds by interleaved, order-balanced A/B rounds.
    Ab(ab::AbArgs),
    /// Render a recording, an A/B result or a baselines history (md, html, json, bmf, gab).
    Report(report_cmd::ReportArgs),
    /// Compare a recording against a baseline; exit 1 on a regression beyond threshold.
    Compare(report_cmd::CompareArgs),
    /// Check committed baselines: a hand-edited value fails and names the key.
    Verify(verify::VerifyArgs),
    /// Print this machine's class: the `baselines/<class>/` directory its recordings go to.
    Class(class::ClassArgs),
    /// Internal: run one sample plan in this fresh process (used by record and ab).
    #[command(hide = true)]
    Sample(sample_cmd::SampleArgs),
}

/// Runs one command and returns the process exit code (see [`exit`]).
pub fn run(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Vault(cmd) => vault::run(cmd),
        Command::ServeRef(args) => refserver::cli::run(args),
        Command::Load(args) => load::run(args),
        Command::Calibrate(args) => calibrate::run(args, &["calibrate"]),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Record(args) => record::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Class(args) => class::run(args),
        Command::Ab(args) => ab::run(args),
        Command::Report(args) => report_cmd::run_report(args),
        Command::Compare(args) => report_cmd::run_compare(args),
        Command::Sample(args) => sample_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => report_error(&err),
    }
}

/// Prints `vaultbench: <error chain>` on one line and maps typed failures to their codes.
pub fn report_error(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<interrupt::Interrupted>().is_some() {
        eprintln!("vaultbench: {err:#}");
        return exit::INTERRUPTED;
    }
    eprintln!("vaultbench: {err:#}");
    if err.downcast_ref::<contract::exit::Refused>().is_some() {
        return exit::REFUSED;
    }
    if err.downcast_ref::<calibration::LockBusy>().is_some() {
        return exit::BUSY;
    }
    exit::ERROR
}

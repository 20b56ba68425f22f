//! The `calibrate` and `probe` subcommands alone, shaped like `vaultbench`, for measuring the gate without building the whole harness.
//!
//! `cargo run --release -p calibration --example calibration_cli -- calibrate --gate-trial 20 --contender cpu`
//! re-executes this same binary for every reading, exactly as `vaultbench` re-executes itself.
//! Exit codes are the contract's (`contract::exit`): 2 error, 3 refused, 5 lock busy.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "calibration_cli")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Measure the calibration channels and store the reference (see `vaultbench calibrate`).
    Calibrate(calibration::cli::CalibrateArgs),
    /// Probe the machine (see `vaultbench probe`).
    #[command(subcommand)]
    Probe(calibration::cli::ProbeCmd),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Calibrate(args) => calibration::cli::run_calibrate(args, &["calibrate"]),
        Cmd::Probe(cmd) => calibration::cli::run_probe(cmd),
    };
    let code = match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("calibration_cli: {err:#}");
            if err.downcast_ref::<calibration::Refused>().is_some() {
                contract::exit::REFUSED
            } else if err.downcast_ref::<calibration::LockBusy>().is_some() {
                contract::exit::BUSY
            } else {
                contract::exit::ERROR
            }
        }
    };
    std::process::exit(code);
}

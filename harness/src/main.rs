//! The `vaultbench` binary: parse, run, map the outcome to an exit code (see `exit.rs`).

use clap::Parser;

fn main() {
    let cli = harness::Cli::parse();
    std::process::exit(harness::run(cli));
}

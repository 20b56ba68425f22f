//! The `vaultbench` binary: parse, run, map the outcome to an exit code (see `exit.rs`).

use clap::Parser;

fn main() {
    let cli = match harness::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => std::process::exit(harness::usage_error(&e)),
    };
    std::process::exit(harness::run(cli));
}

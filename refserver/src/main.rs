//! `obsync-refserver`: the reference server as a standalone binary (same flags as
//! `vaultbench serve-ref`). Errors print one line and exit 2.

use clap::Parser;

/// The reference obsync wire protocol v1 server.
#[derive(Debug, Parser)]
// `--version` is ServeArgs' own flag (shared with `vaultbench serve-ref --version`).
#[command(name = "obsync-refserver", version, disable_version_flag = true, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    args: refserver::cli::ServeArgs,
}

fn main() {
    // Before any other thread starts: the per-thread CPU keys and `top -H` read this name.
    refserver::name_this_thread(refserver::MAIN_THREAD);
    let cli = Cli::parse();
    let code = match refserver::cli::run(cli.args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("obsync-refserver: {err:#}");
            contract::exit::ERROR
        }
    };
    std::process::exit(code)
}

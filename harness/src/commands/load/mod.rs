//! `vaultbench load`: route load, `load push|pull` whole-vault transfers, `load fanout`,
//! `load bench-peer`, over any registered protocol (`--protocol`). One file per job: the
//! connection, credentials and the protocol check (`conn`), the route load and the Locust
//! worker (`route`), the transfers (`transfer`), the fan-out (`fanout`), the comparison with
//! wrk (`bench_peer`) and the printed summaries (`report`). What differs by protocol lives in
//! the registry's protocol folders (`sample::protocols`), reached through the seam's `load_*`
//! methods.
//!
//! Exit codes (the harness maps errors to 2): 0 when the run completed (failed requests
//! are reported per status, not fatal), 2 for bad input, an unreachable target or one that
//! speaks another protocol (checked before any load request), a wrong setup token, or a
//! route load in which no request succeeded. As a Locust worker (`--locust-master`): 0 when
//! the master said quit, 9 (`MASTER_GONE`) when it went silent, 2 when it sent a message
//! that cannot be read.

mod bench_peer;
mod conn;
mod fanout;
mod report;
mod route;
mod transfer;

pub use bench_peer::BenchArgs;
pub use conn::ConnArgs;
pub use fanout::FanoutArgs;
pub use route::RouteArgs;
pub use transfer::{PullArgs, PushArgs, TransferArgs};

use std::time::Duration;

use anyhow::Context;

/// The default run seed (the same default as every seeded command; the style rule: seeds have a fixed default).
pub const DEFAULT_SEED: u64 = 0x5eed;
/// Longest accepted `--duration`: one day. Every load must stop by itself.
pub const MAX_DURATION: Duration = contract::parse::MAX_DURATION;

/// Drive a server: route load, a whole-vault push or pull, many held devices, or the
/// comparison with wrk.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoadArgs {
    #[command(subcommand)]
    pub cmd: Option<LoadCmd>,
    #[command(flatten)]
    pub route: RouteArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum LoadCmd {
    /// Push every file and folder of a vault directory as one device.
    Push(PushArgs),
    /// Pull everything the server has into a directory as another device, each file checked
    /// as the protocol allows (a digest, the chunks' ids and the file's size, or the size its
    /// listing gives).
    Pull(PullArgs),
    /// Compare the generator's request rate with wrk on the same trivial endpoint.
    BenchPeer(BenchArgs),
    /// Many devices holding long polls while a few push: fan-out latency, and the server's
    /// and this generator's memory per 1,000 held devices (the knobs of the scenario step
    /// `long_poll_fanout`, with its defaults).
    Fanout(FanoutArgs),
}

/// Runs `vaultbench load ...` on its own tokio runtime and returns the exit code.
pub fn run(mut args: LoadArgs) -> anyhow::Result<i32> {
    // The deprecated spellings: a note each, then their values.
    match &mut args.cmd {
        None => args.route.conn.take_deprecated(),
        Some(LoadCmd::Push(t)) => t.common.conn.take_deprecated(),
        Some(LoadCmd::Pull(t)) => t.common.conn.take_deprecated(),
        Some(LoadCmd::Fanout(f)) => f.take_deprecated(),
        Some(LoadCmd::BenchPeer(b)) => b.take_deprecated(),
    }
    // Sized to the work: the connections this command holds at once, not every core.
    let connections = match &args.cmd {
        None => args.route.in_flight.unwrap_or(args.route.max_in_flight),
        Some(LoadCmd::Push(t)) => t.in_flight,
        Some(LoadCmd::Pull(_)) => transfer::PULL_CONNECTIONS,
        Some(LoadCmd::BenchPeer(b)) => b.connections,
        Some(LoadCmd::Fanout(f)) => f.waiters + f.pushers,
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let rt = loadgen::runtime(loadgen::worker_threads(connections, cpus))
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        match args.cmd {
            None => route::run_route(args.route).await,
            Some(LoadCmd::Push(t)) => t.run().await,
            Some(LoadCmd::Pull(t)) => t.run().await,
            Some(LoadCmd::BenchPeer(b)) => bench_peer::run_bench_peer(b).await,
            Some(LoadCmd::Fanout(f)) => fanout::run_fanout(f).await,
        }
    })
}

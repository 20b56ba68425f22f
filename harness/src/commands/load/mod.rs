//! `vaultbench load`: route load, `load push|pull` whole-vault transfers, `load fanout`,
//! `load bench-peer`, over any registered protocol (`--protocol`). One file per job: the
//! connection and enrolment ([`conn`]), the route load and the Locust worker ([`route`]), the
//! transfers ([`transfer`]), the fan-out ([`fanout`]), the comparison with wrk
//! ([`bench_peer`]) and the printed summaries ([`report`]).
//!
//! Exit codes (the harness maps errors to 2): 0 when the run completed (failed requests
//! are reported per status, not fatal), 2 for bad input, an unreachable target or one that
//! speaks the other protocol (checked before any load request), a wrong setup token, or a
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
pub use transfer::TransferArgs;

use bench_peer::run_bench_peer;
use fanout::run_fanout;
use route::run_route;
use transfer::run_transfer;

use std::time::Duration;

use anyhow::Context;

/// The default run seed (the same default as every seeded command; the style rule: seeds have a fixed default).
pub const DEFAULT_SEED: u64 = 0x5eed;
/// Longest accepted `--duration`: one day. Every load must stop by itself.
pub const MAX_DURATION: Duration = contract::parse::MAX_DURATION;

/// Drive a server with signed requests: route load, or a whole-vault push/pull.
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
    Push(TransferArgs),
    /// Pull everything the server has into a directory as another device (obsync: each
    /// file's SHA-256 checked; CouchDB: each chunk against its XXH64 id and each file against
    /// its size; WebDAV: each file's size against its listing).
    Pull(TransferArgs),
    /// Compare the generator's request rate with wrk on the same trivial endpoint.
    BenchPeer(BenchArgs),
    /// Many devices holding long polls while a few push: fan-out latency, and the server's
    /// and this generator's memory per 1,000 held devices.
    Fanout(FanoutArgs),
}

/// Runs `vaultbench load ...` on its own tokio runtime and returns the exit code.
pub fn run(mut args: LoadArgs) -> anyhow::Result<i32> {
    // The deprecated spellings: a note each, then their values.
    let conn = match &mut args.cmd {
        None => Some(&mut args.route.conn),
        Some(LoadCmd::Push(t) | LoadCmd::Pull(t)) => Some(&mut t.conn),
        Some(LoadCmd::Fanout(f)) => Some(&mut f.conn),
        Some(LoadCmd::BenchPeer(b)) => {
            if let Some(n) = b.old_connections.take() {
                eprintln!(
                    "vaultbench: {}",
                    crate::commands::renamed("--connections", "--in-flight")
                );
                b.connections = n;
            }
            None
        }
    };
    if let Some(c) = conn
        && let Some(seed) = c.old_seed.take()
    {
        eprintln!(
            "vaultbench: {}",
            crate::commands::renamed("--seed", "--nonce-seed")
        );
        c.seed = seed;
    }
    // Sized to the work: the connections this command holds at once, not every core.
    let connections = match &args.cmd {
        None => args.route.in_flight.unwrap_or(args.route.max_in_flight),
        Some(LoadCmd::Push(t) | LoadCmd::Pull(t)) => t.in_flight,
        Some(LoadCmd::BenchPeer(b)) => b.connections,
        Some(LoadCmd::Fanout(f)) => f.devices + f.pushers,
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let rt = loadgen::runtime(loadgen::worker_threads(connections, cpus))
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        match args.cmd {
            None => run_route(args.route).await,
            Some(LoadCmd::Push(t)) => run_transfer(t, true).await,
            Some(LoadCmd::Pull(t)) => run_transfer(t, false).await,
            Some(LoadCmd::BenchPeer(b)) => run_bench_peer(b).await,
            Some(LoadCmd::Fanout(f)) => run_fanout(f).await,
        }
    })
}

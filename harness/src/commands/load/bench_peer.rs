//! `load bench-peer`: the generator against wrk on the same trivial endpoint.

use std::path::PathBuf;
use std::time::Duration;

use contract::exit;
use loadgen::bench::BenchConfig;

/// `bench-peer` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Server to drive; default: start `vaultbench serve-ref` on a temp data dir.
    #[arg(long)]
    pub target: Option<String>,
    /// Allow a target outside loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Binary that serves the reference server as `BIN serve-ref --data DIR`
    /// (default: this executable).
    #[arg(long, value_name = "BIN")]
    pub server_bin: Option<PathBuf>,
    /// Requests in flight (one connection each) for both generators.
    #[arg(long = "in-flight", value_name = "N", default_value_t = 8)]
    pub connections: usize,
    /// Deprecated spelling of --in-flight.
    #[arg(
        long = "connections",
        hide = true,
        value_name = "N",
        conflicts_with = "connections"
    )]
    pub old_connections: Option<usize>,
    /// Length of each run, whole seconds (wrk's resolution): e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = contract::parse::duration)]
    pub duration: Duration,
    /// Rounds; each runs both generators, order alternating.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The wrk binary.
    #[arg(long, default_value = "wrk")]
    pub wrk: PathBuf,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

impl From<&BenchArgs> for BenchConfig {
    fn from(a: &BenchArgs) -> BenchConfig {
        BenchConfig {
            target: a.target.clone(),
            allow_remote: a.allow_remote,
            server_bin: a.server_bin.clone(),
            connections: a.connections,
            duration: a.duration,
            rounds: a.rounds,
            wrk: a.wrk.clone(),
        }
    }
}

/// `load bench-peer`: the comparison with a line per round on stderr, then its summary (or
/// one JSON document with `--json`).
pub(super) async fn run_bench_peer(a: BenchArgs) -> anyhow::Result<i32> {
    let mut round = 0;
    let report = loadgen::bench::run((&a).into(), |vb, wr| {
        if !a.json {
            eprintln!(
                "round {round}: vaultbench {:.0} req/s ({:.1} CPU-µs/req), wrk {:.0} req/s ({:.1} CPU-µs/req), ratio {:.3}",
                vb.requests_per_s,
                vb.cpu_us_per_request,
                wr.requests_per_s,
                wr.cpu_us_per_request,
                vb.requests_per_s / wr.requests_per_s
            );
        }
        round += 1;
    })
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit::OK);
    }
    println!(
        "GET /livez, {} connections, {} x {} s per generator, alternating",
        report.connections, a.rounds, report.duration_s
    );
    println!(
        "requests/s ratio vaultbench/wrk (median): {:.3}  (target ≥ 0.8)",
        report.ratio_median
    );
    println!(
        "CPU-µs per request (median): vaultbench {:.2}, wrk {:.2}",
        report.vaultbench_cpu_us_per_request, report.wrk_cpu_us_per_request
    );
    println!(
        "signing: {:.2} µs mean per request under load; tight loop: {:.0} ns (generator path), {:.0} ns (protocol::sign_request)",
        report.signing_mean_us, report.device_sign_loop_ns, report.sign_loop_ns
    );
    Ok(exit::OK)
}

//! `load bench-peer`: the generator against wrk on the same trivial endpoint.

use std::path::PathBuf;
use std::time::Duration;

use contract::exit;
use loadgen::bench::BenchConfig;

use super::conn::note_renamed;

/// `bench-peer` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Server to drive, e.g. http://127.0.0.1:8080; default: start `vaultbench serve-ref`
    /// on a temp data dir.
    #[arg(help_heading = "Target", long, value_name = "URL")]
    pub url: Option<String>,
    /// Deprecated spelling of --url.
    #[arg(
        long = "target",
        hide = true,
        value_name = "URL",
        conflicts_with = "url"
    )]
    pub old_target: Option<String>,
    /// Allow a target outside loopback.
    #[arg(help_heading = "Target", long)]
    pub allow_remote: bool,
    /// Binary that serves the reference server as `BIN serve-ref --data DIR`
    /// (default: this executable).
    #[arg(help_heading = "Target", long, value_name = "BIN")]
    pub server_bin: Option<PathBuf>,
    /// Requests in flight (one connection each) for both generators.
    #[arg(
        help_heading = "Load",
        long = "in-flight",
        value_name = "N",
        default_value_t = 8
    )]
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
    #[arg(help_heading = "Load", long, default_value = "5s", value_parser = contract::parse::duration)]
    pub duration: Duration,
    /// Rounds; each runs both generators, order alternating.
    #[arg(help_heading = "Load", long, default_value_t = 3)]
    pub rounds: usize,
    /// The wrk binary.
    #[arg(help_heading = "Target", long, default_value = "wrk")]
    pub wrk: PathBuf,
    /// Held connections to compare afterwards (0: none): wrk holding N keep-alive
    /// connections against vaultbench holding N enrolled devices' long polls, RSS per
    /// connection for each. Needs the server bench-peer starts (no --url).
    #[arg(help_heading = "Load", long, value_name = "N", default_value_t = 1000)]
    pub held: usize,
    /// Print one JSON document on stdout.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

impl BenchArgs {
    /// The deprecated spellings: a note each, then their values in the new fields.
    pub(super) fn take_deprecated(&mut self) {
        if let Some(n) = self.old_connections.take() {
            note_renamed("--connections", "--in-flight");
            self.connections = n;
        }
        if let Some(url) = self.old_target.take() {
            note_renamed("--target", "--url");
            self.url = Some(url);
        }
    }
}

impl From<&BenchArgs> for BenchConfig {
    fn from(a: &BenchArgs) -> BenchConfig {
        BenchConfig {
            target: a.url.clone(),
            allow_remote: a.allow_remote,
            server_bin: a.server_bin.clone(),
            connections: a.connections,
            duration: a.duration,
            rounds: a.rounds,
            wrk: a.wrk.clone(),
            held: if a.url.is_some() { 0 } else { a.held },
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
    if a.url.is_some() && a.held > 0 {
        println!("held connections: compared only against the server bench-peer starts (no --url)");
    }
    if let Some(h) = &report.held {
        println!(
            "RSS per held connection ({} held): vaultbench {:.1} KiB (a device's long poll), wrk {:.1} KiB (a keep-alive connection), ratio {:.2}",
            h.connections,
            h.vaultbench_kib_per_connection,
            h.wrk_kib_per_connection,
            h.vaultbench_kib_per_connection / h.wrk_kib_per_connection.max(f64::MIN_POSITIVE)
        );
    }
    Ok(exit::OK)
}

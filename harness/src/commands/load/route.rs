//! `load` without a subcommand: the route load (closed or open loop) through the protocol's
//! side of the seam, its one output tail for every protocol, and the Locust worker.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use contract::exit;
use loadgen::Mode;

use super::conn::{Checker, ConnArgs, parse_shard};
use super::report::peak_rss_kib;
use crate::sample::protocols::load::{Head, LocustJob, RouteJob, RouteRun, statuses};
use crate::sample::protocols::{self, ProtocolImpl, Support};

/// Route load flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(help_heading = "Load", long, help = route_help())]
    pub route: Option<String>,
    /// The folder (a vault path, "" for the root) that folder-listing routes list.
    #[arg(help_heading = "Load", long, default_value = "")]
    pub folder: String,
    /// Closed loop: keep N requests in flight.
    #[arg(help_heading = "Load", long, value_name = "N", conflicts_with = "rate")]
    pub in_flight: Option<usize>,
    /// Open loop: start R requests per second (latency from the intended send time).
    #[arg(help_heading = "Load", long, value_name = "R")]
    pub rate: Option<f64>,
    /// Open loop: most requests outstanding at once.
    #[arg(help_heading = "Load", long, value_name = "N", default_value_t = 256)]
    pub max_in_flight: usize,
    /// Enrolled devices the requests are spread over (protocols that enrol devices).
    #[arg(help_heading = "Load", long, value_name = "K", default_value_t = 4)]
    pub devices: usize,
    /// How long to run, with a unit: 500ms, 10s, 2m, 1h.
    #[arg(help_heading = "Bounds", long, default_value = "10s", value_parser = contract::parse::duration)]
    pub duration: Duration,
    /// Stop after this many requests even if the duration has not passed.
    #[arg(
        help_heading = "Bounds",
        long,
        value_name = "M",
        default_value_t = 1_000_000
    )]
    pub max_requests: u64,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
    /// Write the latency histograms as an HdrHistogram interval log, tagged by route.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Run as shard I of N generators (counting from 0): this shard's devices are
    /// I*K .. (I+1)*K of the state file (K = --devices), enrolled under the state file's
    /// lock when missing, and its nonce streams are its own. Merge the shards' --hdr-log
    /// files with `vaultbench hlog merge`.
    #[arg(help_heading = "Distributed", long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<loadgen::Shard>,
    /// Run as a Locust worker of the master at HOST:PORT (its --master-bind-port): the
    /// master's user count becomes this worker's devices (at most --devices, from the
    /// device range of the worker index the master assigns, or of --shard), each keeping
    /// one request of --route in flight; stats go to the master every 3 s. Exits 0 when the
    /// master says quit, 9 when the master stops answering heartbeats (see exit codes).
    #[arg(
        help_heading = "Distributed",
        long,
        value_name = "HOST:PORT",
        conflicts_with = "rate"
    )]
    pub locust_master: Option<String>,
    /// With --locust-master: how long without a heartbeat answer before the master counts as
    /// gone (Locust's own liveness is 3 heartbeats of 1 s).
    #[arg(help_heading = "Distributed", long, value_name = "DURATION", default_value = "3s", value_parser = contract::parse::duration)]
    pub master_timeout: Duration,
}

/// `--route`'s help: every registered protocol's routes, from the registry.
fn route_help() -> String {
    let lists: Vec<String> = protocols::REGISTRY
        .iter()
        .map(|p| format!("{}: {}", p.spec().name, (p.spec().routes)().join(", ")))
        .collect();
    format!("The route to load, by --protocol ({})", lists.join("; "))
}

/// The route `--route` names, checked against `imp`'s list; `also` is appended to the
/// message of a missing one.
fn route_of<'a>(a: &'a RouteArgs, imp: &dyn ProtocolImpl, also: &str) -> anyhow::Result<&'a str> {
    let spec = imp.spec();
    let known = (spec.routes)();
    let route = a.route.as_deref().with_context(|| {
        format!(
            "--route is required (with --protocol {}: {}){also}",
            spec.name,
            known.join(", ")
        )
    })?;
    if !known.contains(&route) {
        bail!(
            "--route: unknown {} route {route:?} (known: {})",
            spec.name,
            known.join(", ")
        );
    }
    Ok(route)
}

/// `load --route R`: the route load through the protocol's side of the seam.
pub(super) async fn run_route(a: RouteArgs) -> anyhow::Result<i32> {
    let imp = a.conn.protocol()?;
    if let Some(master) = a.locust_master.as_deref() {
        return run_locust_worker(&a, imp, master).await;
    }
    let route = route_of(
        &a,
        imp,
        ", or use a subcommand: push, pull, fanout, bench-peer",
    )?;
    let mode = mode_of(&a)?;
    if a.max_requests == 0 {
        bail!("--max-requests 0: must be at least 1");
    }
    let check = Checker::of(imp, &a.conn)?;
    let conn = check.conn();
    let run = imp
        .load_route(RouteJob {
            conn: &conn,
            route,
            mode,
            duration: a.duration,
            max_requests: a.max_requests,
            devices: a.devices,
            shard: a.shard,
            folder: &a.folder,
        })
        .await?;
    finish_route(&a, &run)
}

/// The end of a route run for every protocol: the `--hdr-log` file, then the JSON document
/// (or the summary), then the refusal of a run where no request succeeded.
fn finish_route(a: &RouteArgs, run: &RouteRun) -> anyhow::Result<i32> {
    let report = &*run.report;
    if let Some(path) = &a.hdr_log {
        let mut buf = Vec::new();
        report
            .write_hdr_log(&mut buf)
            .context("encoding the interval log")?;
        crate::atomic::write_atomic(path, &buf)
            .with_context(|| format!("--hdr-log {}", path.display()))?;
    }
    let head = Head {
        target: &run.target,
        seed: a.conn.seed,
        peak_rss_kib: peak_rss_kib(),
    };
    if a.json {
        println!("{}", report.json(&head)?);
    } else {
        print!("{}", report.human(&head));
    }
    let facts = report.facts();
    if facts.requests > 0 && facts.stats.ok() == 0 {
        bail!(
            "route {}: no request succeeded ({})",
            facts.route,
            statuses(&facts.stats.status)
        );
    }
    Ok(exit::OK)
}

/// `load --locust-master HOST:PORT`: the route load as a Locust worker, for a protocol with
/// enrolled devices (its side of the seam connects, enrols and runs).
async fn run_locust_worker(
    a: &RouteArgs,
    imp: &'static dyn ProtocolImpl,
    master: &str,
) -> anyhow::Result<i32> {
    if let Support::No(why) = imp.load_devices_support() {
        bail!(
            "--locust-master runs enrolled devices, which only {} targets have; {} cannot: {why}",
            protocols::those_that(|p| p.load_devices_support()),
            imp.spec().name
        );
    }
    let route = route_of(a, imp, "")?;
    if a.devices == 0 {
        bail!("--devices 0: must be at least 1");
    }
    if a.in_flight.is_some() {
        bail!(
            "--in-flight: with --locust-master the master's user count is the requests in flight"
        );
    }
    let check = Checker::of(imp, &a.conn)?;
    let conn = check.conn();
    imp.load_locust(LocustJob {
        conn: &conn,
        master,
        route,
        devices: a.devices,
        shard: a.shard,
        master_timeout: a.master_timeout,
        hdr_log: a.hdr_log.as_deref(),
    })
    .await
}

/// Closed or open loop from the flags.
fn mode_of(a: &RouteArgs) -> anyhow::Result<Mode> {
    Ok(match (a.in_flight, a.rate) {
        (Some(0), _) => bail!("--in-flight 0: must be at least 1"),
        (Some(n), None) => Mode::Closed { in_flight: n },
        (None, Some(r)) if !(r > 0.0 && r.is_finite()) => {
            bail!("--rate {r}: must be a positive number of requests per second")
        }
        (None, Some(r)) => {
            if a.max_in_flight == 0 {
                bail!("--max-in-flight 0: must be at least 1");
            }
            Mode::Open {
                rate_per_s: r,
                max_in_flight: a.max_in_flight,
            }
        }
        (None, None) => {
            bail!("one of --in-flight N (closed loop) or --rate R (open loop) is required")
        }
        (Some(_), Some(_)) => bail!("--in-flight and --rate are exclusive"),
    })
}

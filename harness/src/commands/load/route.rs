//! `load` without a subcommand: the route load (closed or open loop), its output tail, and
//! the Locust worker.

use super::conn::{
    COUCHDB, ConnArgs, WEBDAV, couch_client, dav_client, ensure_devices, ensure_shard_devices,
    parse_shard, target_of,
};
use super::report::{fmt_summary, human_route, peak_rss_kib, statuses};

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use contract::exit;
use loadgen::couch::{CouchRoute, CouchRouteLoadConfig, CouchRouteLoadReport};
use loadgen::webdav::{DavRoute, DavRouteLoadConfig, DavRouteLoadReport};
use loadgen::{Mode, Route, RouteLoadConfig, RouteLoadReport, Target, run_route_load};

/// `--route` values: the generator's route names for obsync-v1 (`put-chunk`, `livez`, ...).
fn parse_route(s: &str) -> Result<Route, String> {
    Route::ALL
        .into_iter()
        .find(|r| r.name() == s)
        .ok_or_else(|| {
            let known: Vec<&str> = Route::ALL.iter().map(|r| r.name()).collect();
            format!(
                "unknown obsync-v1 route {s:?} (known: {})",
                known.join(", ")
            )
        })
}

/// `--route` values with `--protocol webdav` (`propfind-depth1`, `put-file`, ...).
fn parse_dav_route(s: &str) -> Result<DavRoute, String> {
    DavRoute::ALL
        .into_iter()
        .find(|r| r.name() == s)
        .ok_or_else(|| {
            let known: Vec<&str> = DavRoute::ALL.iter().map(|r| r.name()).collect();
            format!("unknown WebDAV route {s:?} (known: {})", known.join(", "))
        })
}

/// Route load flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The route to load: put-chunk, post-version, changes, get-chunk, chunks-get,
    /// chunks-exists, livez; with `--protocol webdav`: propfind-depth1, propfind-infinity,
    /// put-file, get-file, move, mkcol, delete.
    #[arg(long)]
    pub route: Option<String>,
    /// WebDAV: the folder (a vault path, "" for the root) the PROPFIND routes list.
    #[arg(long, default_value = "")]
    pub folder: String,
    /// Closed loop: keep N requests in flight.
    #[arg(long, value_name = "N", conflicts_with = "rate")]
    pub in_flight: Option<usize>,
    /// Open loop: start R requests per second (latency from the intended send time).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Open loop: most requests outstanding at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_in_flight: usize,
    /// How long to run, with a unit: 500ms, 10s, 2m, 1h.
    #[arg(long, default_value = "10s", value_parser = contract::parse::duration)]
    pub duration: Duration,
    /// Stop after this many requests even if the duration has not passed.
    #[arg(long, value_name = "M", default_value_t = 1_000_000)]
    pub max_requests: u64,
    /// Enrolled devices the requests are spread over.
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub devices: usize,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Write the latency histograms as an HdrHistogram interval log, tagged by route.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Run as shard I of N generators (counting from 0): this shard's devices are
    /// I*K .. (I+1)*K of the state file (K = --devices), enrolled under the state file's
    /// lock when missing, and its nonce streams are its own. Merge the shards' --hdr-log
    /// files with `vaultbench hlog merge`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<loadgen::Shard>,
    /// Run as a Locust worker of the master at HOST:PORT (its --master-bind-port): the
    /// master's user count becomes this worker's devices (at most --devices, from the
    /// device range of the worker index the master assigns, or of --shard), each keeping
    /// one request of --route in flight; stats go to the master every 3 s. Exits 0 when the
    /// master says quit, 9 when the master stops answering heartbeats (see exit codes).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "rate")]
    pub locust_master: Option<String>,
    /// With --locust-master: how long without a heartbeat answer before the master counts as
    /// gone (Locust's own liveness is 3 heartbeats of 1 s).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = contract::parse::duration)]
    pub master_timeout: Duration,
}

pub(super) async fn run_route(a: RouteArgs) -> anyhow::Result<i32> {
    if let Some(master) = a.locust_master.clone() {
        return run_locust_worker(a, &master).await;
    }
    if a.conn.protocol == COUCHDB {
        return run_couch_route(&a).await;
    }
    let target = target_of(&a.conn)?;
    let route = a.route.as_deref().context(
        "--route is required (put-chunk, post-version, changes, get-chunk, chunks-get, chunks-exists, livez; with --protocol webdav: propfind-depth1, put-file, get-file, move, ...), or use a subcommand: push, pull, bench-peer",
    )?;
    let mode = mode_of(&a)?;
    if a.max_requests == 0 {
        bail!("--max-requests 0: must be at least 1");
    }
    if a.conn.protocol == WEBDAV {
        let route = parse_dav_route(route).map_err(|e| anyhow::anyhow!("--route: {e}"))?;
        return run_dav_route(&a, &target, route, mode).await;
    }
    let route = parse_route(route).map_err(|e| anyhow::anyhow!("--route: {e}"))?;
    if a.devices == 0 {
        bail!("--devices 0: must be at least 1");
    }
    let devices = match a.shard {
        Some(shard) => ensure_shard_devices(&target, &a.conn, a.devices, shard).await?,
        None => {
            let mut d = ensure_devices(&target, &a.conn, a.devices).await?;
            d.truncate(a.devices);
            d
        }
    };
    let cfg = RouteLoadConfig {
        route,
        mode,
        duration: a.duration,
        max_requests: a.max_requests,
        seed: a.conn.seed,
    };
    let report = run_route_load(&devices, &cfg).await?;
    finish_route(RouteOut::of(&a, &target), &report, route.name(), |rss| {
        human_route(&report, target.base(), a.conn.seed, rss)
    })
}

async fn run_dav_route(
    a: &RouteArgs,
    target: &Target,
    route: DavRoute,
    mode: Mode,
) -> anyhow::Result<i32> {
    let client = dav_client(target, &a.conn).await?;
    let cfg = DavRouteLoadConfig {
        route,
        mode,
        duration: a.duration,
        max_requests: a.max_requests,
        seed: a.conn.seed,
        folder: a.folder.clone(),
    };
    let report = loadgen::webdav::run_dav_route_load(&client, &cfg).await?;
    finish_route(RouteOut::of(a, target), &report, route.name(), |rss| {
        let mode = match mode {
            Mode::Closed { in_flight } => format!("closed loop, {in_flight} in flight"),
            Mode::Open {
                rate_per_s,
                max_in_flight,
            } => format!("open loop, {rate_per_s} req/s (≤ {max_in_flight} in flight)"),
        };
        let mut out = format!(
            "WebDAV route {} against {}: {mode}, {:.2} s, seed {:#x}\n",
            route.name(),
            target.base(),
            report.wall_ns as f64 / 1e9,
            a.conn.seed
        );
        out += &format!(
            "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
            report.requests,
            report.throughput_per_s,
            report.stats.ok(),
            report.stats.errors(),
            statuses(&report.stats.status)
        );
        out += &fmt_summary("latency", &report.summary());
        if let Some(kib) = rss {
            out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
        }
        out
    })
}

/// the target answers as CouchDB).
async fn run_couch_route(a: &RouteArgs) -> anyhow::Result<i32> {
    let client = couch_client(&a.conn)?;
    let name = a.route.as_deref().context(
        "--route is required (with --protocol couchdb: bulk-docs, changes, revs-diff, bulk-get, all-docs-keys)",
    )?;
    let route = CouchRoute::parse(name).with_context(|| {
        format!(
            "--route: unknown CouchDB route {name:?} (known: {})",
            CouchRoute::ALL.map(|r| r.name()).join(", ")
        )
    })?;
    let mode = mode_of(a)?;
    if a.max_requests == 0 {
        bail!("--max-requests 0: must be at least 1");
    }
    let cfg = CouchRouteLoadConfig {
        route,
        mode,
        duration: a.duration,
        max_requests: a.max_requests,
        seed: a.conn.seed,
    };
    let report = loadgen::couch::run_couch_route_load(&client, &cfg).await?;
    let target = client.target().clone();
    finish_route(RouteOut::of(a, &target), &report, route.name(), |rss| {
        let mut out = format!(
            "CouchDB route {} against {}/{}: {:.2} s, seed {:#x}\n",
            route.name(),
            target.base(),
            client.db_name(),
            report.wall_ns as f64 / 1e9,
            a.conn.seed
        );
        out += &format!(
            "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
            report.requests,
            report.throughput_per_s,
            report.stats.ok(),
            report.stats.errors(),
            statuses(&report.stats.status)
        );
        out += &fmt_summary("latency", &report.summary());
        if let Some(kib) = rss {
            out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
        }
        out
    })
}

/// What a route run's output needs besides its report: the flags and the target.
struct RouteOut<'a> {
    target: &'a str,
    seed: u64,
    json: bool,
    hdr_log: Option<&'a Path>,
}

impl<'a> RouteOut<'a> {
    fn of(a: &'a RouteArgs, target: &'a Target) -> RouteOut<'a> {
        RouteOut {
            target: target.base(),
            seed: a.conn.seed,
            json: a.json,
            hdr_log: a.hdr_log.as_deref(),
        }
    }
}

/// The `--json` document of a route run, for either protocol's report.
#[derive(Serialize)]
struct RouteDoc<'a, R> {
    target: &'a str,
    seed: u64,
    peak_rss_kib: Option<u64>,
    report: &'a R,
}

/// A route run's report, whichever protocol made it.
trait RouteReport: Serialize {
    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()>;
    fn requests(&self) -> u64;
    fn stats(&self) -> &loadgen::RouteStats;
}

impl RouteReport for RouteLoadReport {
    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()> {
        RouteLoadReport::write_hdr_log(self, w)
    }
    fn requests(&self) -> u64 {
        self.requests
    }
    fn stats(&self) -> &loadgen::RouteStats {
        &self.stats
    }
}

impl RouteReport for CouchRouteLoadReport {
    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()> {
        CouchRouteLoadReport::write_hdr_log(self, w)
    }
    fn requests(&self) -> u64 {
        self.requests
    }
    fn stats(&self) -> &loadgen::RouteStats {
        &self.stats
    }
}

impl RouteReport for DavRouteLoadReport {
    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()> {
        DavRouteLoadReport::write_hdr_log(self, w)
    }
    fn requests(&self) -> u64 {
        self.requests
    }
    fn stats(&self) -> &loadgen::RouteStats {
        &self.stats
    }
}

/// The end of a route run for both protocols: the `--hdr-log` file, then the JSON document
/// (or `human`'s text, given the peak RSS), then the refusal of a run where no request
/// succeeded.
fn finish_route<R: RouteReport>(
    out: RouteOut<'_>,
    report: &R,
    route: &str,
    human: impl FnOnce(Option<u64>) -> String,
) -> anyhow::Result<i32> {
    if let Some(path) = out.hdr_log {
        let mut buf = Vec::new();
        report
            .write_hdr_log(&mut buf)
            .context("encoding the interval log")?;
        crate::atomic::write_atomic(path, &buf)
            .with_context(|| format!("--hdr-log {}", path.display()))?;
    }
    let rss = peak_rss_kib();
    if out.json {
        let doc = RouteDoc {
            target: out.target,
            seed: out.seed,
            peak_rss_kib: rss,
            report,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", human(rss));
    }
    if report.requests() > 0 && report.stats().ok() == 0 {
        bail!(
            "route {route}: no request succeeded ({})",
            statuses(&report.stats().status)
        );
    }
    Ok(exit::OK)
}

/// `load --locust-master HOST:PORT`: the route load as a Locust worker (`loadgen::locust`).
/// Connects, takes the worker index the master assigns (or `--shard`'s), enrols that

/// until it says quit (exit 0) or goes silent (exit 9, `MASTER_GONE`).
async fn run_locust_worker(a: RouteArgs, master: &str) -> anyhow::Result<i32> {
    let target = target_of(&a.conn)?;
    if !a.conn.protocol.is_default() {
        bail!("--locust-master runs obsync-v1 devices; --protocol webdav and couchdb have none");
    }
    let route = a.route.as_deref().context(
        "--route is required with --locust-master (put-chunk, post-version, changes, get-chunk, chunks-get, chunks-exists, livez)",
    )?;
    let route = parse_route(route).map_err(|e| anyhow::anyhow!("--route: {e}"))?;
    if a.devices == 0 {
        bail!("--devices 0: must be at least 1");
    }
    if a.in_flight.is_some() {
        bail!(
            "--in-flight: with --locust-master the master's user count is the requests in flight"
        );
    }
    let cfg = loadgen::locust::WorkerConfig {
        master: master.to_owned(),
        route,
        seed: a.conn.seed,
        liveness: a.master_timeout,
        hdr_log: a.hdr_log.clone(),
        rss_bytes: std::sync::Arc::new(|| {
            procstat::read::rss_kib(procstat::Pid::Current)
                .ok()
                .flatten()
                .unwrap_or(0)
                * 1024
        }),
    };
    let conn = loadgen::locust::connect(&cfg).await?;
    let index = match (a.shard, conn.index) {
        (Some(s), _) => s.index,
        (None, Some(i)) => i,
        (None, None) => bail!(
            "locust master {master} assigned no worker index (a master before Locust 2.10.3): pass --shard I/N"
        ),
    };
    let shard = a.shard.unwrap_or(loadgen::Shard {
        index,
        count: index + 1,
    });
    let devices = ensure_shard_devices(&target, &a.conn, a.devices, shard).await?;
    eprintln!(
        "vaultbench: locust worker {index} of master {master}: route {}, devices {}..{} of the state file",
        route.name(),
        index as usize * a.devices,
        (index as usize + 1) * a.devices
    );
    match conn.run(devices, &cfg).await? {
        loadgen::locust::Outcome::Quit => Ok(exit::OK),
        loadgen::locust::Outcome::MasterGone { silent } => {
            eprintln!(
                "vaultbench: locust master {master} silent for {:.1} s (more than --master-timeout {:?}): load stopped",
                silent.as_secs_f64(),
                a.master_timeout
            );
            Ok(exit::MASTER_GONE)
        }
    }
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

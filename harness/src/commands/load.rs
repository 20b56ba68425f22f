//! `vaultbench load`: route load, `load push|pull` whole-vault transfers, `load bench-peer`;
//! over the signed obsync-v1 protocol, or over WebDAV with `--protocol webdav`.
//!
//! Exit codes (the harness maps errors to 2): 0 when the run completed (failed requests
//! are reported per status, not fatal), 2 for bad input, an unreachable target or one that
//! speaks the other protocol (checked before any load request), a wrong setup token, or a
//! route load in which no request succeeded. As a Locust worker (`--locust-master`): 0 when
//! the master said quit, 9 (`MASTER_GONE`) when it went silent, 2 when it sent a message
//! that cannot be read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use contract::exit;
use loadgen::bench::BenchConfig;
use loadgen::protocols::couch::{
    CouchClient, CouchRoute, CouchRouteLoadConfig, CouchRouteLoadReport, Replica, Writer,
};
use loadgen::protocols::webdav::{
    BasicAuth, DavClient, DavRoute, DavRouteLoadConfig, DavRouteLoadReport,
};
use loadgen::{
    Device, HistSummary, Mode, PushOpts, Route, RouteLoadConfig, RouteLoadReport, StateFile,
    Target, TransferReport, enroll, pair, probe, pull_vault, push_vault, run_route_load,
};

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

/// `load fanout` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Devices holding `GET /v1/changes?wait=` long polls.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub devices: usize,
    /// Devices pushing at the same time, each its own files.
    #[arg(long, value_name = "D", default_value_t = 1)]
    pub pushers: usize,
    /// Posts per pushing device.
    #[arg(long, value_name = "M", default_value_t = 10)]
    pub posts: u32,
    /// Between one pusher's posts: 1s, 200ms.
    #[arg(long, default_value = "1s", value_parser = contract::parse::duration)]
    pub interval: Duration,
    /// Each long poll's wait (at most 55s).
    #[arg(long, default_value = "30s", value_parser = contract::parse::duration)]
    pub wait: Duration,
    /// After the waiters' first polls are out, before the first post.
    #[arg(long, default_value = "2s", value_parser = contract::parse::duration)]
    pub settle: Duration,
    /// The server's process id, to report its RSS and CPU per 1,000 held devices.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Run as shard I of N (devices I*(N+D) .. of the state file; see `load --shard`).
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<loadgen::Shard>,
    /// Where the pushers' files are written (default: the system temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

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
async fn run_bench_peer(a: BenchArgs) -> anyhow::Result<i32> {
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

/// Where to connect and how devices are enrolled.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnArgs {
    /// The obsync-v1 server, e.g. http://127.0.0.1:8080 (loopback only unless --allow-remote).
    #[arg(long)]
    pub target: Option<String>,
    /// File holding the server's setup token (needed only to enrol the first time).
    #[arg(long, value_name = "FILE")]
    pub setup_token_file: Option<PathBuf>,
    /// Enrolment state (device ids and secrets, written 0600); default
    /// ~/.local/state/vaultbench/load-HOST-PORT.json.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Allow a target outside 127.0.0.0/8 and ::1.
    #[arg(long)]
    pub allow_remote: bool,
    /// Seed of the request nonces and generated bodies (decimal or 0x hex). (`--seed` is the
    /// vault seed everywhere; `load` has no vault.)
    #[arg(long = "nonce-seed", value_name = "SEED", default_value = "0x5eed", value_parser = contract::parse::seed)]
    pub seed: u64,
    /// Deprecated spelling of --nonce-seed.
    #[arg(long = "seed", hide = true, value_name = "SEED", value_parser = contract::parse::seed, conflicts_with = "seed")]
    pub old_seed: Option<u64>,
    /// The protocol the target speaks: `obsync` (signed obsync-v1, enrolled devices),
    /// `webdav`, or `couchdb` (Self-hosted LiveSync's replication; `--target
    /// http://HOST:PORT/DB`). Checked before any load request: a target that answers as the other
    /// protocol fails with one line naming both (exit 2).
    #[arg(long, value_name = "NAME", default_value = contract::protocol::DEFAULT_NAME, value_parser = crate::prepare::protocol_value_parser())]
    pub protocol: Protocol,
    /// WebDAV and CouchDB: a file holding `user:password` for basic auth (none when absent).
    #[arg(long, value_name = "FILE")]
    pub basic_auth_file: Option<PathBuf>,
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

fn parse_shard(s: &str) -> Result<loadgen::Shard, String> {
    s.parse()
}

/// `load push|pull` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TransferArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The vault directory (push: must exist; pull: created if missing).
    #[arg(long, value_name = "DIR")]
    pub vault: PathBuf,
    /// Which enrolled device acts (default: 0 for push, 1 for pull).
    #[arg(long, value_name = "I")]
    pub device: Option<usize>,
    /// Push: files in flight.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub in_flight: usize,
    /// Push: a throughput checkpoint every N files.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub checkpoint_every: usize,
    /// Pull: start after this change-feed seq (obsync-v1).
    #[arg(long, default_value_t = 0)]
    pub since: u64,
    /// WebDAV pull: walk with one `Depth: infinity` PROPFIND instead of Depth 1 per folder.
    #[arg(long)]
    pub depth_infinity: bool,
    /// Pull: most entries the walk of the changes feed (obsync `GET /v1/changes` pages,
    /// CouchDB `_changes` pages) may list [default: obsync 1048576, CouchDB 4194304].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub feed_max_entries: Option<u64>,
    /// Pull: most pages the walk of the changes feed may ask for [default: obsync 4096,
    /// CouchDB 131072].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub feed_max_pages: Option<u64>,
    /// CouchDB pull: most bytes of documents the pull may hold at once (chunks until their
    /// file is written, files waiting for chunks, what is kept of each file); each answer is
    /// capped at what is left [default: 64MiB].
    #[arg(long, value_name = "BYTES", value_parser = crate::prepare::parse_bytes)]
    pub feed_max_bytes: Option<u64>,
    /// Upper bound on the whole push or pull, every request included: `1h`, `90s` (sized
    /// from `vault100k`); past it the transfer stops with one line naming this flag.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = contract::parse::duration)]
    pub transfer_timeout: Duration,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl TransferArgs {
    /// The changes feed walk bounds: `defaults` (the protocol's) with what `--feed-max-*` set.
    fn feed_bounds(&self, defaults: loadgen::FeedBounds) -> loadgen::FeedBounds {
        defaults.with(loadgen::FeedOverrides {
            max_entries: self.feed_max_entries,
            max_pages: self.feed_max_pages,
            max_bytes: self.feed_max_bytes,
        })
    }
}

use contract::protocol::Protocol;

/// The registered protocols `load` drives by name (the default needs no name).
const WEBDAV: Protocol = Protocol::named("webdav");
const COUCHDB: Protocol = Protocol::named("couchdb");

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

fn target_of(conn: &ConnArgs) -> anyhow::Result<Target> {
    let url = conn
        .target
        .as_deref()
        .context("--target is required (e.g. --target http://127.0.0.1:8080)")?;
    Ok(Target::parse(url, conn.allow_remote)?)
}

/// Loads the state file's devices (a new session) or enrols them, pairing more as needed
/// so that at least `k` exist. The state is saved before any load request is sent; the
/// target's protocol is checked before either (`check_target_protocol`).
pub async fn ensure_devices(
    target: &Target,
    conn: &ConnArgs,
    k: usize,
) -> anyhow::Result<Vec<Device>> {
    let path = conn
        .state
        .clone()
        .unwrap_or_else(|| StateFile::default_path(target));
    let mut devices;
    let mut state = match StateFile::begin_session(&path)? {
        Some(s) => {
            // The readiness probe, and the other protocol named when it fails.
            check_target_protocol(target, conn).await?;
            devices = s.devices(target, &path)?;
            s
        }
        None => {
            let token_path = token_file(target, conn, &path)?;
            check_target_protocol(target, conn).await?;
            let token = setup_token(token_path)?;
            devices = enroll(target, &token, k, conn.seed).await?;
            eprintln!(
                "vaultbench: enrolled {} device(s) on {}; state in {}",
                devices.len(),
                target.base(),
                path.display()
            );
            let s = StateFile::from_devices(target, conn.seed, &devices);
            s.save(&path)?;
            s
        }
    };
    if devices.len() < k {
        let first = devices[0].clone();
        for i in devices.len()..k {
            let d = pair(&first, i, state.seed, state.session)
                .await
                .with_context(|| format!("pairing device {i} (state file {})", path.display()))?;
            devices.push(d);
        }
        let session = state.session;
        state = StateFile::from_devices(target, state.seed, &devices);
        state.session = session;
        state.save(&path)?;
    }
    Ok(devices)
}

/// The setup token file enrolment needs when there is no state file at `path` yet.
fn token_file<'a>(target: &Target, conn: &'a ConnArgs, path: &Path) -> anyhow::Result<&'a Path> {
    conn.setup_token_file.as_deref().with_context(|| {
        format!(
            "--setup-token-file is required to enrol devices on {} (no state file at {})",
            target.base(),
            path.display()
        )
    })
}

/// The setup token in `token_path`, trimmed; an empty file is an error.
fn setup_token(token_path: &Path) -> anyhow::Result<String> {
    let token = std::fs::read_to_string(token_path)
        .with_context(|| format!("setup token file {}", token_path.display()))?;
    if token.trim().is_empty() {
        bail!("setup token file {} is empty", token_path.display());
    }
    Ok(token.trim().to_owned())
}

/// The devices of one shard (`shard.devices(per_shard)` of the state file). Under the state
/// file's lock from loading it to saving it: the first generator to get the lock sets the
/// account up (with --setup-token-file) and pairs every device below its range's end; the
/// others find them there. Each gets its own session number and nonce streams tagged with
/// its index.
pub async fn ensure_shard_devices(
    target: &Target,
    conn: &ConnArgs,
    per_shard: usize,
    shard: loadgen::Shard,
) -> anyhow::Result<Vec<Device>> {
    let range = shard
        .devices(per_shard)
        .with_context(|| format!("--shard {shard} with --devices {per_shard}: too many devices"))?;
    let path = conn
        .state
        .clone()
        .unwrap_or_else(|| StateFile::default_path(target));
    let lock = StateFile::lock(&path)?;
    check_target_protocol(target, conn).await?;
    let (mut devices, seed, session) = match StateFile::begin_session_locked(&path)? {
        Some(mut s) if s.devices.len() >= range.end => {
            // Every device of this shard is enrolled: build only this shard's.
            s.stream_tag = shard.index;
            let devices = s.devices_in(target, &path, range)?;
            drop(lock);
            return Ok(devices);
        }
        Some(mut s) => {
            s.stream_tag = shard.index;
            (s.devices(target, &path)?, s.seed, s.session)
        }
        None => {
            let token = setup_token(token_file(target, conn, &path)?)?;
            let devices = enroll(target, &token, 1, conn.seed).await?;
            (devices, conn.seed, 0)
        }
    };
    let had = devices.len();
    for i in devices.len()..range.end {
        let d = pair(&devices[0], i, seed, session)
            .await
            .with_context(|| format!("pairing device {i} (state file {})", path.display()))?;
        devices.push(d);
    }
    if devices.len() != had || session == 0 {
        let mut state = StateFile::from_devices(target, seed, &devices);
        state.session = session;
        state.save(&path)?;
        eprintln!(
            "vaultbench: shard {shard}: {} device(s) enrolled on {} now; state in {}",
            devices.len(),
            target.base(),
            path.display()
        );
    }
    drop(lock);
    Ok(devices.drain(range).collect())
}

async fn run_route(a: RouteArgs) -> anyhow::Result<i32> {
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

/// The basic-auth credentials of `--basic-auth-file` (`user:password` on its first line).
fn basic_auth(conn: &ConnArgs) -> anyhow::Result<Option<BasicAuth>> {
    let Some(p) = &conn.basic_auth_file else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(p).with_context(|| format!("--basic-auth-file {}", p.display()))?;
    let line = text.lines().next().unwrap_or("");
    let Some((user, password)) = line.split_once(':') else {
        bail!(
            "--basic-auth-file {}: the first line must be user:password",
            p.display()
        );
    };
    Ok(Some(BasicAuth::new(user, password)))
}

/// Whether the target answers an OPTIONS with a `DAV` header (with the credentials given).
async fn speaks_webdav(target: &Target, auth: Option<&BasicAuth>) -> bool {
    let (addr, auth) = (target.addr(), auth.cloned());
    tokio::task::spawn_blocking(move || {
        loadgen::protocols::webdav::probe_ready(addr, auth.as_ref())
    })
    .await
    .unwrap_or(false)
}

/// Checks, before any load request, that the target speaks `--protocol`: an obsync-v1
/// server answers the readiness probe, a WebDAV server answers OPTIONS with a `DAV` header.
async fn check_target_protocol(target: &Target, conn: &ConnArgs) -> anyhow::Result<()> {
    let auth = basic_auth(conn)?;
    match conn.protocol.name() {
        contract::protocol::DEFAULT_NAME => {
            let Err(e) = probe(target).await else {
                return Ok(());
            };
            if speaks_webdav(target, auth.as_ref()).await {
                bail!(
                    "protocol mismatch: --protocol obsync but target {} speaks webdav (OPTIONS answers with a DAV header): pass --protocol webdav",
                    target.base()
                );
            }
            Err(e.into())
        }
        "couchdb" => bail!(
            "--protocol couchdb: the target is checked by LiveSync's set-up (GET / must answer as CouchDB)"
        ),
        _ => {
            if speaks_webdav(target, auth.as_ref()).await {
                return Ok(());
            }
            if probe(target).await.is_ok() {
                bail!(
                    "protocol mismatch: --protocol webdav but target {} speaks obsync-v1 (its readiness probe answers): drop --protocol webdav",
                    target.base()
                );
            }
            bail!(
                "target {} does not answer OPTIONS with a 2xx and a DAV header: not a WebDAV server, or --basic-auth-file is missing or wrong",
                target.base()
            )
        }
    }
}

/// A WebDAV client of the target, after the protocol check.
async fn dav_client(target: &Target, conn: &ConnArgs) -> anyhow::Result<DavClient> {
    check_target_protocol(target, conn).await?;
    let auth = basic_auth(conn)?;
    Ok(DavClient::new(target.clone(), auth.as_ref()))
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
    let report = loadgen::protocols::webdav::run_dav_route_load(&client, &cfg).await?;
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

/// A CouchDB client of `--target http://HOST:PORT/DB` (the database in the URL's path).
fn couch_client(conn: &ConnArgs) -> anyhow::Result<CouchClient> {
    let url = conn
        .target
        .as_deref()
        .context("--target is required (with --protocol couchdb: http://HOST:PORT/DB)")?;
    let auth = basic_auth(conn)?;
    Ok(CouchClient::from_url(
        url,
        auth.as_ref(),
        conn.allow_remote,
    )?)
}

/// `load --protocol couchdb --route R`: the route load after LiveSync's set-up (which checks
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
    let report = loadgen::protocols::couch::run_couch_route_load(&client, &cfg).await?;
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

/// `load push|pull --protocol couchdb`: the vault replicated into (or out of) the database
/// as Self-hosted LiveSync does.
async fn run_couch_transfer(t: &TransferArgs, push: bool) -> anyhow::Result<i32> {
    let client = couch_client(&t.conn)?
        .with_feed_bounds(t.feed_bounds(loadgen::protocols::couch::FEED_DEFAULT));
    let report = if push {
        match std::fs::metadata(&t.vault) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--vault {}: not a directory", t.vault.display()),
            Err(e) => bail!("--vault {}: {e}", t.vault.display()),
        }
        Writer::new("vaultbench-load-a")
            .push_vault(&client, &t.vault)
            .await
            .with_context(|| format!("pushing {}", t.vault.display()))?
            .0
    } else {
        Replica::new("vaultbench-load-b")
            .pull_vault(&client, &t.vault)
            .await
            .with_context(|| format!("pulling into {}", t.vault.display()))?
    };
    let idx = t.device.unwrap_or(if push { 0 } else { 1 });
    print_transfer(t, client.target(), push, idx, &report)
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
/// index's device range under the state file's lock, then runs users as the master says
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

/// What `load fanout` read from `/proc` at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct ProcAt {
    generator_rss_kib: Option<u64>,
    server_rss_kib: Option<u64>,
    server_cpu_ticks: Option<u64>,
    at_ms: u64,
}

/// The `load fanout` document.
#[derive(Serialize)]
struct FanoutDoc<'a> {
    target: &'a str,
    seed: u64,
    report: &'a loadgen::fanout::FanoutReport,
    /// Held devices: waiters minus those refused.
    held: u64,
    server_rss_kib_per_1000_held: Option<f64>,
    /// Server CPU during the posting phase, in % of one CPU, per 1,000 held devices.
    server_cpu_pct_per_1000_held: Option<f64>,
    generator_rss_kib_per_1000_held: Option<f64>,
    /// `obsync_journal_flushes_total` over the posts (the reference server's /metrics).
    journal_flushes_per_post: Option<f64>,
    moments: [ProcAt; 3],
}

async fn run_fanout(f: FanoutArgs) -> anyhow::Result<i32> {
    let target = target_of(&f.conn)?;
    if f.devices == 0 || f.pushers == 0 || f.posts == 0 {
        bail!("--devices, --pushers and --posts must each be at least 1");
    }
    if f.wait.is_zero() || f.wait > Duration::from_secs(55) {
        bail!(
            "--wait {:?}: must be 1s to 55s (the protocol's bound)",
            f.wait
        );
    }
    let k = f.devices + f.pushers;
    let devices = match f.shard {
        Some(shard) => ensure_shard_devices(&target, &f.conn, k, shard).await?,
        None => {
            let mut d = ensure_devices(&target, &f.conn, k).await?;
            d.truncate(k);
            d
        }
    };
    let (pushers, waiters) = devices.split_at(f.pushers);
    let work = tempfile::Builder::new()
        .prefix("vaultbench-fanout-")
        .tempdir_in(f.work_dir.clone().unwrap_or_else(std::env::temp_dir))
        .context("--work-dir: a temp dir for the pushers' files")?;
    let cfg = loadgen::fanout::FanoutConfig {
        posts: f.posts,
        interval: f.interval,
        wait: f.wait,
        settle: f.settle,
        work_dir: work.path().to_owned(),
        seed: f.conn.seed,
        parts: Vec::new(),
    };
    let flushes = |m: &std::collections::BTreeMap<String, f64>| {
        m.get("obsync_journal_flushes_total").copied()
    };
    let flushes_before = loadgen::scrape_metrics(&target)
        .await
        .ok()
        .and_then(|m| flushes(&m));
    let t0 = std::time::Instant::now();
    let mut moments = [ProcAt::default(); 3];
    let server = f.server_pid.map(procstat::Pid::Of);
    let report = loadgen::fanout::run_fanout(waiters, pushers, &cfg, |m| {
        let i = match m {
            loadgen::fanout::Moment::Before => 0,
            loadgen::fanout::Moment::Held => 1,
            loadgen::fanout::Moment::Done => 2,
        };
        moments[i] = ProcAt {
            generator_rss_kib: procstat::read::rss_kib(procstat::Pid::Current)
                .ok()
                .flatten(),
            server_rss_kib: server.and_then(|p| procstat::read::rss_kib(p).ok().flatten()),
            server_cpu_ticks: server.and_then(|p| {
                procstat::read::process_stat(p)
                    .ok()
                    .flatten()
                    .map(|s| s.utime_ticks + s.stime_ticks)
            }),
            at_ms: t0.elapsed().as_millis() as u64,
        };
    })
    .await?;
    let flushes_after = loadgen::scrape_metrics(&target)
        .await
        .ok()
        .and_then(|m| flushes(&m));
    let held = report.waiters as u64 - report.refused.values().sum::<u64>();
    let per_1000 = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if held > 0 => Some((b as f64 - a as f64) / held as f64 * 1000.0),
        _ => None,
    };
    let cpu = match (moments[1].server_cpu_ticks, moments[2].server_cpu_ticks) {
        (Some(a), Some(b)) if held > 0 && moments[2].at_ms > moments[1].at_ms => {
            let secs = b.saturating_sub(a) as f64 / procstat::clock_ticks_per_second() as f64;
            let wall = (moments[2].at_ms - moments[1].at_ms) as f64 / 1000.0;
            Some(secs / wall * 100.0 / held as f64 * 1000.0)
        }
        _ => None,
    };
    let doc = FanoutDoc {
        target: target.base(),
        seed: f.conn.seed,
        report: &report,
        held,
        server_rss_kib_per_1000_held: per_1000(
            moments[0].server_rss_kib,
            moments[1].server_rss_kib,
        ),
        server_cpu_pct_per_1000_held: cpu,
        generator_rss_kib_per_1000_held: per_1000(
            moments[0].generator_rss_kib,
            moments[1].generator_rss_kib,
        ),
        journal_flushes_per_post: match (flushes_before, flushes_after) {
            (Some(a), Some(b)) if report.posts > 0 => Some((b - a) / report.posts as f64),
            _ => None,
        },
        moments,
    };
    if f.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    let r = &report;
    println!(
        "fanout against {}: {} waiting devices ({} held, refused: [{}]), {} pushing, {} posts in {:.2} s ({:.1} posts/s), seed {:#x}",
        target.base(),
        r.waiters,
        held,
        statuses(&r.refused),
        r.pushers,
        r.posts,
        r.post_phase_ms as f64 / 1000.0,
        r.posts_per_s,
        f.conn.seed
    );
    println!(
        "deliveries {} of {} expected  errors [{}]",
        r.deliveries,
        r.expected_deliveries,
        statuses(&r.errors)
    );
    print!(
        "{}",
        fmt_summary("fan-out", &HistSummary::of(&r.fanout, 1000))
    );
    print!("{}", fmt_summary("post", &HistSummary::of(&r.post, 1000)));
    let opt = |v: Option<f64>, unit: &str| v.map_or("n/a".to_owned(), |v| format!("{v:.1} {unit}"));
    println!(
        "per 1,000 held devices: server RSS {}, server CPU {}, generator RSS {}",
        opt(doc.server_rss_kib_per_1000_held.map(|k| k / 1024.0), "MiB"),
        opt(doc.server_cpu_pct_per_1000_held, "% of a CPU"),
        opt(
            doc.generator_rss_kib_per_1000_held.map(|k| k / 1024.0),
            "MiB"
        )
    );
    if let Some(j) = doc.journal_flushes_per_post {
        println!("journal flushes per post {j:.3}");
    }
    Ok(exit::OK)
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

fn statuses(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn fmt_summary(label: &str, s: &HistSummary) -> String {
    format!(
        "{label:<14} p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}  p99.9 {:>9.1}  max {:>9.1}  mean {:>9.1}  (µs, n={})\n",
        s.p50_us, s.p90_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.count
    )
}

/// The human summary of a route load.
pub fn human_route(r: &RouteLoadReport, target: &str, seed: u64, rss: Option<u64>) -> String {
    let mut out = String::new();
    let mode = match r.config.mode {
        Mode::Closed { in_flight } => format!("closed loop, {in_flight} in flight"),
        Mode::Open {
            rate_per_s,
            max_in_flight,
        } => format!("open loop, {rate_per_s} req/s (≤ {max_in_flight} in flight)"),
    };
    out += &format!(
        "route {} against {target}: {mode}, {} device(s), {:.2} s, seed {seed:#x}\n",
        r.route.name(),
        r.devices,
        r.wall_ns as f64 / 1e9
    );
    out += &format!(
        "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
        r.requests,
        r.throughput_per_s,
        r.stats.ok(),
        r.stats.errors(),
        statuses(&r.stats.status)
    );
    if let Some(c) = &r.stats.corrected {
        out += &fmt_summary("latency", &HistSummary::of(c, 1000));
        out += &fmt_summary("uncorrected", &HistSummary::of(&r.stats.latency, 1000));
        out += &format!("late starts    {}\n", r.late_starts);
    } else {
        out += &fmt_summary("latency", &HistSummary::of(&r.stats.latency, 1000));
    }
    out += &fmt_summary("signing", &r.signing_summary());
    let per_s: Vec<String> = r.stats.per_second.iter().map(u64::to_string).collect();
    out += &format!("per second     {}\n", per_s.join(" "));
    if let Some(kib) = rss {
        out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
    }
    out
}

#[derive(Serialize)]
struct TransferDoc<'a> {
    op: &'a str,
    target: &'a str,
    seed: u64,
    vault: String,
    device: usize,
    peak_rss_kib: Option<u64>,
    report: &'a TransferReport,
}

/// `load push|pull` within `--transfer-timeout`: past it, one line naming the flag.
async fn run_transfer(t: TransferArgs, push: bool) -> anyhow::Result<i32> {
    let limit = t.transfer_timeout;
    match tokio::time::timeout(limit, transfer(t, push)).await {
        Ok(r) => r,
        Err(_) => bail!(
            "the {} did not finish within {} (bound --transfer-timeout)",
            if push { "push" } else { "pull" },
            contract::quote::duration(limit)
        ),
    }
}

async fn transfer(t: TransferArgs, push: bool) -> anyhow::Result<i32> {
    if t.conn.protocol == COUCHDB {
        return run_couch_transfer(&t, push).await;
    }
    let target = target_of(&t.conn)?.with_feed_bounds(t.feed_bounds(loadgen::FeedBounds::DEFAULT));
    if push {
        match std::fs::metadata(&t.vault) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--vault {}: not a directory", t.vault.display()),
            Err(e) => bail!("--vault {}: {e}", t.vault.display()),
        }
        if t.in_flight == 0 {
            bail!("--in-flight 0: must be at least 1");
        }
        if t.checkpoint_every == 0 {
            bail!("--checkpoint-every 0: must be at least 1");
        }
    }
    let idx = t.device.unwrap_or(if push { 0 } else { 1 });
    if t.conn.protocol == WEBDAV {
        let client = dav_client(&target, &t.conn).await?;
        let report = if push {
            loadgen::protocols::webdav::push_vault(&client, &t.vault)
                .await
                .with_context(|| format!("pushing {}", t.vault.display()))?
        } else {
            std::fs::create_dir_all(&t.vault)
                .with_context(|| format!("--vault {}", t.vault.display()))?;
            let depth = if t.depth_infinity {
                loadgen::protocols::webdav::Depth::Infinity
            } else {
                loadgen::protocols::webdav::Depth::One
            };
            loadgen::protocols::webdav::pull_vault(&client, &t.vault, depth)
                .await
                .with_context(|| format!("pulling into {}", t.vault.display()))?
        };
        return print_transfer(&t, &target, push, idx, &report);
    }
    let devices = ensure_devices(&target, &t.conn, idx + 1).await?;
    let dev = &devices[idx];
    let report = if push {
        let opts = PushOpts {
            in_flight: t.in_flight,
            checkpoint_every: t.checkpoint_every,
        };
        push_vault(dev, &t.vault, &opts)
            .await
            .with_context(|| format!("pushing {}", t.vault.display()))?
    } else {
        pull_vault(dev, &t.vault, t.since)
            .await
            .with_context(|| format!("pulling into {}", t.vault.display()))?
    };
    print_transfer(&t, &target, push, idx, &report)
}

fn print_transfer(
    t: &TransferArgs,
    target: &Target,
    push: bool,
    idx: usize,
    report: &TransferReport,
) -> anyhow::Result<i32> {
    let op = if push { "push" } else { "pull" };
    let rss = peak_rss_kib();
    if t.json {
        let doc = TransferDoc {
            op,
            target: target.base(),
            seed: t.conn.seed,
            vault: t.vault.display().to_string(),
            device: idx,
            peak_rss_kib: rss,
            report,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", human_transfer(op, report, &t.vault, rss));
    }
    Ok(exit::OK)
}

/// The human summary of a push or pull.
pub fn human_transfer(op: &str, r: &TransferReport, vault: &Path, rss: Option<u64>) -> String {
    let mut out = format!(
        "{op} {}: {} files, {} folders, {:.1} MiB in {:.2} s ({:.1} files/s), {} requests, last seq {}\n",
        vault.display(),
        r.files,
        r.dirs,
        r.bytes as f64 / (1024.0 * 1024.0),
        r.wall_ns as f64 / 1e9,
        r.files_per_s(),
        r.requests,
        r.last_seq
    );
    // Chunks, the echo and signing are obsync-v1's; a WebDAV transfer has none of them.
    let signed = r.signing_summary().count > 0;
    if signed {
        out += &format!(
            "chunks transferred {}  already present {}  deleted {}  own echo {}\n",
            r.chunks_transferred, r.chunks_present, r.deleted, r.own_echo
        );
    }
    for (route, st) in &r.routes {
        out += &fmt_summary(route, &st.summary());
    }
    if signed {
        out += &fmt_summary("signing", &r.signing_summary());
    }
    for c in &r.checkpoints {
        out += &format!(
            "checkpoint {:>8} files at {:>8} ms: {:.1} files/s\n",
            c.files, c.elapsed_ms, c.files_per_s
        );
    }
    if let Some(kib) = rss {
        out += &format!("peak RSS {:.1} MiB\n", kib as f64 / 1024.0);
    }
    out
}

/// Peak resident set size of this process (VmHWM), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    procstat::read::peak_rss_kib(procstat::Pid::Current)
        .ok()
        .flatten()
}

//! `vaultbench probe fsync` (arguments and flow over `calibration::probe`) and `vaultbench
//! probe proxy` (the recording proxy's added latency, `loadgen::proxy::overhead`, against an
//! in-process reference server).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use calibration::MachineLock;
use calibration::probe::{ProbeConfig, SyncMode, run_fsync_probe};
use contract::exit;

/// Probe what this machine can do.
#[derive(Debug, Clone, Subcommand)]
pub enum ProbeCmd {
    /// Flushes per second at 1..N threads: does the device serialise flushes, does group commit pay?
    Fsync(FsyncArgs),
    /// What the recording proxy of client mode adds per request: the same request straight to
    /// a reference server and through the proxy, alternated in blocks, p50 and p99 of both.
    Proxy(ProxyArgs),
}

/// `probe proxy` arguments.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// Rounds counted, each a block straight and a block through the proxy (which first
    /// alternates); one more round before them is a warm-up.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub rounds: u64,
    /// Requests per block, each on the block's one keep-alive connection (default 2000); with
    /// --obsync, notes per block, five signed requests each (default 40).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub requests: Option<u64>,
    /// The path every request GETs from the reference server.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/livez",
        conflicts_with = "obsync"
    )]
    pub path: String,
    /// Send signed obsync v1 requests instead: an enrolled device pushes small notes (chunks
    /// exists, chunk upload, version post: the server fsyncs) and reads them back (a feed
    /// page, the chunk), added latency reported per request kind, pushes and reads apart.
    #[arg(long)]
    pub obsync: bool,
    /// With --obsync: the seed of the notes' bytes.
    #[arg(long, value_name = "SEED", default_value_t = 1, requires = "obsync")]
    pub seed: u64,
    /// Write one JSON document to stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fail (exit 5) instead of waiting when a recording holds the machine lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// `probe fsync` arguments.
#[derive(Debug, Clone, Args)]
pub struct FsyncArgs {
    /// Thread counts to run in turn.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub threads: Vec<usize>,
    /// How long each thread count runs: `3s`, `500ms`.
    #[arg(long, default_value = "3s", value_parser = contract::parse::duration)]
    pub duration: std::time::Duration,
    /// Deprecated: seconds per thread count (use --duration).
    #[arg(long, hide = true, conflicts_with = "duration")]
    pub seconds: Option<f64>,
    /// Directory on the filesystem to probe (default: the system temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Deprecated spelling of --work-dir.
    #[arg(
        long = "dir",
        hide = true,
        value_name = "DIR",
        conflicts_with = "work_dir"
    )]
    pub dir: Option<PathBuf>,
    /// Flush call.
    #[arg(long, value_enum, default_value_t = ModeArg::Fsync)]
    pub mode: ModeArg,
    /// All threads append to one shared file instead of one file each.
    #[arg(long)]
    pub shared_file: bool,
    /// Write one JSON document to stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fail (exit 5) instead of waiting when a recording holds the machine lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Fsync,
    Fdatasync,
}

/// `vaultbench probe ...`.
pub fn run(cmd: ProbeCmd) -> anyhow::Result<i32> {
    match cmd {
        ProbeCmd::Fsync(args) => probe_fsync(args),
        ProbeCmd::Proxy(args) => probe_proxy(args),
    }
}

/// `probe proxy --json`'s document.
#[derive(serde::Serialize)]
struct ProxyDoc<'a> {
    rounds: u64,
    requests: u64,
    path: &'a str,
    /// Requests the proxy relayed, the warm-up round's included.
    proxy_counted: u64,
    direct_p50_us: u64,
    direct_p99_us: u64,
    proxied_p50_us: u64,
    proxied_p99_us: u64,
    added_p50_us: i64,
    added_p99_us: i64,
}

/// Requests (notes, with `--obsync`) per block by default.
const DEFAULT_REQUESTS: u64 = 2000;
const DEFAULT_NOTES: u64 = 40;

fn probe_proxy(args: ProxyArgs) -> anyhow::Result<i32> {
    if args.obsync {
        return probe_proxy_obsync(args);
    }
    let requests = args.requests.unwrap_or(DEFAULT_REQUESTS);
    let path = &args.path;
    if !path.starts_with('/')
        || path
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        bail!("--path {path:?}: must start with / and hold no space or control character");
    }
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let data = tempfile::tempdir().context("creating the reference server's data dir")?;
    let server = refserver::TestServer::start(refserver::ServerConfig::new(data.path()))
        .context("starting the reference server")?;
    let o = loadgen::proxy::overhead::measure(
        server.addr,
        args.rounds as usize,
        requests as usize,
        path,
    );
    server.shutdown();
    let o = o?;
    let (d50, p50, a50) = o.at(0.5);
    let (d99, p99, a99) = o.at(0.99);
    if args.json {
        let doc = ProxyDoc {
            rounds: args.rounds,
            requests,
            path,
            proxy_counted: o.counted,
            direct_p50_us: d50,
            direct_p99_us: d99,
            proxied_p50_us: p50,
            proxied_p99_us: p99,
            added_p50_us: a50,
            added_p99_us: a99,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "probe proxy: {} rounds x {} requests of GET {path} each way, alternated (one warm-up round more; {} requests relayed by the proxy)",
            args.rounds, requests, o.counted
        );
        println!("{:>10} {:>10} {:>10}", "", "p50_us", "p99_us");
        println!("{:>10} {:>10} {:>10}", "direct", d50, d99);
        println!("{:>10} {:>10} {:>10}", "proxied", p50, p99);
        println!("{:>10} {:>10} {:>10}", "added", a50, a99);
    }
    Ok(exit::OK)
}

/// One line of `probe proxy --obsync`: a request kind, or the pushes or reads merged.
#[derive(serde::Serialize)]
struct KindDoc {
    requests: u64,
    direct_p50_us: u64,
    direct_p99_us: u64,
    proxied_p50_us: u64,
    proxied_p99_us: u64,
    added_p50_us: i64,
    added_p99_us: i64,
}

impl KindDoc {
    fn of(direct: &hdrhistogram::Histogram<u64>, proxied: &hdrhistogram::Histogram<u64>) -> Self {
        use loadgen::proxy::overhead::obsync::at;
        let ((d50, p50, a50), (d99, p99, a99)) =
            (at(direct, proxied, 0.5), at(direct, proxied, 0.99));
        KindDoc {
            requests: direct.len().min(proxied.len()),
            direct_p50_us: d50,
            direct_p99_us: d99,
            proxied_p50_us: p50,
            proxied_p99_us: p99,
            added_p50_us: a50,
            added_p99_us: a99,
        }
    }
}

/// `probe proxy --obsync --json`'s document.
#[derive(serde::Serialize)]
struct ObsyncDoc {
    rounds: u64,
    notes: u64,
    seed: u64,
    proxy_counted: u64,
    /// By the route's generator label (`put-chunk`), each arm's requests of it.
    kinds: std::collections::BTreeMap<&'static str, KindDoc>,
    pushes: KindDoc,
    reads: KindDoc,
}

fn probe_proxy_obsync(args: ProxyArgs) -> anyhow::Result<i32> {
    let notes = args.requests.unwrap_or(DEFAULT_NOTES);
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let data = tempfile::tempdir().context("creating the reference server's data dir")?;
    let server = refserver::TestServer::start(refserver::ServerConfig::new(data.path()))
        .context("starting the reference server")?;
    let run = || -> anyhow::Result<_> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        let rt = loadgen::runtime(1).context("starting the tokio runtime")?;
        let devices = rt
            .block_on(loadgen::enroll(&target, &server.setup_token, 1, args.seed))
            .context("enrolling a device on the reference server")?;
        loadgen::proxy::overhead::obsync::measure(
            &devices[0],
            args.rounds as usize,
            notes as usize,
            args.seed,
        )
    };
    let o = run();
    server.shutdown();
    let o = o?;
    let (pushes, reads) = (o.merged(true)?, o.merged(false)?);
    let doc = ObsyncDoc {
        rounds: args.rounds,
        notes,
        seed: args.seed,
        proxy_counted: o.counted,
        kinds: o
            .kinds
            .iter()
            .map(|k| (k.route, KindDoc::of(&k.direct, &k.proxied)))
            .collect(),
        pushes: KindDoc::of(&pushes.0, &pushes.1),
        reads: KindDoc::of(&reads.0, &reads.1),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    println!(
        "probe proxy --obsync: {} rounds x {notes} notes each way, alternated (one warm-up round more; {} requests relayed by the proxy)",
        args.rounds, o.counted
    );
    println!(
        "{:<16} {:>9} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}",
        "",
        "requests",
        "direct_p50",
        "proxy_p50",
        "direct_p99",
        "proxy_p99",
        "added_p50",
        "added_p99"
    );
    let row = |name: &str, k: &KindDoc| {
        println!(
            "{name:<16} {:>9} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}",
            k.requests,
            k.direct_p50_us,
            k.proxied_p50_us,
            k.direct_p99_us,
            k.proxied_p99_us,
            k.added_p50_us,
            k.added_p99_us
        );
    };
    for (route, k) in &doc.kinds {
        row(route, k);
    }
    row("pushes", &doc.pushes);
    row("reads", &doc.reads);
    println!("(µs; pushes: chunk upload and version post, which the server fsyncs)");
    Ok(exit::OK)
}

fn probe_fsync(args: FsyncArgs) -> anyhow::Result<i32> {
    let cfg = ProbeConfig {
        threads: args.threads.clone(),
        seconds: args.seconds.unwrap_or(args.duration.as_secs_f64()),
        dir: args
            .work_dir
            .clone()
            .or(args.dir.clone())
            .unwrap_or_else(std::env::temp_dir),
        mode: match args.mode {
            ModeArg::Fsync => SyncMode::Fsync,
            ModeArg::Fdatasync => SyncMode::Fdatasync,
        },
        shared_file: args.shared_file,
    };
    if args.seconds.is_none() && args.duration > std::time::Duration::from_secs(60) {
        bail!(
            "--duration {}: must be at most 1m",
            contract::parse::format_duration(args.duration)
        );
    }
    calibration::probe::validate(&cfg)?;
    // Check the dir before waiting for the lock: a typo should fail at once.
    match std::fs::metadata(&cfg.dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("probe dir {}: not a directory", cfg.dir.display()),
        Err(e) => bail!("probe dir {}: {e}", cfg.dir.display()),
    }
    let _lock = MachineLock::acquire(None, !args.no_wait)?;
    let report = run_fsync_probe(&cfg, |row| {
        eprintln!(
            "probe fsync: {} threads: {:.0} flushes/s",
            row.threads, row.flushes_per_s
        );
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for line in report.lines() {
            println!("{line}");
        }
    }
    Ok(exit::OK)
}

impl FsyncArgs {
    /// Notes for the deprecated spellings this command line used.
    pub fn deprecations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = self.seconds {
            out.push(format!(
                "note: --seconds is deprecated and will be removed in the next release: write --duration {}",
                contract::parse::format_duration(std::time::Duration::from_secs_f64(s.max(0.0)))
            ));
        }
        if self.dir.is_some() {
            out.push(crate::commands::renamed("--dir", "--work-dir"));
        }
        out
    }
}

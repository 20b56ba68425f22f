//! `vaultbench load`'s side of the protocol seam: what the command hands a protocol (where to
//! connect, the route load or transfer it asks for) and what it gets back (a report the one
//! output tail prints, whichever protocol made it). The command resolves the flags into these
//! and dispatches through the registry; each protocol's folder fills them in.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Context;
use loadgen::http::BasicAuth;
use loadgen::{FeedOverrides, HistSummary, Mode, RouteStats, Shard, Target, TransferReport};

/// Where `load` connects and as whom.
pub struct Conn<'a> {
    /// `--url` as given (a protocol may need more than the server's address, a database say).
    pub url: Option<&'a str>,
    /// `--allow-remote`: a target outside loopback.
    pub allow_remote: bool,
    /// `--nonce-seed`: the request nonces and generated bodies.
    pub seed: u64,
    /// `--state`: where enrolled devices are kept (protocols that enrol devices).
    pub state: Option<&'a Path>,
    /// `--setup-token-file` (protocols that enrol devices).
    pub setup_token_file: Option<&'a Path>,
    /// `--auth` or `--auth-file`: HTTP Basic credentials.
    pub auth: Option<&'a BasicAuth>,
    /// Checks, before any load request, that the target speaks the protocol asked for, and
    /// names the one it speaks when it does not (the command's, over the registry).
    pub check: &'a dyn Check,
}

/// The protocol check a [`Conn`] carries.
pub trait Check {
    /// Whether the target speaks the protocol asked for; the error names the one it speaks.
    fn check(&self) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + '_>>;
}

impl Conn<'_> {
    /// The target of `--url` (the server's address; loopback unless `--allow-remote`).
    pub fn target(&self) -> anyhow::Result<Target> {
        let url = self
            .url
            .context("--url is required (e.g. --url http://127.0.0.1:8080)")?;
        Ok(Target::parse(url, self.allow_remote)?)
    }
}

/// A route load as the flags ask it, the route's name already checked against the
/// protocol's list.
pub struct RouteJob<'a> {
    pub conn: &'a Conn<'a>,
    pub route: &'a str,
    pub mode: Mode,
    pub duration: Duration,
    pub max_requests: u64,
    /// `--devices`: enrolled devices the requests are spread over (protocols with devices).
    pub devices: usize,
    /// `--shard`: this generator's part of the devices.
    pub shard: Option<Shard>,
    /// `--folder`: the folder listing routes list.
    pub folder: &'a str,
}

/// What a whole-vault transfer does.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Push {
        in_flight: usize,
        checkpoint_every: usize,
        /// Make the server's vault equal the folder, deletes included (protocols whose
        /// transfer can; the caller refused the others).
        mirror: bool,
    },
    Pull {
        /// Start after this change-feed seq.
        since: u64,
        /// List the vault with one recursive listing instead of one per folder.
        depth_infinity: bool,
        /// Make the folder equal the server's vault, deletes included.
        mirror: bool,
    },
}

/// A push or pull as the flags ask it; for a push the vault is a directory, for a pull it may
/// not exist yet.
pub struct TransferJob<'a> {
    pub conn: &'a Conn<'a>,
    pub vault: &'a Path,
    /// Which enrolled device acts (protocols with devices).
    pub device: usize,
    pub op: Op,
    /// `--feed-max-*` over the protocol's feed bounds.
    pub feed: FeedOverrides,
}

/// A finished transfer: the target as printed, and what it measured.
pub struct Transferred {
    pub target: String,
    pub report: TransferReport,
}

/// The shared facts of a route load's report, whichever protocol made it.
pub struct Facts<'a> {
    pub route: &'static str,
    pub wall_ns: u64,
    pub requests: u64,
    pub throughput_per_s: f64,
    pub stats: &'a RouteStats,
}

/// A route load's report: the one output tail (`--hdr-log`, `--json`, the summary, the
/// refusal of a run where no request succeeded) reads it through this.
pub trait RouteReport {
    /// What every protocol's report has.
    fn facts(&self) -> Facts<'_>;
    /// The standard HdrHistogram interval log, tagged by route.
    fn write_hdr_log(&self, w: &mut Vec<u8>) -> io::Result<()>;
    /// The `--json` document: the run's facts, then the report under `report`.
    fn json(&self, head: &Head<'_>) -> serde_json::Result<String>;
    /// The human summary.
    fn human(&self, head: &Head<'_>) -> String;
}

/// What a route run's output names besides its report.
pub struct Head<'a> {
    /// The target as printed.
    pub target: &'a str,
    pub seed: u64,
    /// This process's peak RSS, in KiB.
    pub peak_rss_kib: Option<u64>,
}

/// The `--json` document of a route run, for any protocol's report.
#[derive(serde::Serialize)]
struct RouteDoc<'a, R> {
    target: &'a str,
    seed: u64,
    peak_rss_kib: Option<u64>,
    report: &'a R,
}

/// [`RouteReport::json`] for a report that serializes itself.
pub fn json_doc<R: serde::Serialize>(head: &Head<'_>, report: &R) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&RouteDoc {
        target: head.target,
        seed: head.seed,
        peak_rss_kib: head.peak_rss_kib,
        report,
    })
}

/// The failed requests per status, `status=count` apart.
pub fn statuses(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One latency line of a summary.
pub fn fmt_summary(label: &str, s: &HistSummary) -> String {
    format!(
        "{label:<14} p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}  p99.9 {:>9.1}  max {:>9.1}  mean {:>9.1}  (µs, n={})\n",
        s.p50_us, s.p90_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.count
    )
}

/// How requests were issued, as the summary's first line says it.
pub fn fmt_mode(mode: Mode) -> String {
    match mode {
        Mode::Closed { in_flight } => format!("closed loop, {in_flight} in flight"),
        Mode::Open {
            rate_per_s,
            max_in_flight,
        } => format!("open loop, {rate_per_s} req/s (≤ {max_in_flight} in flight)"),
    }
}

/// The summary lines after the first of a route load without signing: requests, latency,
/// peak RSS.
pub fn human_tail(report: &dyn RouteReport, head: &Head<'_>) -> String {
    let f = report.facts();
    let mut out = format!(
        "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
        f.requests,
        f.throughput_per_s,
        f.stats.ok(),
        f.stats.errors(),
        statuses(&f.stats.status)
    );
    out += &fmt_summary("latency", &f.stats.summary());
    if let Some(kib) = head.peak_rss_kib {
        out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
    }
    out
}

/// A finished route load: the target as its JSON document names it, and the report.
pub struct RouteRun {
    pub target: String,
    pub report: Box<dyn RouteReport>,
}

/// `load --locust-master`: the route load as a Locust worker of `master`.
pub struct LocustJob<'a> {
    pub conn: &'a Conn<'a>,
    pub master: &'a str,
    /// The route's name, already found in the spec's list.
    pub route: &'a str,
    /// `--devices`: the most users this worker runs (its range of the state file).
    pub devices: usize,
    pub shard: Option<Shard>,
    /// `--master-timeout`.
    pub master_timeout: Duration,
    pub hdr_log: Option<&'a Path>,
}

//! `load fanout`: many devices holding long polls while a few push, with the knobs and
//! defaults of the scenario step `long_poll_fanout`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use contract::exit;
use loadgen::HistSummary;
use scenarios::scenario::fanout_defaults as step;

use super::conn::{Checker, ConnArgs, note_renamed, parse_shard};
use crate::sample::fanout::{ProcAt, SideBySide};
use crate::sample::protocols::load::{fmt_summary, statuses};
use crate::sample::protocols::{self, Support};

/// `load fanout` flags: the scenario step `long_poll_fanout`'s knobs (`waiters`, `pushers`,
/// `posts`, `interval_ms`, `wait_s`, `settle_ms`) with its defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Devices holding long polls on the changes feed (the step's `waiters`).
    #[arg(help_heading = "Load", long, value_name = "N", default_value_t = step::WAITERS)]
    pub waiters: usize,
    /// Deprecated spelling of --waiters.
    #[arg(
        long = "devices",
        hide = true,
        value_name = "N",
        conflicts_with = "waiters"
    )]
    pub old_devices: Option<usize>,
    /// Devices pushing at the same time, each its own files (the step's `pushers`).
    #[arg(help_heading = "Load", long, value_name = "D", default_value_t = step::PUSHERS)]
    pub pushers: usize,
    /// Posts per pushing device (the step's `posts`).
    #[arg(help_heading = "Load", long, value_name = "M", default_value_t = step::POSTS)]
    pub posts: u32,
    /// Between one pusher's posts: 1s, 200ms (the step's `interval_ms`).
    #[arg(help_heading = "Load", long, default_value = "200ms", value_parser = contract::parse::duration)]
    pub interval: Duration,
    /// Each long poll's wait, at most 55s (the step's `wait_s`).
    #[arg(help_heading = "Load", long, default_value = "30s", value_parser = contract::parse::duration)]
    pub wait: Duration,
    /// After the waiters' first polls are out, before the first post (the step's
    /// `settle_ms`).
    #[arg(help_heading = "Load", long, default_value = "1s", value_parser = contract::parse::duration)]
    pub settle: Duration,
    /// The server's process id, to report its RSS and CPU per 1,000 held devices.
    #[arg(help_heading = "Output", long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Run as shard I of N (devices I*(N+D) .. of the state file; see `load --shard`).
    #[arg(help_heading = "Distributed", long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<loadgen::Shard>,
    /// Where the pushers' files are written (default: the system temp dir).
    #[arg(help_heading = "Load", long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

impl FanoutArgs {
    /// The deprecated spellings: a note each, then their values in the new fields.
    pub(super) fn take_deprecated(&mut self) {
        self.conn.take_deprecated();
        if let Some(n) = self.old_devices.take() {
            note_renamed("--devices", "--waiters");
            self.waiters = n;
        }
    }
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
    /// The reference server's journal flushes over the posts (its `/metrics`).
    journal_flushes_per_post: Option<f64>,
    /// The generator against the server: peak RSS per held device, CPU per delivery.
    side_by_side: SideBySide,
    generator_rss_kib_per_held: Option<f64>,
    server_rss_kib_per_held: Option<f64>,
    rss_ratio: Option<f64>,
    generator_cpu_us_per_delivery: Option<f64>,
    server_cpu_us_per_delivery: Option<f64>,
    cpu_ratio: Option<f64>,
    moments: [ProcAt; 3],
}

pub(super) async fn run_fanout(f: FanoutArgs) -> anyhow::Result<i32> {
    let imp = f.conn.protocol()?;
    if let Support::No(why) = imp.load_devices_support() {
        bail!(
            "load fanout holds enrolled devices, which only {} targets have; {} cannot: {why}",
            protocols::those_that(|p| p.load_devices_support()),
            imp.spec().name
        );
    }
    let target = f.conn.target()?;
    if f.waiters == 0 || f.pushers == 0 || f.posts == 0 {
        bail!("--waiters, --pushers and --posts must each be at least 1");
    }
    if f.wait.is_zero() || f.wait > Duration::from_secs(55) {
        bail!(
            "--wait {:?}: must be 1s to 55s (the protocol's bound)",
            f.wait
        );
    }
    let k = f.waiters + f.pushers;
    let check = Checker::of(imp, &f.conn)?;
    let conn = check.conn();
    let devices = imp.load_devices(&conn, k, f.shard).await?;
    let enrol_peak = SideBySide::enrolled();
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
        m.get(loadgen::fanout::JOURNAL_FLUSHES).copied()
    };
    let flushes_before = loadgen::scrape_metrics(&target)
        .await
        .ok()
        .and_then(|m| flushes(&m));
    let t0 = std::time::Instant::now();
    let mut moments = [ProcAt::default(); 3];
    let report = loadgen::fanout::run_fanout(waiters, pushers, &cfg, |m| {
        let i = match m {
            loadgen::fanout::Moment::Before => 0,
            loadgen::fanout::Moment::Held => 1,
            loadgen::fanout::Moment::Done => 2,
        };
        moments[i] = ProcAt::read(f.server_pid, t0);
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
    let sides = SideBySide::of(enrol_peak, &moments[1], &moments[2], f.server_pid, &report);
    let ((g_kib, s_kib), (g_cpu, s_cpu)) = (sides.kib_per_held(), sides.cpu_us_per_delivery());
    let (rss_ratio, cpu_ratio) = sides.ratios();
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
        side_by_side: sides,
        generator_rss_kib_per_held: g_kib,
        server_rss_kib_per_held: s_kib,
        rss_ratio,
        generator_cpu_us_per_delivery: g_cpu,
        server_cpu_us_per_delivery: s_cpu,
        cpu_ratio,
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
    println!("{}", sides.line());
    if let Some(j) = doc.journal_flushes_per_post {
        println!("journal flushes per post {j:.3}");
    }
    Ok(exit::OK)
}

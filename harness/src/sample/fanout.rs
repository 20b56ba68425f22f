//! The long-polling steps of a scenario: `long_poll_fanout` (many devices hold `GET
//! /v1/changes?wait=` while a few post notes) and `concurrent_push` (D devices push their own
//! part of the vault at once while others long-poll), both over `loadgen::fanout`. Each level
//! writes, under its scope (`fanout`, `push_d<D>`): the fan-out (how long after a post was
//! sent each waiting device had it), the posts' latency and throughput, the server's RSS and
//! CPU per 1,000 held devices, the generator's RSS per 1,000, refusals by the server's
//! connection cap (refusals, not errors) and the server's journal flushes per post.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::key::{PhaseKey, Scope, ServerKey};
use loadgen::fanout::{FanoutConfig, FanoutReport, Moment, run_fanout};
use reports::schema::Better;

use crate::sample::plan::Metrics;
use crate::sample::server_cost::Work;
use crate::sample::sync_client::{SyncClient, encode_histogram};
use crate::sample::target::Server;

/// One level of a long-polling step.
pub struct Level {
    /// The key scope: `fanout`, `push_d4`.
    pub scope: String,
    pub waiters: usize,
    pub pushers: usize,
    /// What the pushers post (generated notes, or one part of the vault each).
    pub cfg: FanoutConfig,
}

/// `/proc` figures of the server and of this process (the generator) at one moment of a
/// fan-out run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ProcAt {
    pub server_rss_kib: Option<u64>,
    pub server_cpu_ticks: Option<u64>,
    pub generator_rss_kib: Option<u64>,
    pub generator_cpu_ticks: Option<u64>,
    /// Milliseconds since the run's clock started.
    pub at_ms: u64,
}

impl ProcAt {
    /// Reads them now; `server` is `None` when the server is not a process here.
    pub fn read(server: Option<u32>, t0: Instant) -> ProcAt {
        let cpu = |pid| {
            procstat::read::process_stat(pid)
                .ok()
                .flatten()
                .map(|s| s.utime_ticks + s.stime_ticks)
        };
        let me = procstat::Pid::Current;
        let server = server.map(procstat::Pid::Of);
        ProcAt {
            server_rss_kib: server.and_then(|p| procstat::read::rss_kib(p).ok().flatten()),
            server_cpu_ticks: server.and_then(cpu),
            generator_rss_kib: procstat::read::rss_kib(me).ok().flatten(),
            generator_cpu_ticks: cpu(me),
            at_ms: t0.elapsed().as_millis() as u64,
        }
    }
}

/// The generator against the server over one fan-out run, as the run's own figures: peak
/// RSS per held device (the generator's while enrolling and while holding, apart) and CPU per
/// delivery, each side's and their ratio.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct SideBySide {
    pub held: u64,
    pub deliveries: u64,
    /// The generator's peak RSS up to the devices being ready (enrolment or loading).
    pub generator_enrol_peak_kib: Option<u64>,
    /// The generator's peak RSS from then to the run's end (the kernel's mark reset between).
    pub generator_hold_peak_kib: Option<u64>,
    /// The server process's peak RSS over its life so far.
    pub server_peak_kib: Option<u64>,
    /// CPU from every waiter holding to the deliveries being in, in ms.
    pub generator_cpu_ms: Option<f64>,
    pub server_cpu_ms: Option<f64>,
}

impl SideBySide {
    /// Marks the end of enrolment: reads the generator's peak so far and resets the mark, so
    /// the next peak is the holding one's.
    pub fn enrolled() -> Option<u64> {
        let peak = procstat::read::peak_rss_kib(procstat::Pid::Current)
            .ok()
            .flatten();
        procstat::read::reset_peak_rss();
        peak
    }

    /// The figures from the enrolment peak, the moments `Held` and `Done` and the report.
    pub fn of(
        enrol_peak_kib: Option<u64>,
        held_at: &ProcAt,
        done_at: &ProcAt,
        server: Option<u32>,
        r: &FanoutReport,
    ) -> SideBySide {
        let ms = |a: Option<u64>, b: Option<u64>| {
            let (a, b) = (a?, b?);
            Some(b.saturating_sub(a) as f64 * 1000.0 / procstat::clock_ticks_per_second() as f64)
        };
        SideBySide {
            held: held(r),
            deliveries: r.deliveries,
            generator_enrol_peak_kib: enrol_peak_kib,
            generator_hold_peak_kib: procstat::read::peak_rss_kib(procstat::Pid::Current)
                .ok()
                .flatten(),
            server_peak_kib: server.and_then(|p| {
                procstat::read::peak_rss_kib(procstat::Pid::Of(p))
                    .ok()
                    .flatten()
            }),
            generator_cpu_ms: ms(held_at.generator_cpu_ticks, done_at.generator_cpu_ticks),
            server_cpu_ms: ms(held_at.server_cpu_ticks, done_at.server_cpu_ticks),
        }
    }

    /// The generator's peak over the whole command (enrolment or holding).
    pub fn generator_peak_kib(&self) -> Option<u64> {
        match (self.generator_enrol_peak_kib, self.generator_hold_peak_kib) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    fn per_held(&self, kib: Option<u64>) -> Option<f64> {
        (self.held > 0).then_some(())?;
        Some(round3(kib? as f64 / self.held as f64))
    }

    fn per_delivery_us(&self, ms: Option<f64>) -> Option<f64> {
        (self.deliveries > 0).then_some(())?;
        Some(round3(ms? * 1000.0 / self.deliveries as f64))
    }

    /// Peak RSS per held device, in KiB: the generator's and the server's.
    pub fn kib_per_held(&self) -> (Option<f64>, Option<f64>) {
        (
            self.per_held(self.generator_peak_kib()),
            self.per_held(self.server_peak_kib),
        )
    }

    /// CPU per delivery, in µs: the generator's and the server's.
    pub fn cpu_us_per_delivery(&self) -> (Option<f64>, Option<f64>) {
        (
            self.per_delivery_us(self.generator_cpu_ms),
            self.per_delivery_us(self.server_cpu_ms),
        )
    }

    /// Generator over server: (RSS per held device, CPU per delivery).
    pub fn ratios(&self) -> (Option<f64>, Option<f64>) {
        let ratio = |(g, s): (Option<f64>, Option<f64>)| {
            let (g, s) = (g?, s?);
            (s > 0.0).then(|| round3(g / s))
        };
        (
            ratio(self.kib_per_held()),
            ratio(self.cpu_us_per_delivery()),
        )
    }

    /// One line: per held device, then per delivery, each side and the ratio.
    pub fn line(&self) -> String {
        let f =
            |v: Option<f64>, unit: &str| v.map_or("n/a".to_owned(), |v| format!("{v:.1} {unit}"));
        let mib = |k: Option<u64>| f(k.map(|k| k as f64 / 1024.0), "MiB");
        let (g, s) = self.kib_per_held();
        let (gc, sc) = self.cpu_us_per_delivery();
        let (rr, cr) = self.ratios();
        let r = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.2}"));
        format!(
            "per held device: generator {} (peak {} enrolling, {} holding), server {} (peak {}), generator/server {}; per delivery: generator CPU {}, server CPU {}, generator/server {}",
            f(g, "KiB"),
            mib(self.generator_enrol_peak_kib),
            mib(self.generator_hold_peak_kib),
            f(s, "KiB"),
            mib(self.server_peak_kib),
            r(rr),
            f(gc, "µs"),
            f(sc, "µs"),
            r(cr),
        )
    }
}

/// Runs one level against `server`: pairs the devices it needs (before any window), runs the
/// waiters and pushers, calls `begin` when every waiter holds its poll (the server-cost
/// window opens there), writes the level's keys into `m` and returns its work (posts, for
/// the cost per post). A failed post or poll, or a post some holding device never got, fails
/// the sample; a waiter the server refused is counted.
pub async fn run_level<C: SyncClient>(
    client: &mut C,
    server: &Server,
    level: Level,
    scrapes: bool,
    m: &mut Metrics,
    begin: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Work> {
    let scope = level.scope.as_str();
    procstat::read::reset_peak_rss();
    let devices = client
        .long_poll_devices(level.waiters + level.pushers)
        .await
        .with_context(|| format!("{scope}: enrolling its devices"))?;
    let enrol_peak = SideBySide::enrolled();
    let (pushers, waiters) = devices.split_at(level.pushers);
    let target = loadgen::Target::parse(&server.url(), false)?;
    let before = if scrapes {
        Some(
            loadgen::scrape_metrics(&target)
                .await
                .with_context(|| format!("{scope}: reading the server's /metrics"))?,
        )
    } else {
        None
    };
    let mut at = [ProcAt::default(); 3];
    let t0 = Instant::now();
    let mut began: anyhow::Result<()> = Ok(());
    let report = run_fanout(waiters, pushers, &level.cfg, |moment| {
        let i = match moment {
            Moment::Before => 0,
            Moment::Held => 1,
            Moment::Done => 2,
        };
        at[i] = ProcAt::read(Some(server.pid), t0);
        if moment == Moment::Held {
            began = begin();
        }
    })
    .await
    .with_context(|| format!("{scope}: the long-polling run"))?;
    began?;
    let after = match before {
        Some(_) => Some(scrape_when_admitted(&target, level.cfg.wait).await?),
        None => None,
    };
    let sides = SideBySide::of(enrol_peak, &at[1], &at[2], Some(server.pid), &report);
    write_keys(
        scope,
        &report,
        &at,
        &sides,
        before.as_ref().zip(after.as_ref()),
        m,
    );
    check(scope, &report)?;
    Ok(Work {
        requests: 0,
        files: Some(report.posts),
        timed: false,
    })
}

/// After a level its aborted waiters may still hold the server's connection slots until it
/// notices they closed (at worst when their wait runs out): the scrape is retried until the
/// server admits it, for the wait and 5 s more.
async fn scrape_when_admitted(
    target: &loadgen::Target,
    wait: Duration,
) -> anyhow::Result<BTreeMap<String, f64>> {
    let until = Instant::now() + wait + Duration::from_secs(5);
    loop {
        match loadgen::scrape_metrics(target).await {
            Ok(m) => return Ok(m),
            Err(e) if Instant::now() >= until => {
                return Err(e).context("reading the server's /metrics after a long-polling step");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A level that lost a post or a delivery is not a measurement: fail the sample.
fn check(scope: &str, r: &FanoutReport) -> anyhow::Result<()> {
    if !r.errors.is_empty() {
        let what: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v} x {k}")).collect();
        bail!(
            "{scope}: {} failed request(s) after the waiters held ({})",
            r.errors.values().sum::<u64>(),
            what.join(", ")
        );
    }
    let held = held(r);
    if held == 0 && r.waiters > 0 {
        bail!(
            "{scope}: the server refused every one of the {} waiting devices",
            r.waiters
        );
    }
    if r.deliveries < r.expected_deliveries {
        bail!(
            "{scope}: {} of {} deliveries (posts x holding devices) arrived within the wait",
            r.deliveries,
            r.expected_deliveries
        );
    }
    Ok(())
}

fn held(r: &FanoutReport) -> u64 {
    (r.waiters as u64).saturating_sub(r.refused.values().sum::<u64>())
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// The server's `/metrics` counters, by name with labels.
type Counters = BTreeMap<String, f64>;

/// The level's keys (pure: tested on a made-up report).
fn write_keys(
    scope: &str,
    r: &FanoutReport,
    at: &[ProcAt; 3],
    sides: &SideBySide,
    counters: Option<(&Counters, &Counters)>,
    m: &mut Metrics,
) {
    let key = |stat: &str| PhaseKey::new(scope, stat);
    let server = |stat: &str| ServerKey::new(Scope::phase(scope), stat);
    let held = held(r);
    m.exact(key("waiters"), r.waiters as f64, "count");
    m.exact(key("pushers"), r.pushers as f64, "count");
    m.exact(key("posts"), r.posts as f64, "count");
    // How many a connection cap refused depends on the open-file limit and on which
    // connections came first: a resource figure, never an error.
    m.resource(key("held"), held as f64, "count");
    m.resource(
        key("refused"),
        r.refused.values().sum::<u64>() as f64,
        "count",
    );
    m.resource(key("deliveries"), r.deliveries as f64, "count");
    let ms = |h: &hdrhistogram::Histogram<u64>, q: f64| round3(h.value_at_quantile(q) as f64 / 1e3);
    if !r.fanout.is_empty() {
        m.timing(
            key("fanout_p50_ms"),
            ms(&r.fanout, 0.50),
            "ms",
            Better::Lower,
        );
        m.timing(
            key("fanout_p99_ms"),
            ms(&r.fanout, 0.99),
            "ms",
            Better::Lower,
        );
        if let Some(h) = encode_histogram(&r.fanout) {
            m.histograms.insert(format!("{scope}.fanout"), h);
        }
    }
    if !r.post.is_empty() {
        m.timing(key("post_p50_ms"), ms(&r.post, 0.50), "ms", Better::Lower);
        m.timing(key("post_p99_ms"), ms(&r.post, 0.99), "ms", Better::Lower);
    }
    m.timing(
        key("posts_per_s"),
        round3(r.posts_per_s),
        "posts/s",
        Better::Higher,
    );
    let per_1000 = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if held > 0 => {
            Some(round3((b as f64 - a as f64) / held as f64 * 1000.0))
        }
        _ => None,
    };
    if let Some(v) = per_1000(at[0].server_rss_kib, at[1].server_rss_kib) {
        m.resource(server("rss_kib_per_1000_held"), v, "KiB");
    }
    if let Some(v) = per_1000(at[0].generator_rss_kib, at[1].generator_rss_kib) {
        m.resource(key("generator.rss_kib_per_1000_held"), v, "KiB");
    }
    // Side by side: each one's peak RSS per held device and CPU per delivery, and the
    // generator's over the server's.
    let (g, s) = sides.kib_per_held();
    let (gc, sc) = sides.cpu_us_per_delivery();
    let (rr, cr) = sides.ratios();
    let side_keys: [(String, Option<f64>, &str); 6] = [
        (key("generator.peak_rss_kib_per_held").into(), g, "KiB"),
        (server("peak_rss_kib_per_held").into(), s, "KiB"),
        (key("generator.rss_ratio").into(), rr, "ratio"),
        (key("generator.cpu_us_per_delivery").into(), gc, "µs"),
        (server("cpu_us_per_delivery").into(), sc, "µs"),
        (key("generator.cpu_ratio").into(), cr, "ratio"),
    ];
    for (k, v, unit) in side_keys {
        if let Some(v) = v {
            m.resource(k, v, unit);
        }
    }
    // The server's CPU from every waiter holding to the deliveries being in: the posts and
    // every re-poll they caused, in % of one CPU per 1,000 held devices.
    if let (Some(a), Some(b)) = (at[1].server_cpu_ticks, at[2].server_cpu_ticks) {
        let wall = at[2].at_ms.saturating_sub(at[1].at_ms) as f64 / 1000.0;
        if held > 0 && wall > 0.0 {
            let cpu = b.saturating_sub(a) as f64 / procstat::clock_ticks_per_second() as f64;
            m.resource(
                server("cpu_pct_per_1000_held"),
                round3(cpu / wall * 100.0 / held as f64 * 1000.0),
                "%",
            );
        }
    }
    if let Some((before, after)) = counters
        && r.posts > 0
    {
        let delta = |name: &str| {
            after
                .get(name)
                .map(|a| a - before.get(name).copied().unwrap_or(0.0))
        };
        let (flushes, records) = (
            delta(loadgen::fanout::JOURNAL_FLUSHES),
            delta(loadgen::fanout::JOURNAL_RECORDS),
        );
        let posts = r.posts as f64;
        if let Some(rec) = records {
            // One journal record per accepted version, whatever the timing.
            m.exact(
                server("journal_records_per_post"),
                round6(rec / posts),
                "records/post",
            );
        }
        if let Some(f) = flushes {
            // A build that flushes every record on its own is deterministic here: exact. One
            // that shared a flush among concurrent records (group commit) shared as many as
            // the timing allowed: a resource figure.
            let per_post = round6(f / posts);
            if records == Some(f) {
                m.exact(server("journal_flushes_per_post"), per_post, "flushes/post");
            } else {
                m.resource(server("journal_flushes_per_post"), per_post, "flushes/post");
            }
        }
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The parts of a `concurrent_push` level: file `i` of the vault's first `files` (sorted)
/// goes to pusher `i mod d`, copied under `root/part-<p>/push-d<d>/` with a line naming the
/// level appended, so no level reuses an earlier level's chunks and every level's paths are
/// new versions.
pub fn split_vault(
    vault: &Path,
    files: Option<usize>,
    d: usize,
    root: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut all = vault_files(vault)?;
    if let Some(n) = files {
        all.truncate(n);
    }
    if all.is_empty() {
        bail!("concurrent_push: the vault has no file to push");
    }
    let parts: Vec<PathBuf> = (0..d).map(|p| root.join(format!("part-{p}"))).collect();
    for (i, rel) in all.iter().enumerate() {
        let to = parts[i % d].join(format!("push-d{d}")).join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut bytes =
            std::fs::read(vault.join(rel)).with_context(|| format!("reading vault file {rel}"))?;
        bytes.extend_from_slice(format!("\nvaultbench concurrent_push d={d}\n").as_bytes());
        std::fs::write(&to, bytes).with_context(|| format!("writing {}", to.display()))?;
    }
    for p in &parts {
        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    Ok(parts)
}

/// The vault's files as sorted relative paths, dot-folders skipped (as the push skips them).
fn vault_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let p = e.path();
            let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
            if rel.split('/').any(|s| s.starts_with('.')) {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(refused: u64, posts: u64, deliveries: u64) -> FanoutReport {
        let mut fanout = loadgen::latency_histogram();
        for us in [1_000u64, 2_000, 3_000, 40_000] {
            fanout.record(us).unwrap();
        }
        FanoutReport {
            waiters: 10,
            pushers: 2,
            posts,
            refused: [("refused:io".to_owned(), refused)]
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .collect(),
            deliveries,
            expected_deliveries: posts * (10 - refused),
            errors: BTreeMap::new(),
            post: fanout.clone(),
            fanout,
            posts_per_s: 12.5,
            post_phase_ms: 800,
        }
    }

    #[test]
    fn refusals_are_counted_and_a_lost_delivery_fails() {
        let r = report(3, 4, 28);
        assert!(check("fanout", &r).is_ok());
        let mut m = Metrics::default();
        write_keys(
            "fanout",
            &r,
            &[ProcAt::default(); 3],
            &SideBySide::default(),
            None,
            &mut m,
        );
        assert_eq!(m.map["fanout.held"].value, 7.0);
        assert_eq!(m.map["fanout.refused"].value, 3.0);
        assert_eq!(m.map["fanout.posts"].value, 4.0);
        assert_eq!(m.map["fanout.fanout_p50_ms"].value, 2.0);
        assert!(m.map["fanout.fanout_p99_ms"].value >= 39.9);
        assert!(m.histograms.contains_key("fanout.fanout"));
        let e = check("fanout", &report(3, 4, 27)).unwrap_err().to_string();
        assert!(e.contains("27 of 28"), "{e}");
        let mut r = report(0, 4, 40);
        r.errors.insert("post: 500 internal".into(), 1);
        let e = check("push_d4", &r).unwrap_err().to_string();
        assert!(
            e.starts_with("push_d4: 1 failed") && e.contains("500"),
            "{e}"
        );
        let e = check("fanout", &report(10, 4, 0)).unwrap_err().to_string();
        assert!(e.contains("refused every one"), "{e}");
        // A concurrent push without waiters (its default) has nothing to deliver.
        let mut r = report(0, 4, 0);
        (r.waiters, r.expected_deliveries) = (0, 0);
        assert!(check("push_d4", &r).is_ok());
    }

    #[test]
    fn journal_flushes_are_exact_only_when_no_flush_was_shared() {
        let counters = |flushes: f64, records: f64| {
            let before: BTreeMap<String, f64> = [
                (loadgen::fanout::JOURNAL_FLUSHES.to_owned(), 5.0),
                (loadgen::fanout::JOURNAL_RECORDS.to_owned(), 5.0),
            ]
            .into_iter()
            .collect();
            let after: BTreeMap<String, f64> = [
                (loadgen::fanout::JOURNAL_FLUSHES.to_owned(), 5.0 + flushes),
                (loadgen::fanout::JOURNAL_RECORDS.to_owned(), 5.0 + records),
            ]
            .into_iter()
            .collect();
            (before, after)
        };
        let r = report(0, 4, 40);
        let (b, a) = counters(4.0, 4.0);
        let mut m = Metrics::default();
        write_keys(
            "push_d1",
            &r,
            &[ProcAt::default(); 3],
            &SideBySide::default(),
            Some((&b, &a)),
            &mut m,
        );
        let k = &m.map["push_d1.server.journal_flushes_per_post"];
        assert_eq!(
            (k.value, k.class),
            (1.0, reports::schema::MetricClass::Exact)
        );
        let (b, a) = counters(3.0, 4.0);
        let mut m = Metrics::default();
        write_keys(
            "push_d4",
            &r,
            &[ProcAt::default(); 3],
            &SideBySide::default(),
            Some((&b, &a)),
            &mut m,
        );
        let k = &m.map["push_d4.server.journal_flushes_per_post"];
        assert_eq!(
            (k.value, k.class),
            (0.75, reports::schema::MetricClass::Resource)
        );
        assert_eq!(
            m.map["push_d4.server.journal_records_per_post"].class,
            reports::schema::MetricClass::Exact
        );
        // Every key parses back through the key grammar.
        for key in m.map.keys() {
            let parsed: contract::key::MetricKey = key.parse().unwrap();
            assert_eq!(&parsed.to_string(), key);
        }
    }

    #[test]
    fn the_side_by_side_figures_are_per_held_device_and_per_delivery() {
        let sides = SideBySide {
            held: 1000,
            deliveries: 5000,
            generator_enrol_peak_kib: Some(40_000),
            generator_hold_peak_kib: Some(30_000),
            server_peak_kib: Some(80_000),
            generator_cpu_ms: Some(500.0),
            server_cpu_ms: Some(2000.0),
        };
        // The generator's peak is the larger of enrolling and holding.
        assert_eq!(sides.kib_per_held(), (Some(40.0), Some(80.0)));
        assert_eq!(sides.cpu_us_per_delivery(), (Some(100.0), Some(400.0)));
        assert_eq!(sides.ratios(), (Some(0.5), Some(0.25)));
        let line = sides.line();
        assert!(
            line.contains("generator 40.0 KiB (peak 39.1 MiB enrolling, 29.3 MiB holding)"),
            "{line}"
        );
        assert!(
            line.contains("generator/server 0.50") && line.contains("generator/server 0.25"),
            "{line}"
        );
        let mut m = Metrics::default();
        let r = report(0, 4, 40);
        write_keys("fanout", &r, &[ProcAt::default(); 3], &sides, None, &mut m);
        assert_eq!(m.map["fanout.generator.rss_ratio"].value, 0.5);
        assert_eq!(m.map["fanout.generator.peak_rss_kib_per_held"].value, 40.0);
        assert_eq!(m.map["fanout.server.peak_rss_kib_per_held"].value, 80.0);
        assert_eq!(m.map["fanout.server.cpu_us_per_delivery"].value, 400.0);
        for key in m.map.keys() {
            let parsed: contract::key::MetricKey = key.parse().unwrap();
            assert_eq!(&parsed.to_string(), key);
        }
        // Nothing held or delivered: no figure, not a division by zero.
        let none = SideBySide {
            held: 0,
            deliveries: 0,
            ..sides
        };
        assert_eq!(none.kib_per_held(), (None, None));
        assert_eq!(none.ratios(), (None, None));
    }

    #[test]
    fn a_vault_splits_into_disjoint_tagged_parts() {
        let v = tempfile::tempdir().unwrap();
        for (p, body) in [
            ("a/1.md", "x"),
            ("a/2.md", "y"),
            ("b.md", "z"),
            (".obsidian/c", "c"),
        ] {
            let f = v.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, body).unwrap();
        }
        let out = tempfile::tempdir().unwrap();
        let parts = split_vault(v.path(), None, 2, out.path()).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            vault_files(&parts[0]).unwrap(),
            ["push-d2/a/1.md", "push-d2/b.md"]
        );
        assert_eq!(vault_files(&parts[1]).unwrap(), ["push-d2/a/2.md"]);
        let body = std::fs::read_to_string(parts[1].join("push-d2/a/2.md")).unwrap();
        assert_eq!(body, "y\nvaultbench concurrent_push d=2\n");
        // More pushers than files: the extra parts are empty, not missing.
        let parts = split_vault(v.path(), Some(1), 3, &out.path().join("x")).unwrap();
        assert_eq!(vault_files(&parts[2]).unwrap(), Vec::<String>::new());
    }
}

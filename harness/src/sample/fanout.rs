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

/// `/proc` figures at one moment of a level.
#[derive(Debug, Clone, Copy, Default)]
struct ProcAt {
    server_rss_kib: Option<u64>,
    server_cpu_ticks: Option<u64>,
    generator_rss_kib: Option<u64>,
    at: Option<Instant>,
}

impl ProcAt {
    fn read(server: u32) -> ProcAt {
        let pid = procstat::Pid::Of(server);
        ProcAt {
            server_rss_kib: procstat::read::rss_kib(pid).ok().flatten(),
            server_cpu_ticks: procstat::read::process_stat(pid)
                .ok()
                .flatten()
                .map(|s| s.utime_ticks + s.stime_ticks),
            generator_rss_kib: procstat::read::rss_kib(procstat::Pid::Current)
                .ok()
                .flatten(),
            at: Some(Instant::now()),
        }
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
    let devices = client
        .long_poll_devices(level.waiters + level.pushers)
        .await
        .with_context(|| format!("{scope}: enrolling its devices"))?;
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
    let mut began: anyhow::Result<()> = Ok(());
    let report = run_fanout(waiters, pushers, &level.cfg, |moment| {
        let i = match moment {
            Moment::Before => 0,
            Moment::Held => 1,
            Moment::Done => 2,
        };
        at[i] = ProcAt::read(server.pid);
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
    write_keys(scope, &report, &at, before.as_ref().zip(after.as_ref()), m);
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
    // The server's CPU from every waiter holding to the deliveries being in: the posts and
    // every re-poll they caused, in % of one CPU per 1,000 held devices.
    if let (Some(a), Some(b), Some(t1), Some(t2)) = (
        at[1].server_cpu_ticks,
        at[2].server_cpu_ticks,
        at[1].at,
        at[2].at,
    ) {
        let wall = t2.saturating_duration_since(t1).as_secs_f64();
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
        write_keys("fanout", &r, &[ProcAt::default(); 3], None, &mut m);
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

//! The server's cost at every checkpoint of a cold push, for any protocol: a sampler thread
//! reads the server tree's CPU (every thread's `schedstat`), its RSS and the log counters every
//! [`PERIOD`] while the push runs; the push's checkpoints (files done, ms since it began) then
//! cut the readings into windows, each reading at a checkpoint interpolated between the two
//! samples around it. Per window: files/s, server CPU per file, server RSS and each log count
//! per file, as `PHASE.checkpoint.NNNNNNN.*` keys; over the windows, each per-file series'
//! growth in n (`reports::growth`) as `PHASE.growth.SERIES.import_exponent`.
//!
//! Sampling from outside needs no hook in any protocol's push loop: a protocol only has to
//! report its checkpoints.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use contract::key::PhaseKey;
use loadgen::TransferReport;
use reports::schema::Better;

use crate::sample::logtap::{Reading, Tap};
use crate::sample::plan::Metrics;

/// How often the sampler reads. A checkpoint's reading is interpolated between two samples,
/// so its error is at most the cost of one period; at 10 ms that is under 1 % of a window of
/// a second or more (200 files at 5 ms each).
pub const PERIOD: Duration = Duration::from_millis(10);
/// How often the server's process group is listed again (listing scans all of `/proc`).
const RELIST: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
struct Point {
    at: Duration,
    cpu_ns: u64,
    rss_kib: u64,
    log: Reading,
}

/// A running sampler of the server whose process group is `pgid`.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Point>>>,
}

impl Sampler {
    /// Starts sampling now; readings are timed from this moment (the push's start).
    pub fn start(pgid: u32, tap: Arc<Tap>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("vb-growth".into())
            .spawn(move || sample(pgid, &tap, &s))
            .ok();
        Sampler { stop, handle }
    }

    /// Stops the sampler, reads the windows at `r`'s checkpoints and writes their keys and the
    /// growth fits under `phase`. Returns the one-line findings.
    pub fn finish(mut self, phase: &str, r: &TransferReport, m: &mut Metrics) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let points = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        write_keys(phase, &points, r, m)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn sample(pgid: u32, tap: &Tap, stop: &AtomicBool) -> Vec<Point> {
    let t0 = Instant::now();
    let mut pids: Vec<u32> = Vec::new();
    let mut listed: Option<Instant> = None;
    let mut out = Vec::new();
    let mut high = 0u64;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if listed.is_none_or(|t| t.elapsed() >= RELIST) {
            pids = procstat::read::group_pids(pgid).unwrap_or_default();
            listed = Some(Instant::now());
        }
        let at = t0.elapsed();
        let mut cpu = 0u64;
        let mut rss = 0u64;
        for &p in &pids {
            let pid = procstat::Pid::Of(p);
            cpu = cpu.saturating_add(procstat::read::threads_cpu_ns(pid).unwrap_or(0));
            rss += procstat::read::rss_kib(pid).ok().flatten().unwrap_or(0);
        }
        // A thread that exited takes its CPU with it; the running total never goes back.
        high = high.max(cpu);
        out.push(Point {
            at,
            cpu_ns: high,
            rss_kib: rss,
            log: tap.read(),
        });
        if stopping {
            return out;
        }
        std::thread::sleep(PERIOD);
    }
}

/// Log totals by counter name.
type Logs = Vec<(String, f64)>;

/// The cumulative figures at `at` (CPU ns, RSS KiB, log totals), interpolated between the
/// samples around it.
fn at(points: &[Point], at: Duration) -> Option<(f64, f64, Logs)> {
    let i = points.partition_point(|p| p.at < at);
    let b = points.get(i).or(points.last())?;
    let a = if i == 0 { b } else { &points[i - 1] };
    let span = b.at.saturating_sub(a.at).as_secs_f64();
    let f = if span > 0.0 {
        (at.saturating_sub(a.at).as_secs_f64() / span).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let lerp = |x: f64, y: f64| x + (y - x) * f;
    let logs = b
        .log
        .totals
        .iter()
        .map(|(n, vb)| {
            let va = a
                .log
                .totals
                .iter()
                .find(|(m, _)| m == n)
                .map_or(*vb, |(_, v)| *v);
            (n.clone(), lerp(va, *vb))
        })
        .collect();
    Some((
        lerp(a.cpu_ns as f64, b.cpu_ns as f64),
        b.rss_kib as f64,
        logs,
    ))
}

fn write_keys(phase: &str, points: &[Point], r: &TransferReport, m: &mut Metrics) -> Vec<String> {
    if r.checkpoints.len() < 2 || points.is_empty() {
        return Vec::new();
    }
    let key = |cp: u64, stat: &str| PhaseKey::new(phase, &format!("checkpoint.{cp:07}.{stat}"));
    // (files, cpu ns, log totals) at the start and at every checkpoint.
    let mut cum: Vec<(u64, f64, Logs)> = Vec::new();
    if let Some((cpu, _, logs)) = at(points, Duration::ZERO) {
        cum.push((0, cpu, logs));
    }
    for cp in &r.checkpoints {
        let Some((cpu, rss, logs)) = at(points, Duration::from_millis(cp.elapsed_ms)) else {
            continue;
        };
        m.timing(
            key(cp.files, "files_per_s"),
            cp.files_per_s,
            "files/s",
            Better::Higher,
        );
        m.resource(key(cp.files, "server_rss_kib"), rss, "KiB");
        if let Some((f0, c0, l0)) = cum.last() {
            let n = (cp.files - f0) as f64;
            if n > 0.0 {
                m.resource(
                    key(cp.files, "server_cpu_us_per_file"),
                    round3((cpu - c0) / 1e3 / n),
                    "us/file",
                );
                for (name, v) in &logs {
                    let before = l0.iter().find(|(k, _)| k == name).map_or(0.0, |(_, b)| *b);
                    m.cost(
                        key(cp.files, &format!("log.{name}_per_file")),
                        round3((v - before) / n),
                        "lines/file",
                    );
                }
            }
        }
        cum.push((cp.files, cpu, logs));
    }
    fit(phase, m)
}

/// Fits each per-file series of `phase` among `m`'s checkpoint keys and writes its exponent
/// as `PHASE.growth.SERIES.import_exponent`; returns the one-line findings.
pub fn fit(phase: &str, m: &mut Metrics) -> Vec<String> {
    let keys: Vec<(String, f64)> = m.map.iter().map(|(k, v)| (k.clone(), v.value)).collect();
    let mut found = Vec::new();
    for f in reports::growth::findings(phase, keys.iter().map(|(k, v)| (k.as_str(), *v))) {
        if let Some(g) = &f.growth {
            m.cost(
                PhaseKey::new(phase, &format!("growth.{}.import_exponent", f.series)),
                round3(g.import_exponent()),
                "exponent",
            );
        }
        found.push(f.line);
    }
    found
}

fn round3(v: f64) -> f64 {
    (v * 1e3).round() / 1e3
}

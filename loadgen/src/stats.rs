//! What a run measured: per-route counts and HdrHistograms, signing time, throughput per
//! interval, and the HdrHistogram interval log (write, read, merge).
//!
//! Latencies are recorded in microseconds with 3 significant digits up to one hour (the
//! generator's specification: "µs resolution, 3 significant digits, up to minutes"); signing time in nanoseconds, because
//! an HMAC costs about a microsecond (a microbenchmark of the `hmac` and `sha2` crates read 0.6–0.9 µs per sign and verify).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use serde::{Serialize, Serializer};

use crate::error::LoadError;

/// Highest latency a histogram holds: one hour, in µs. Larger values saturate to it.
pub const MAX_LATENCY_US: u64 = 3_600 * 1_000_000;
/// Highest signing time a histogram holds: one second, in ns.
pub const MAX_SIGN_NS: u64 = 1_000_000_000;
/// Significant digits of every histogram.
pub const SIGFIG: u8 = 3;

/// A fixed-range latency histogram in µs.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGFIG).expect("constant bounds are valid")
}

/// A fixed-range signing-time histogram in ns.
pub fn sign_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_SIGN_NS, SIGFIG).expect("constant bounds are valid")
}

/// The histogram of a recorder that keeps counts only: the smallest HdrHistogram there is
/// (a few buckets), never recorded into. A device's own recorder is one: 10,000 devices
/// with two full-range histograms each would hold 3.6 GiB.
fn no_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 2, 0).expect("constant bounds are valid")
}

/// A small auto-resizing histogram for one interval: memory follows the largest value
/// seen, not the configured range, so a long run's per-second histograms stay small.
fn interval_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(SIGFIG).expect("constant sigfig is valid");
    h.auto(true);
    h
}

/// A histogram summarised: p50/p90/p95/p99/p99.9/max/mean in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HistSummary {
    pub count: u64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl HistSummary {
    /// Summarises `h`, whose values are in units of `unit_ns` nanoseconds
    /// (1000 for µs histograms, 1 for ns histograms).
    pub fn of(h: &Histogram<u64>, unit_ns: u64) -> HistSummary {
        let f = unit_ns as f64 / 1000.0;
        let q = |p: f64| h.value_at_quantile(p) as f64 * f;
        HistSummary {
            count: h.len(),
            p50_us: q(0.50),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: h.max() as f64 * f,
            mean_us: h.mean() * f,
        }
    }
}

/// A duration as seconds (f64) in JSON: what a reader of `load --json` expects, instead of
/// serde's default `{secs, nanos}` object.
pub(crate) fn ser_secs<S: Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn ser_latency<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    HistSummary::of(h, 1000).serialize(s)
}

fn ser_latency_opt<S: Serializer>(h: &Option<Histogram<u64>>, s: S) -> Result<S::Ok, S::Error> {
    h.as_ref().map(|h| HistSummary::of(h, 1000)).serialize(s)
}

/// Everything measured for one route.
#[derive(Debug, Clone, Serialize)]
pub struct RouteStats {
    /// Requests completed (any status, or a transport error).
    pub requests: u64,
    /// Count per HTTP status ("200", "201", ...) or transport error ("io", "timeout", "connect").
    pub status: BTreeMap<String, u64>,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    /// Service time in µs: from the moment the request was actually sent until its answer
    /// was read (in open loop: the *uncorrected* latency).
    #[serde(rename = "latency_us", serialize_with = "ser_latency")]
    pub latency: Histogram<u64>,
    /// Open loop only: latency in µs from the *intended* send time (coordinated-omission
    /// corrected, as wrk2 records it).
    #[serde(rename = "corrected_latency_us", serialize_with = "ser_latency_opt")]
    pub corrected: Option<Histogram<u64>>,
    /// Completions per second of the run (index = whole seconds since the start).
    pub per_second: Vec<u64>,
    /// Per-second histograms of the headline latency (corrected in open loop), for the
    /// interval log; not serialised into JSON.
    #[serde(skip)]
    pub intervals: Vec<Histogram<u64>>,
    /// Open loop only: per-second histograms of the uncorrected service time, for the
    /// interval log's `<route>-uncorrected` tag; not serialised into JSON.
    #[serde(skip)]
    pub intervals_uncorrected: Vec<Histogram<u64>>,
}

impl RouteStats {
    fn new(open_loop: bool, counts_only: bool) -> RouteStats {
        RouteStats {
            requests: 0,
            status: BTreeMap::new(),
            bytes_sent: 0,
            bytes_received: 0,
            latency: if counts_only {
                no_histogram()
            } else {
                latency_histogram()
            },
            corrected: (open_loop && !counts_only).then(latency_histogram),
            per_second: Vec::new(),
            intervals: Vec::new(),
            intervals_uncorrected: Vec::new(),
        }
    }

    /// The headline histogram: corrected in open loop, plain otherwise.
    pub fn headline(&self) -> &Histogram<u64> {
        self.corrected.as_ref().unwrap_or(&self.latency)
    }

    /// The headline latency summarised in µs.
    pub fn summary(&self) -> HistSummary {
        HistSummary::of(self.headline(), 1000)
    }

    /// Requests that got a 2xx answer.
    pub fn ok(&self) -> u64 {
        self.status
            .iter()
            .filter(|(k, _)| k.starts_with('2') && k.len() == 3)
            .map(|(_, v)| v)
            .sum()
    }

    /// Requests that did not get a 2xx answer (other statuses and transport errors).
    pub fn errors(&self) -> u64 {
        self.requests - self.ok()
    }

    /// Adds another run's figures for the same route (e.g. from a second generator).
    pub fn merge(&mut self, other: &RouteStats) {
        self.requests += other.requests;
        for (k, v) in &other.status {
            *self.status.entry(k.clone()).or_default() += v;
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.latency.add(&other.latency).expect("same bounds");
        match (&mut self.corrected, &other.corrected) {
            (Some(a), Some(b)) => a.add(b).expect("same bounds"),
            (None, Some(b)) => self.corrected = Some(b.clone()),
            _ => {}
        }
        grow_add(&mut self.per_second, &other.per_second);
        add_intervals(&mut self.intervals, &other.intervals);
        add_intervals(
            &mut self.intervals_uncorrected,
            &other.intervals_uncorrected,
        );
    }
}

fn add_intervals(a: &mut Vec<Histogram<u64>>, b: &[Histogram<u64>]) {
    if a.len() < b.len() {
        a.resize_with(b.len(), interval_histogram);
    }
    for (x, y) in a.iter_mut().zip(b) {
        x.add(y).expect("auto-resizing");
    }
}

fn grow_add(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// One completed request, as the engines report it to the [`Recorder`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// When the request was actually handed to the client.
    pub sent: Instant,
    /// Open loop: when it was meant to be sent.
    pub intended: Option<Instant>,
    /// When the whole answer had been read (or the transport failed).
    pub done: Instant,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Time spent signing it (recorded under the same lock as the rest).
    pub sign: Option<Duration>,
}

impl Sample {
    /// The sample of a request sent at `sent` (meant for `intended` in open loop) with
    /// `bytes_sent` body bytes and `sign` spent signing it, done now: given the bytes received.
    pub(crate) fn done_now(
        sent: Instant,
        intended: Option<Instant>,
        bytes_sent: u64,
        sign: Option<Duration>,
    ) -> impl Fn(u64) -> Sample {
        let done = Instant::now();
        move |bytes_received| Sample {
            sent,
            intended,
            done,
            bytes_sent,
            bytes_received,
            sign,
        }
    }
}

/// Per-route statistics behind a mutex, shared by every task of one operation. Recording
/// takes the lock for a few hundred nanoseconds; it is never held across an await.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
    open_loop: bool,
    keep_intervals: bool,
    /// Requests, statuses and bytes only: no latency, signing or per-second series.
    counts_only: bool,
    start: Instant,
    start_wall: SystemTime,
}

struct RecorderInner {
    routes: BTreeMap<String, RouteStats>,
    signing: Histogram<u64>,
    late_starts: u64,
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_LATENCY_US)
}

impl Recorder {
    /// A recorder whose clock starts now. `open_loop` adds the corrected histograms.
    /// It counts completions per second but keeps no per-second histograms.
    pub fn new(open_loop: bool) -> Recorder {
        Recorder::build(open_loop, false, false)
    }

    /// A recorder that also keeps one histogram per second per route, for the interval
    /// log (route load: bounded by the run's duration).
    pub fn with_intervals(open_loop: bool) -> Recorder {
        Recorder::build(open_loop, true, false)
    }

    /// A recorder of requests, statuses and bytes per route, without latency or signing
    /// histograms (their snapshots' histograms stay empty): a device's own count of what its
    /// single operations sent, a few hundred bytes instead of some 370 KiB.
    pub fn counting() -> Recorder {
        Recorder::build(false, false, true)
    }

    fn build(open_loop: bool, keep_intervals: bool, counts_only: bool) -> Recorder {
        Recorder {
            keep_intervals,
            counts_only,
            inner: Arc::new(Mutex::new(RecorderInner {
                routes: BTreeMap::new(),
                signing: if counts_only {
                    no_histogram()
                } else {
                    sign_histogram()
                },
                late_starts: 0,
            })),
            open_loop,
            start: Instant::now(),
            start_wall: SystemTime::now(),
        }
    }

    /// When this recorder started (intervals count from here).
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Whether it keeps corrected (open-loop) histograms.
    pub fn open_loop(&self) -> bool {
        self.open_loop
    }

    /// When this recorder started, in wall time (an interval log's `StartTime`).
    pub fn start_wall(&self) -> SystemTime {
        self.start_wall
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecorderInner> {
        // A panic while holding the lock cannot leave the histograms inconsistent in a way
        // that matters more than losing the run, so a poisoned lock is simply taken over.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one request outcome (`status` is "200"... or a transport error kind).
    pub(crate) fn record(&self, route: &str, status: &str, s: Sample) {
        let service = us(s.done.saturating_duration_since(s.sent));
        let corrected = s.intended.map(|i| us(s.done.saturating_duration_since(i)));
        let sec = s.done.saturating_duration_since(self.start).as_secs() as usize;
        let (open, counts_only) = (self.open_loop, self.counts_only);
        let mut g = self.lock();
        if let Some(d) = s.sign.filter(|_| !counts_only) {
            g.signing
                .saturating_record((d.as_nanos() as u64).clamp(1, MAX_SIGN_NS));
        }
        let st = match g.routes.get_mut(route) {
            Some(st) => st,
            None => g
                .routes
                .entry(route.to_owned())
                .or_insert_with(|| RouteStats::new(open, counts_only)),
        };
        st.requests += 1;
        match st.status.get_mut(status) {
            Some(n) => *n += 1,
            None => {
                st.status.insert(status.to_owned(), 1);
            }
        }
        st.bytes_sent += s.bytes_sent;
        st.bytes_received += s.bytes_received;
        if counts_only {
            return;
        }
        st.latency.saturating_record(service);
        if let (Some(h), Some(c)) = (st.corrected.as_mut(), corrected) {
            h.saturating_record(c);
        }
        if st.per_second.len() <= sec {
            st.per_second.resize(sec + 1, 0);
        }
        st.per_second[sec] += 1;
        if self.keep_intervals {
            if st.intervals.len() <= sec {
                st.intervals.resize_with(sec + 1, interval_histogram);
            }
            let _ = st.intervals[sec].record(corrected.unwrap_or(service));
            if corrected.is_some() {
                if st.intervals_uncorrected.len() <= sec {
                    st.intervals_uncorrected
                        .resize_with(sec + 1, interval_histogram);
                }
                let _ = st.intervals_uncorrected[sec].record(service);
            }
        }
    }

    /// Counts an open-loop request that left later than intended.
    pub(crate) fn late_start(&self) {
        self.lock().late_starts += 1;
    }

    /// Forgets everything recorded (the start time stays).
    pub fn reset(&self) {
        let mut g = self.lock();
        g.routes.clear();
        g.signing.reset();
        g.late_starts = 0;
    }

    /// Takes a copy of everything recorded so far.
    pub fn snapshot(&self) -> Measured {
        let g = self.lock();
        Measured {
            routes: g.routes.clone(),
            signing: g.signing.clone(),
            late_starts: g.late_starts,
            start_wall: self.start_wall,
        }
    }
}

/// A copy of what a recorder counted: per-route stats, signing time, late starts.
#[derive(Debug, Clone)]
pub struct Measured {
    pub routes: BTreeMap<String, RouteStats>,
    /// Signing time in ns.
    pub signing: Histogram<u64>,
    pub late_starts: u64,
    pub start_wall: SystemTime,
}

impl Measured {
    /// Total requests over all routes.
    pub fn requests(&self) -> u64 {
        self.routes.values().map(|r| r.requests).sum()
    }
}

/// The header line that says how a log's headline intervals were corrected for coordinated
/// omission: `#[Correction: intended-send-time]` (open loop: latency from the intended send
/// time, as wrk2 records it) or `#[Correction: none]` (closed loop). `hlog merge` refuses to
/// sum logs that say different things, or a log that says nothing with one that does.
pub const CORRECTION_HEADER: &str = "[Correction: ";
/// [`CORRECTION_HEADER`]'s value for open-loop logs.
pub const CORRECTED_INTENDED: &str = "intended-send-time";
/// [`CORRECTION_HEADER`]'s value for closed-loop logs.
pub const CORRECTED_NONE: &str = "none";

/// Writes the per-second histograms of every route as a standard HdrHistogram interval log
/// (the format of Java's `HistogramLogWriter`, V2 + DEFLATE, values in µs), tagged by route;
/// open-loop runs add `<route>-uncorrected`, also one interval per second. Intervals are
/// ordered by start time; a `#[Correction: …]` header line says how they were corrected.
pub fn write_interval_log<W: Write>(
    out: &mut W,
    start_wall: SystemTime,
    routes: &BTreeMap<String, RouteStats>,
) -> Result<(), std::io::Error> {
    let mut ser = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    let corrected = routes.values().any(|r| r.corrected.is_some());
    let correction = if corrected {
        CORRECTED_INTENDED
    } else {
        CORRECTED_NONE
    };
    builder
        .add_comment(
            "vaultbench load: latency in microseconds, one interval per second, tagged by route",
        )
        .add_comment(&format!("{CORRECTION_HEADER}{correction}]"))
        .with_start_time(start_wall)
        .with_base_time(start_wall)
        .with_max_value_divisor(1000.0);
    let mut w = builder.begin_log_with(out, &mut ser)?;
    let secs = routes
        .values()
        .map(|r| r.intervals.len().max(r.intervals_uncorrected.len()))
        .max()
        .unwrap_or(0);
    let to_io = |e| std::io::Error::other(format!("{e:?}"));
    let uncorrected: BTreeMap<&String, String> = routes
        .keys()
        .map(|k| (k, format!("{k}-uncorrected")))
        .collect();
    for i in 0..secs {
        for (route, st) in routes {
            let series = [
                (&st.intervals, route.as_str()),
                (&st.intervals_uncorrected, uncorrected[route].as_str()),
            ];
            for (intervals, tag) in series {
                if let Some(h) = intervals.get(i).filter(|h| !h.is_empty()) {
                    w.write_histogram(
                        h,
                        Duration::from_secs(i as u64),
                        Duration::from_secs(1),
                        Tag::new(tag),
                    )
                    .map_err(to_io)?;
                }
            }
        }
    }
    Ok(())
}

/// Reads an interval log and merges its intervals per tag (untagged intervals go under "").
/// Merging two logs is reading both and adding per tag ([`merge_into`]).
pub fn read_interval_log(
    bytes: &[u8],
    what: &str,
) -> Result<BTreeMap<String, Histogram<u64>>, LoadError> {
    let mut out = BTreeMap::new();
    merge_into(&mut out, bytes, what)?;
    Ok(out)
}

/// Adds every interval of the log in `bytes` to `acc`, per tag.
pub fn merge_into(
    acc: &mut BTreeMap<String, Histogram<u64>>,
    bytes: &[u8],
    what: &str,
) -> Result<(), LoadError> {
    let bad = |detail: String| LoadError::Invalid {
        what: what.to_owned(),
        reason: detail,
    };
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| bad(format!("not an HdrHistogram interval log: {e:?}")))?;
        if let LogEntry::Interval(ilh) = entry {
            let raw = base64_decode(ilh.encoded_histogram())
                .ok_or_else(|| bad("bad base64 in an interval".into()))?;
            let h: Histogram<u64> = de
                .deserialize(&mut &raw[..])
                .map_err(|e| bad(format!("bad histogram: {e:?}")))?;
            let tag = ilh.tag().map(|t| t.as_str().to_owned()).unwrap_or_default();
            let slot = acc.entry(tag).or_insert_with(latency_histogram);
            slot.add(&h)
                .map_err(|e| bad(format!("cannot merge: {e:?}")))?;
        }
    }
    Ok(())
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start: Instant, sent_ms: u64, done_ms: u64, intended_ms: Option<u64>) -> Sample {
        let at = |ms| start + Duration::from_millis(ms);
        Sample {
            sent: at(sent_ms),
            intended: intended_ms.map(at),
            done: at(done_ms),
            bytes_sent: 10,
            bytes_received: 20,
            sign: Some(Duration::from_nanos(900)),
        }
    }

    #[test]
    fn recorder_counts_and_corrects() {
        let r = Recorder::new(true);
        let t = r.start();
        r.record("get-chunk", "200", sample(t, 100, 110, Some(50)));
        r.record("get-chunk", "503", sample(t, 1200, 1205, Some(1200)));
        r.record("get-chunk", "io", sample(t, 2100, 2300, Some(2000)));
        r.late_start();
        let m = r.snapshot();
        let st = &m.routes["get-chunk"];
        assert_eq!(st.requests, 3);
        assert_eq!(st.ok(), 1);
        assert_eq!(st.errors(), 2);
        assert_eq!(st.status["io"], 1);
        assert_eq!(st.bytes_sent, 30);
        assert_eq!(st.per_second, vec![1, 1, 1]);
        assert_eq!(m.late_starts, 1);
        // Uncorrected max 200 ms; corrected max 300 ms (from the intended 2000 ms).
        let close = |a: u64, b: u64| (a as f64 - b as f64).abs() / b as f64 <= 0.001;
        assert!(close(st.latency.max(), 200_000), "{}", st.latency.max());
        assert!(close(st.corrected.as_ref().unwrap().max(), 300_000));
        assert!(close(st.headline().max(), 300_000));
        let s = st.summary();
        assert_eq!(s.count, 3);
        assert!(s.p50_us >= 59_000.0 && s.p50_us <= 61_000.0, "{s:?}");
    }

    #[test]
    fn a_counting_recorder_counts_in_a_few_buckets() {
        let r = Recorder::counting();
        let t = r.start();
        r.record("changes", "200", sample(t, 100, 30_100, None));
        r.record("changes", "503", sample(t, 40_000, 40_001, None));
        let m = r.snapshot();
        let st = &m.routes["changes"];
        assert_eq!((st.requests, st.ok(), st.errors()), (2, 1, 1));
        assert_eq!((st.bytes_sent, st.bytes_received), (20, 40));
        assert!(st.latency.is_empty() && m.signing.is_empty() && st.per_second.is_empty());
        // The full-range histograms hold some 23,000 counters each; these a handful.
        let full = latency_histogram().distinct_values() + sign_histogram().distinct_values();
        let here = st.latency.distinct_values() + m.signing.distinct_values();
        assert!(full > 40_000 && here < 16, "{full} against {here}");
    }

    #[test]
    fn summary_units() {
        let mut h = sign_histogram();
        h.record(800).unwrap();
        let s = HistSummary::of(&h, 1);
        assert!((s.p50_us - 0.8).abs() < 0.001, "{s:?}");
        let mut h = latency_histogram();
        h.record(1500).unwrap();
        assert!((HistSummary::of(&h, 1000).max_us - 1500.0).abs() < 2.0);
    }

    fn run_with(values: &[(u64, u64)], route: &str) -> Measured {
        let r = Recorder::with_intervals(false);
        let t = r.start();
        for &(done_ms, lat_ms) in values {
            r.record(route, "200", sample(t, done_ms - lat_ms, done_ms, None));
        }
        r.snapshot()
    }

    #[test]
    fn interval_log_round_trip_and_merge() {
        let a = run_with(&[(100, 3), (900, 5), (1500, 40), (2500, 7)], "put-chunk");
        let b = run_with(&[(300, 2), (1300, 90)], "put-chunk");
        let c = run_with(&[(200, 11)], "changes");
        let mut log_a = Vec::new();
        write_interval_log(&mut log_a, a.start_wall, &a.routes).unwrap();
        let text = String::from_utf8(log_a.clone()).unwrap();
        assert!(text.contains("Tag=put-chunk,"), "{text}");
        assert!(text.starts_with("#vaultbench load"));
        // Round trip: the merged intervals equal the route's whole histogram.
        let back = read_interval_log(&log_a, "a").unwrap();
        assert_eq!(back["put-chunk"], a.routes["put-chunk"].latency);
        // Merge of two logs (and a different tag) equals merging the histograms.
        let mut bc = b.routes.clone();
        bc.extend(c.routes.clone());
        let mut log_b = Vec::new();
        write_interval_log(&mut log_b, b.start_wall, &bc).unwrap();
        let mut merged = read_interval_log(&log_a, "a").unwrap();
        merge_into(&mut merged, &log_b, "b").unwrap();
        let mut expect = a.routes["put-chunk"].clone();
        expect.merge(&b.routes["put-chunk"]);
        assert_eq!(merged["put-chunk"], expect.latency);
        assert_eq!(merged["put-chunk"].len(), 6);
        assert_eq!(merged["changes"], c.routes["changes"].latency);
        assert_eq!(expect.per_second, vec![3, 2, 1]);
    }

    #[test]
    fn garbage_log_is_an_error_naming_the_input() {
        let err = read_interval_log(b"Tag=x,1,2,3,!!!notbase64\n", "f.hlog").unwrap_err();
        assert!(err.to_string().starts_with("f.hlog:"), "{err}");
    }
}

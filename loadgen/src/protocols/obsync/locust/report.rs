//! A worker's `stats` report in Locust's format (`locust/stats.py`: `StatsEntry.serialize`,
//! `setup_distributed_stats_event_listeners`): what was measured since the last report, per
//! route, with response times in milliseconds bucketed to about two significant figures as
//! Locust buckets them (`bucket_response_time`). The exact figures stay in the worker's
//! HdrHistogram interval log; the master gets what its own merge and CSV can hold.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::stats::{Measured, RouteStats};

/// One `StatsEntry`, serialised as Locust's `StatsEntryDict`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub name: String,
    pub method: Option<String>,
    pub last_request_timestamp: Option<f64>,
    pub start_time: f64,
    pub num_requests: u64,
    pub num_none_requests: u64,
    pub num_failures: u64,
    pub total_response_time: u64,
    pub max_response_time: u64,
    pub min_response_time: Option<u64>,
    pub total_content_length: u64,
    pub response_times: BTreeMap<u64, u64>,
    pub num_reqs_per_sec: BTreeMap<u64, u64>,
    pub num_fail_per_sec: BTreeMap<u64, u64>,
}

/// One `StatsError`, serialised as Locust's `StatsErrorDict`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorEntry {
    pub name: String,
    pub method: String,
    pub error: String,
    pub occurrences: u64,
    pub first_seen: f64,
    pub last_seen: f64,
}

/// The data of a `stats` message: Locust's stats listener's keys plus the runner's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsData {
    pub stats: Vec<Entry>,
    pub stats_total: Entry,
    pub errors: BTreeMap<String, ErrorEntry>,
    pub user_classes_count: BTreeMap<String, u64>,
    pub user_count: u64,
}

/// Locust's `bucket_response_time`: a response time in ms rounded to about two significant
/// figures (147 -> 150, 3432 -> 3400, 58760 -> 59000).
pub fn bucket_ms(ms: f64) -> u64 {
    let r = |step: f64| ((ms / step).round() * step) as u64;
    if ms < 100.0 {
        ms.round() as u64
    } else if ms < 1000.0 {
        r(10.0)
    } else if ms < 10_000.0 {
        r(100.0)
    } else {
        r(1000.0)
    }
}

fn unix_s(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// Turns successive snapshots of one recorder into Locust's per-report deltas.
pub struct Reporter {
    prev: BTreeMap<String, RouteStats>,
    methods: BTreeMap<String, String>,
}

impl Reporter {
    /// `methods`: each route's HTTP method, by route name.
    pub fn new(methods: BTreeMap<String, String>) -> Reporter {
        Reporter {
            prev: BTreeMap::new(),
            methods,
        }
    }

    /// What `m` holds beyond the previous report, as Locust's stats (the report is then the
    /// previous one). `now` is the wall time of the report.
    pub fn report(
        &mut self,
        m: &Measured,
        now: SystemTime,
        user_classes_count: &BTreeMap<String, u64>,
        user_count: u64,
    ) -> StatsData {
        let start = unix_s(m.start_wall);
        let now_s = unix_s(now);
        let mut stats = Vec::new();
        let mut total = empty("Aggregated", None, start);
        let mut errors = BTreeMap::new();
        for (route, cur) in &m.routes {
            let method = self.methods.get(route).cloned().unwrap_or_default();
            let e = entry_delta(route, &method, cur, self.prev.get(route), start, now_s);
            for (status, n) in status_delta(cur, self.prev.get(route)) {
                let error = if status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit()) {
                    format!("HTTP {status}")
                } else {
                    format!("transport error ({status})")
                };
                errors.insert(
                    format!("{method} {route}: {error}"),
                    ErrorEntry {
                        name: route.clone(),
                        method: method.clone(),
                        error,
                        occurrences: n,
                        first_seen: now_s,
                        last_seen: now_s,
                    },
                );
            }
            if e.num_requests > 0 {
                add_into(&mut total, &e);
                stats.push(e);
            }
        }
        self.prev = m.routes.clone();
        StatsData {
            stats,
            stats_total: total,
            errors,
            user_classes_count: user_classes_count.clone(),
            user_count,
        }
    }
}

fn empty(name: &str, method: Option<String>, start: f64) -> Entry {
    Entry {
        name: name.to_owned(),
        method,
        last_request_timestamp: None,
        start_time: start,
        num_requests: 0,
        num_none_requests: 0,
        num_failures: 0,
        total_response_time: 0,
        max_response_time: 0,
        min_response_time: None,
        total_content_length: 0,
        response_times: BTreeMap::new(),
        num_reqs_per_sec: BTreeMap::new(),
        num_fail_per_sec: BTreeMap::new(),
    }
}

/// Non-2xx outcomes since the previous report, per status.
fn status_delta(cur: &RouteStats, prev: Option<&RouteStats>) -> Vec<(String, u64)> {
    cur.status
        .iter()
        .filter(|(k, _)| !(k.starts_with('2') && k.len() == 3))
        .filter_map(|(k, &n)| {
            let before = prev.and_then(|p| p.status.get(k)).copied().unwrap_or(0);
            let d = n.saturating_sub(before);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

fn entry_delta(
    route: &str,
    method: &str,
    cur: &RouteStats,
    prev: Option<&RouteStats>,
    start: f64,
    now_s: f64,
) -> Entry {
    let mut e = empty(route, Some(method.to_owned()), start);
    let p_requests = prev.map_or(0, |p| p.requests);
    e.num_requests = cur.requests.saturating_sub(p_requests);
    if e.num_requests == 0 {
        return e;
    }
    e.num_failures = cur.errors().saturating_sub(prev.map_or(0, |p| p.errors()));
    e.total_content_length = cur
        .bytes_received
        .saturating_sub(prev.map_or(0, |p| p.bytes_received));
    e.last_request_timestamp = Some(now_s);
    // The histogram of the requests since the previous report (µs).
    let mut h: Histogram<u64> = cur.headline().clone();
    if let Some(p) = prev
        && h.subtract(p.headline()).is_err()
    {
        h = cur.headline().clone();
    }
    for v in h.iter_recorded() {
        let us = h.median_equivalent(v.value_iterated_to());
        let ms = us as f64 / 1000.0;
        let n = v.count_at_value();
        *e.response_times.entry(bucket_ms(ms)).or_default() += n;
        e.total_response_time = e
            .total_response_time
            .saturating_add((ms.round() as u64).saturating_mul(n));
    }
    if !h.is_empty() {
        e.min_response_time = Some(bucket_ms(h.min() as f64 / 1000.0));
        e.max_response_time = bucket_ms(h.max() as f64 / 1000.0);
    }
    let start_sec = start as u64;
    for (i, &n) in cur.per_second.iter().enumerate() {
        let before = prev.and_then(|p| p.per_second.get(i)).copied().unwrap_or(0);
        if n > before {
            e.num_reqs_per_sec.insert(start_sec + i as u64, n - before);
        }
    }
    if e.num_failures > 0 {
        e.num_fail_per_sec.insert(now_s as u64, e.num_failures);
    }
    e
}

fn add_into(t: &mut Entry, e: &Entry) {
    t.num_requests += e.num_requests;
    t.num_failures += e.num_failures;
    t.total_response_time = t.total_response_time.saturating_add(e.total_response_time);
    t.max_response_time = t.max_response_time.max(e.max_response_time);
    t.min_response_time = match (t.min_response_time, e.min_response_time) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    t.total_content_length += e.total_content_length;
    t.last_request_timestamp = e.last_request_timestamp.or(t.last_request_timestamp);
    for (maps, from) in [
        (&mut t.response_times, &e.response_times),
        (&mut t.num_reqs_per_sec, &e.num_reqs_per_sec),
        (&mut t.num_fail_per_sec, &e.num_fail_per_sec),
    ] {
        for (k, v) in from {
            *maps.entry(*k).or_default() += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Recorder;

    #[test]
    fn buckets_as_locust_does() {
        assert_eq!(bucket_ms(47.4), 47);
        assert_eq!(bucket_ms(147.0), 150);
        assert_eq!(bucket_ms(3432.0), 3400);
        assert_eq!(bucket_ms(58_760.0), 59_000);
    }

    #[test]
    fn reports_deltas_that_add_up() {
        let rec = Recorder::with_intervals(false);
        let t = rec.start();
        let s = |ms: u64| crate::stats::Sample {
            sent: t,
            intended: None,
            done: t + Duration::from_millis(ms),
            bytes_sent: 1,
            bytes_received: 10,
            sign: None,
        };
        let mut r = Reporter::new(BTreeMap::from([("livez".into(), "GET".into())]));
        let users = BTreeMap::from([("U".to_owned(), 2)]);
        rec.record("livez", "200", s(5));
        rec.record("livez", "503", s(1500));
        let a = r.report(&rec.snapshot(), SystemTime::now(), &users, 2);
        rec.record("livez", "200", s(7));
        let b = r.report(&rec.snapshot(), SystemTime::now(), &users, 2);
        let c = r.report(&rec.snapshot(), SystemTime::now(), &users, 2);
        assert_eq!(a.stats[0].num_requests, 2);
        assert_eq!(a.stats[0].num_failures, 1);
        assert_eq!(
            a.stats[0].response_times,
            BTreeMap::from([(5, 1), (1500, 1)])
        );
        assert_eq!(a.errors.len(), 1);
        assert_eq!(a.stats_total.num_requests, 2);
        assert_eq!(b.stats[0].num_requests, 1);
        assert_eq!(b.stats[0].response_times, BTreeMap::from([(7, 1)]));
        assert!(b.errors.is_empty());
        assert!(c.stats.is_empty());
        assert_eq!(c.stats_total.num_requests, 0);
        let per_sec: u64 = a.stats[0].num_reqs_per_sec.values().sum::<u64>()
            + b.stats[0].num_reqs_per_sec.values().sum::<u64>();
        assert_eq!(per_sec, 3);
        // It encodes as Locust's message.
        let bytes = super::super::message::encode("stats", &a, "w");
        assert!(!bytes.is_empty());
    }
}

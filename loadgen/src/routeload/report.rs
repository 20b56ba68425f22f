//! What every protocol's route load is configured by and reports: the config (with or without
//! a folder for the listing routes), the report with its headline summary and HdrHistogram
//! interval log, and the run from a prepared worker to that report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::Mode;
use super::drive::{self, Bounds, Worker};
use crate::stats::{HistSummary, Measured, Recorder, RouteStats, write_interval_log};

/// A protocol's route under load, named by the metric keys' route part.
pub trait RouteKey: Copy {
    /// The route's name in metric keys and interval logs.
    fn key(self) -> &'static str;
}

/// One route load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteLoadConfig<R> {
    /// The route driven.
    pub route: R,
    /// How requests are issued: closed or open loop.
    pub mode: Mode,
    /// How long requests start for; in JSON `duration_s`, seconds as a float (not serde's
    /// `{secs, nanos}`).
    #[serde(rename = "duration_s", serialize_with = "crate::stats::ser_secs")]
    pub duration: Duration,
    /// The most requests sent, whatever the duration.
    pub max_requests: u64,
    /// The seed of the prepared data and of every worker's stream.
    pub seed: u64,
}

impl<R> RouteLoadConfig<R> {
    /// The same load with the folder the listing routes list.
    pub fn in_folder(self, folder: String) -> FolderRouteLoadConfig<R> {
        FolderRouteLoadConfig { load: self, folder }
    }
}

/// One route load of a protocol whose listing routes list a folder: the load's fields, then
/// the folder (in JSON, one object in that order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FolderRouteLoadConfig<R> {
    #[serde(flatten)]
    pub load: RouteLoadConfig<R>,
    /// The folder the listing routes list (a vault path; "" is the root).
    pub folder: String,
}

impl<R> std::ops::Deref for FolderRouteLoadConfig<R> {
    type Target = RouteLoadConfig<R>;
    fn deref(&self) -> &RouteLoadConfig<R> {
        &self.load
    }
}

/// The parts of a config the run reads.
pub trait LoadConfig: Clone {
    type Route: RouteKey;
    /// The route, the mode, the duration, the request ceiling and the seed.
    fn parts(&self) -> (Self::Route, Mode, Duration, u64, u64);
}

impl<R: RouteKey> LoadConfig for RouteLoadConfig<R> {
    type Route = R;
    fn parts(&self) -> (R, Mode, Duration, u64, u64) {
        let c = self;
        (c.route, c.mode, c.duration, c.max_requests, c.seed)
    }
}

impl<R: RouteKey> LoadConfig for FolderRouteLoadConfig<R> {
    type Route = R;
    fn parts(&self) -> (R, Mode, Duration, u64, u64) {
        let c = self;
        (c.route, c.mode, c.duration, c.max_requests, c.seed)
    }
}

/// What a route load measured.
#[derive(Debug, Clone, Serialize)]
pub struct RouteLoadReport<R, C> {
    pub route: R,
    pub config: C,
    pub wall_ns: u64,
    pub requests: u64,
    /// Completed requests per second of wall time.
    pub throughput_per_s: f64,
    /// Open loop: requests that left more than 2 ms after their intended time.
    pub late_starts: u64,
    pub stats: RouteStats,
    #[serde(skip)]
    start_wall: SystemTime,
}

impl<R: RouteKey, C> RouteLoadReport<R, C> {
    /// Headline latency (corrected in open loop) in µs.
    pub fn summary(&self) -> HistSummary {
        self.stats.summary()
    }

    /// Writes the standard HdrHistogram interval log, tagged by route.
    pub fn write_hdr_log<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        write_hdr_log(w, self.route.key(), &self.stats, self.start_wall)
    }
}

/// Writes the standard HdrHistogram interval log of one route's figures, tagged by its name.
pub(crate) fn write_hdr_log<W: std::io::Write>(
    w: &mut W,
    route: &str,
    stats: &RouteStats,
    start_wall: SystemTime,
) -> std::io::Result<()> {
    let mut routes = BTreeMap::new();
    routes.insert(route.to_owned(), stats.clone());
    write_interval_log(w, start_wall, &routes)
}

/// The figures of a run that ended now, started at `t0`, for `route`.
pub(crate) struct Figures {
    pub wall_ns: u64,
    pub throughput_per_s: f64,
    pub stats: RouteStats,
    /// Everything the recorder counted.
    pub measured: Measured,
}

/// Reads the run's figures from its recorder.
pub(crate) fn figures(rec: &Recorder, t0: Instant, route: &str, open: bool) -> Figures {
    let wall = t0.elapsed();
    let measured = rec.snapshot();
    let stats = drive::route_stats(&measured, route, open);
    Figures {
        wall_ns: wall.as_nanos() as u64,
        throughput_per_s: stats.requests as f64 / wall.as_secs_f64().max(1e-9),
        stats,
        measured,
    }
}

/// Runs a prepared route load (its config checked) and reports it: the clock starts now,
/// `start` makes the worker from the recorder the requests are counted by and the run's
/// deadline, closed-loop workers each get a connection `conns` makes, and requests still out
/// `DRAIN_GRACE` after the duration are abandoned and counted as timeouts.
pub(crate) async fn run_prepared<C, W>(
    cfg: &C,
    start: impl FnOnce(Recorder, Instant) -> W,
    conns: impl FnOnce(usize) -> Vec<W::Conn>,
) -> RouteLoadReport<C::Route, C>
where
    C: LoadConfig,
    W: Worker,
{
    let (route, mode, duration, max_requests, seed) = cfg.parts();
    let open = matches!(mode, Mode::Open { .. });
    let rec = Recorder::with_intervals(open);
    let t0 = rec.start();
    let deadline = t0 + duration;
    let run = Arc::new(start(rec.clone(), deadline));
    let bounds = Bounds {
        t0,
        deadline,
        max_requests,
        seed,
        stop: None,
    };
    drive::run_mode(&run, &rec, mode, &bounds, conns).await;
    let f = figures(&rec, t0, route.key(), open);
    RouteLoadReport {
        route,
        config: cfg.clone(),
        wall_ns: f.wall_ns,
        requests: f.stats.requests,
        throughput_per_s: f.throughput_per_s,
        late_starts: f.measured.late_starts,
        stats: f.stats,
        start_wall: f.measured.start_wall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_load_serialises_as_its_load_then_the_folder() {
        let cfg = RouteLoadConfig {
            route: "propfind",
            mode: Mode::Closed { in_flight: 2 },
            duration: Duration::from_millis(1500),
            max_requests: 10,
            seed: 7,
        }
        .in_folder("Wiki".into());
        assert_eq!(
            serde_json::to_string(&cfg).unwrap(),
            r#"{"route":"propfind","mode":{"closed":{"in_flight":2}},"duration_s":1.5,"max_requests":10,"seed":7,"folder":"Wiki"}"#
        );
        assert_eq!(cfg.max_requests, 10, "the load's fields read through");
    }
}

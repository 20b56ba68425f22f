//! S3 route load: one route driven closed-loop (N requests in flight, each worker on its own
//! lean HTTP/1.1 connection) or open-loop (a fixed rate over the pooled client, latency
//! corrected from the intended send time), bounded by a duration and a request ceiling, every
//! request signed afresh, with the same per-route histograms and interval logs as every
//! protocol's route load. A failed request is counted per status, never an abort.
//!
//! Requests refer to data prepared before the clock starts, under `vaultbench-load/<seed>/`
//! in the bucket: objects to GET and HEAD.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::client::{Planned, S3Client};
use super::error::S3Error;
use crate::Mode;
use crate::h1::H1Conn;
use crate::routeload::drive;
use crate::stats::{HistSummary, Recorder, RouteStats, write_interval_log};

/// Body of a PutObject under load: 2 KiB, the note size every protocol's route load uses.
pub const PUT_BYTES: usize = 2048;
/// Objects uploaded before a `get-object` or `head-object` load.
pub const PREP_OBJECTS: usize = 16;

/// An S3 route under load; names are the metric keys' route part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum S3Route {
    /// PutObject of a new 2 KiB note each time
    PutObject,
    /// GetObject of a stored 2 KiB note
    GetObject,
    /// HeadObject of a stored note
    HeadObject,
    /// ListObjectsV2 of the configured folder's prefix (one page)
    ListObjects,
}

impl S3Route {
    pub const ALL: [S3Route; 4] = [
        S3Route::PutObject,
        S3Route::GetObject,
        S3Route::HeadObject,
        S3Route::ListObjects,
    ];

    pub fn name(self) -> &'static str {
        match self {
            S3Route::PutObject => "put-object",
            S3Route::GetObject => "get-object",
            S3Route::HeadObject => "head-object",
            S3Route::ListObjects => "list-objects",
        }
    }
}

/// One S3 route load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct S3RouteLoadConfig {
    pub route: S3Route,
    pub mode: Mode,
    /// In JSON `duration_s`, seconds as a float (not serde's `{secs, nanos}`).
    #[serde(rename = "duration_s", serialize_with = "crate::stats::ser_secs")]
    pub duration: Duration,
    pub max_requests: u64,
    pub seed: u64,
    /// The folder `list-objects` lists (a vault path; "" is the whole bucket).
    pub folder: String,
}

/// What an S3 route load measured.
#[derive(Debug, Clone, Serialize)]
pub struct S3RouteLoadReport {
    pub route: S3Route,
    pub config: S3RouteLoadConfig,
    pub wall_ns: u64,
    pub requests: u64,
    /// Completed requests per second of wall time.
    pub throughput_per_s: f64,
    /// Open loop: requests that left more than 2 ms after their intended time.
    pub late_starts: u64,
    pub stats: RouteStats,
    #[serde(skip)]
    start_wall: std::time::SystemTime,
}

impl S3RouteLoadReport {
    /// Headline latency (corrected in open loop) in µs.
    pub fn summary(&self) -> HistSummary {
        self.stats.summary()
    }

    /// Writes the standard HdrHistogram interval log, tagged by route.
    pub fn write_hdr_log<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let mut routes = std::collections::BTreeMap::new();
        routes.insert(self.route.name().to_owned(), self.stats.clone());
        write_interval_log(w, self.start_wall, &routes)
    }
}

/// Printable text, as a note is: 64 lines of 31 letters and a newline.
fn note_body(rng: &mut ChaCha8Rng) -> Bytes {
    let mut buf = vec![0u8; PUT_BYTES];
    rng.fill_bytes(&mut buf);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if i % 32 == 31 { b'\n' } else { b'a' + *b % 26 };
    }
    Bytes::from(buf)
}

/// Shared state of one run's workers.
struct Run {
    route: S3Route,
    client: S3Client,
    rec: Recorder,
    /// `vaultbench-load/<seed>/`.
    base: String,
    /// The prefix `list-objects` lists.
    list_prefix: String,
    objects: Vec<String>,
    counter: AtomicU64,
    deadline: Instant,
}

impl Run {
    fn plan(&self, rng: &mut ChaCha8Rng) -> Planned {
        let c = &self.client;
        let empty = Bytes::new();
        match self.route {
            S3Route::PutObject => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let key = format!("{}put-{n}.md", self.base);
                let extra = vec![("content-type", super::client::content_type(&key).to_owned())];
                c.plan(
                    "put-object",
                    Method::PUT,
                    Some(&key),
                    &[],
                    extra,
                    note_body(rng),
                )
            }
            S3Route::GetObject | S3Route::HeadObject => {
                let key = &self.objects[rng.next_u32() as usize % self.objects.len()];
                let m = if self.route == S3Route::GetObject {
                    Method::GET
                } else {
                    Method::HEAD
                };
                c.plan(self.route.name(), m, Some(key), &[], Vec::new(), empty)
            }
            S3Route::ListObjects => {
                let mut q = vec![("list-type", "2")];
                if !self.list_prefix.is_empty() {
                    q.push(("prefix", self.list_prefix.as_str()));
                }
                c.plan("list-objects", Method::GET, None, &q, Vec::new(), empty)
            }
        }
    }
}

impl drive::Worker for Run {
    type Conn = H1Conn;

    /// One signed request of the route; `conn` is the worker's own connection in closed loop.
    async fn one(
        &self,
        _slot: usize,
        rng: &mut ChaCha8Rng,
        conn: Option<&mut H1Conn>,
        intended: Option<Instant>,
    ) {
        let p = self.plan(rng);
        let mut req = p.request();
        req.intended = intended;
        req.timeout = drive::request_timeout(crate::http::REQUEST_TIMEOUT, self.deadline);
        let http = self.client.http();
        match conn {
            Some(c) => {
                let _ = http.send_lean(&self.rec, c, &req).await;
            }
            None => {
                let _ = http.send(&self.rec, &req).await;
            }
        }
    }
}

async fn prepare(client: &S3Client, cfg: &S3RouteLoadConfig) -> Result<Run, S3Error> {
    let rec = Recorder::new(false);
    let base = format!("vaultbench-load/{:016x}/", cfg.seed);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(u64::MAX);
    let mut objects = Vec::new();
    if matches!(cfg.route, S3Route::GetObject | S3Route::HeadObject) {
        for i in 0..PREP_OBJECTS {
            let key = format!("{base}get-{i}.md");
            client.put(&rec, &key, note_body(&mut rng), 0).await?;
            objects.push(key);
        }
    }
    let list_prefix = if cfg.folder.is_empty() {
        String::new()
    } else {
        format!("{}/", cfg.folder.trim_end_matches('/'))
    };
    Ok(Run {
        route: cfg.route,
        client: client.clone(),
        rec: Recorder::new(false),
        base,
        list_prefix,
        objects,
        counter: AtomicU64::new(0),
        deadline: Instant::now(),
    })
}

/// Runs one S3 route load. Stops at `duration` or `max_requests`, whichever comes first;
/// requests still out `DRAIN_GRACE` after the duration are abandoned and counted as timeouts.
pub async fn run_s3_route_load(
    client: &S3Client,
    cfg: &S3RouteLoadConfig,
) -> Result<S3RouteLoadReport, S3Error> {
    drive::check(cfg.duration, cfg.max_requests, cfg.mode)
        .map_err(|e| S3Error::invalid(e.what, e.reason))?;
    let open = matches!(cfg.mode, Mode::Open { .. });
    let mut run = prepare(client, cfg).await?;
    let rec = Recorder::with_intervals(open);
    let t0 = rec.start();
    run.rec = rec.clone();
    run.deadline = t0 + cfg.duration;
    let run = Arc::new(run);
    let bounds = drive::Bounds {
        t0,
        deadline: run.deadline,
        max_requests: cfg.max_requests,
        seed: cfg.seed,
        stop: None,
    };
    drive::run_mode(&run, &rec, cfg.mode, &bounds, |n| {
        (0..n)
            .map(|_| H1Conn::new(client.http().target().addr()))
            .collect()
    })
    .await;
    let wall = t0.elapsed();
    let m = rec.snapshot();
    let stats = drive::route_stats(&m, cfg.route.name(), open);
    Ok(S3RouteLoadReport {
        route: cfg.route,
        config: cfg.clone(),
        wall_ns: wall.as_nanos() as u64,
        requests: stats.requests,
        throughput_per_s: stats.requests as f64 / wall.as_secs_f64().max(1e-9),
        late_starts: m.late_starts,
        stats,
        start_wall: m.start_wall,
    })
}

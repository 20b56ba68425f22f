//! Route load: one route driven closed-loop (N requests in flight) or open-loop (a fixed
//! rate, latency measured from the intended send time) across several devices, bounded by
//! a duration and a request ceiling. A failed request is counted, never an abort.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::Method;
use protocol::Route as ProtoRoute;
use protocol::wire::{SidsRequest, VersionPost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::error::LoadError;
use crate::h1::BlockingSlot;
use crate::protocols::obsync::client::{Device, Outgoing, REQUEST_TIMEOUT, WorkerConn};
use crate::protocols::obsync::sync::file_id_for;
use crate::routeload::DRAIN_GRACE;
pub use crate::routeload::Mode;
use crate::routeload::{self, RouteKey, drive, report};
use crate::stats::{HistSummary, Recorder, RouteStats};

mod paired;
pub use paired::{
    PairedRouteConfig, PairedRouteReport, a_first_in, default_slice, run_paired_route_load,
};

pub use crate::routeload::LOAD_CHUNK_BYTES;
/// Chunks uploaded before a read route starts, so reads hit real stored data.
pub const PREP_CHUNKS: usize = 16;
/// Versions posted before a `changes` load, so each feed read returns a full page.
pub const PREP_VERSIONS: usize = 100;
/// Entries per `changes` read under load.
pub const CHANGES_PAGE: usize = 100;
/// Sids per `chunks/exists` under load: a quarter known, the rest unknown.
pub const EXISTS_SIDS: usize = 64;
/// Mixes the first device's index into a run's level (an odd constant, SplitMix64's).
const SHARD_MIX: u64 = 0x9e37_79b9_7f4a_7c15 ^ 0xbf58_476d_1ce4_e5b9;

/// A route under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// `PUT /v1/chunks/{sid}`, a fresh 1.5 KiB chunk each time
    PutChunk,
    /// `POST /v1/files/{id}/versions`, a new one-chunk file each time
    PostVersion,
    /// `GET /v1/changes?since=0&limit=100` over a feed of ≥ 100 entries
    Changes,
    /// `GET /v1/chunks/{sid}` of a stored chunk
    GetChunk,
    /// `POST /v1/chunks/get` of three stored chunks (the client's batch)
    ChunksGet,
    /// `POST /v1/chunks/exists` of 64 sids (16 stored)
    ChunksExists,
    /// `GET /livez`, signed like any device request (the generator's own ceiling)
    Livez,
}

impl Route {
    pub const ALL: [Route; 7] = [
        Route::PutChunk,
        Route::PostVersion,
        Route::Changes,
        Route::GetChunk,
        Route::ChunksGet,
        Route::ChunksExists,
        Route::Livez,
    ];

    /// The protocol route this load drives.
    pub fn protocol(self) -> ProtoRoute {
        match self {
            Route::PutChunk => ProtoRoute::PutChunk,
            Route::PostVersion => ProtoRoute::PostVersion,
            Route::Changes => ProtoRoute::Changes,
            Route::GetChunk => ProtoRoute::GetChunk,
            Route::ChunksGet => ProtoRoute::ChunksGet,
            Route::ChunksExists => ProtoRoute::ChunksExists,
            Route::Livez => ProtoRoute::Livez,
        }
    }

    /// The route's name in reports and interval-log tags: the protocol route's generator
    /// label ([`protocol::Route::label`]).
    pub fn name(self) -> &'static str {
        self.protocol().label()
    }
}

impl RouteKey for Route {
    fn key(self) -> &'static str {
        self.name()
    }
}

/// One route load.
pub type RouteLoadConfig = routeload::RouteLoadConfig<Route>;

/// Data the run's requests refer to, prepared before the clock starts.
#[derive(Debug, Clone, Default)]
struct Prep {
    sids: Vec<String>,
    exists_body: Bytes,
}

fn ser_sign<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    HistSummary::of(h, 1).serialize(s)
}

/// What a route load measured.
#[derive(Debug, Clone, Serialize)]
pub struct RouteLoadReport {
    pub route: Route,
    pub config: RouteLoadConfig,
    pub devices: usize,
    pub wall_ns: u64,
    pub requests: u64,
    /// Completed requests per second of wall time.
    pub throughput_per_s: f64,
    /// Open loop: requests that left more than 2 ms after their intended time.
    pub late_starts: u64,
    pub stats: RouteStats,
    /// Signing time (hash + HMAC) per request, in ns (summarised in µs in JSON).
    #[serde(rename = "signing_us", serialize_with = "ser_sign")]
    pub signing: Histogram<u64>,
    #[serde(skip)]
    start_wall: std::time::SystemTime,
}

impl RouteLoadReport {
    /// Headline latency (corrected in open loop) in µs.
    pub fn summary(&self) -> HistSummary {
        self.stats.summary()
    }

    /// The headline latency HdrHistogram (µs).
    pub fn histogram(&self) -> &Histogram<u64> {
        self.stats.headline()
    }

    /// Signing time summarised in µs.
    pub fn signing_summary(&self) -> HistSummary {
        HistSummary::of(&self.signing, 1)
    }

    /// Writes the standard HdrHistogram interval log, tagged by route.
    pub fn write_hdr_log<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        report::write_hdr_log(w, self.route.name(), &self.stats, self.start_wall)
    }
}

fn sid_of(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Mixes a run's level into its seed for `put-chunk` bodies (an odd constant, the golden ratio's).
const LEVEL_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// The `n`-th `put-chunk` body of a run at `level` (and its sid).
fn load_chunk(seed: u64, level: u64, n: u64) -> (Bytes, String) {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ level.wrapping_mul(LEVEL_MIX));
    r.set_stream(n);
    random_chunk(&mut r)
}

pub(crate) fn random_chunk(rng: &mut ChaCha8Rng) -> (Bytes, String) {
    let mut buf = vec![0u8; LOAD_CHUNK_BYTES];
    rng.fill_bytes(&mut buf);
    let sid = sid_of(&buf);
    (Bytes::from(buf), sid)
}

async fn put_chunk(dev: &Device, rec: &Recorder, body: Bytes, sid: &str) -> Result<(), LoadError> {
    let pq = format!("/v1/chunks/{sid}");
    dev.call(
        rec,
        Outgoing {
            body,
            body_sha256: Some(sid),
            content_type: Some("application/octet-stream"),
            ..Outgoing::new(ProtoRoute::PutChunk, &pq)
        },
        &[200, 201],
    )
    .await
    .map(|_| ())
}

/// A new one-chunk file version (body + path) for `post-version` under load.
pub(crate) fn version_body(
    dev: &Device,
    sid: &str,
    path: &str,
    nonce: String,
) -> (String, Vec<u8>) {
    let file_id = file_id_for(path);
    let manifest = serde_json::to_vec(&protocol::wire::ClientManifest {
        path: path.to_owned(),
        kind: "file".into(),
        size: LOAD_CHUNK_BYTES as u64,
        sha256: sid.to_owned(),
    })
    .expect("plain struct serialises");
    let sids = vec![sid.to_owned()];
    let version_id =
        protocol::version_id(&file_id, &[], &manifest, &sids).expect("generated ids are hex");
    let post = VersionPost {
        version_id,
        parents: vec![],
        sids,
        bytes: LOAD_CHUNK_BYTES as u64,
        domain_id: dev.domain_id().to_owned(),
        manifest_ct: base64::engine::general_purpose::STANDARD.encode(&manifest),
        manifest_nonce: nonce,
        deleted: false,
    };
    (
        format!("/v1/files/{file_id}/versions"),
        serde_json::to_vec(&post).expect("plain struct serialises"),
    )
}

async fn prepare(devices: &[Device], cfg: &RouteLoadConfig) -> Result<Prep, LoadError> {
    let mut prep = Prep::default();
    if cfg.route == Route::Livez || cfg.route == Route::PutChunk {
        return Ok(prep);
    }
    let rec = Recorder::new(false);
    let dev = &devices[0];
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(u64::MAX);
    for _ in 0..PREP_CHUNKS {
        let (body, sid) = random_chunk(&mut rng);
        put_chunk(dev, &rec, body, &sid).await?;
        prep.sids.push(sid);
    }
    if cfg.route == Route::Changes {
        for i in 0..PREP_VERSIONS {
            let path = format!("vaultbench-load/prep-{:016x}-{i}.md", cfg.seed);
            let (pq, body) =
                version_body(dev, &prep.sids[i % PREP_CHUNKS], &path, dev.random_hex(12));
            dev.call(
                &rec,
                Outgoing::post_json(ProtoRoute::PostVersion, &pq, body),
                &[200, 201],
            )
            .await?;
        }
    }
    let mut sids: Vec<String> = prep.sids.clone();
    while sids.len() < EXISTS_SIDS {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        sids.push(hex::encode(b));
    }
    prep.exists_body = Bytes::from(serde_json::to_vec(&SidsRequest { sids }).expect("serialises"));
    Ok(prep)
}

/// Shared state of one run's workers.
struct Run {
    route: Route,
    devices: Vec<Device>,
    prep: Prep,
    rec: Recorder,
    /// Unique per request across workers: names new files in `post-version` and picks the
    /// bytes of a `put-chunk` request.
    counter: AtomicU64,
    deadline: Instant,
    seed: u64,
    /// Tells this run's `put-chunk` bodies from another level's of the same seed.
    level: u64,
}

/// One request of the route, planned before it is signed and sent.
struct Planned {
    method: Method,
    path_and_query: Cow<'static, str>,
    body: Bytes,
    /// Hex SHA-256 of the body when known without hashing it again (a chunk's sid).
    body_sha256: Option<Cow<'static, str>>,
    content_type: Option<&'static str>,
}

impl Planned {
    fn get(path_and_query: impl Into<Cow<'static, str>>) -> Planned {
        Planned {
            method: Method::GET,
            path_and_query: path_and_query.into(),
            body: Bytes::new(),
            body_sha256: Some(Cow::Borrowed(protocol::sign::EMPTY_BODY_SHA256)),
            content_type: None,
        }
    }

    fn post_json(path_and_query: impl Into<Cow<'static, str>>, body: Bytes) -> Planned {
        Planned {
            method: Method::POST,
            body,
            body_sha256: None,
            content_type: Some("application/json"),
            ..Planned::get(path_and_query)
        }
    }
}

impl Run {
    /// The next request of the route for `dev`.
    fn plan(&self, dev: &Device, rng: &mut ChaCha8Rng) -> Planned {
        match self.route {
            Route::Livez => Planned::get("/livez"),
            Route::PutChunk => {
                // The n-th request's bytes depend on n and the level alone, not on which worker
                // sends it: the chunks a run stores, and so the server's renames, fsyncs and
                // directories, are the same whatever the interleaving (a worker's own stream
                // used to repeat the chunks an earlier level's worker of that index had stored).
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let (body, sid) = load_chunk(self.seed, self.level, n);
                Planned {
                    method: Method::PUT,
                    path_and_query: format!("/v1/chunks/{sid}").into(),
                    body,
                    body_sha256: Some(sid.into()),
                    content_type: Some("application/octet-stream"),
                }
            }
            Route::PostVersion => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let sid = &self.prep.sids[rng.next_u32() as usize % self.prep.sids.len()];
                let path = format!("vaultbench-load/{:016x}/{}/{n}.md", self.seed, dev.index());
                let (pq, body) = version_body(dev, sid, &path, dev.random_hex(12));
                Planned::post_json(pq, Bytes::from(body))
            }
            Route::Changes => Planned::get(format!("/v1/changes?since=0&limit={CHANGES_PAGE}")),
            Route::GetChunk => {
                let sid = &self.prep.sids[rng.next_u32() as usize % self.prep.sids.len()];
                Planned::get(format!("/v1/chunks/{sid}"))
            }
            Route::ChunksGet => {
                let k = self.prep.sids.len();
                let i = rng.next_u32() as usize;
                let sids = (0..protocol::limits::CLIENT_GET_BATCH)
                    .map(|j| self.prep.sids[(i + j) % k].clone())
                    .collect();
                let body = serde_json::to_vec(&SidsRequest { sids }).expect("serialises");
                Planned::post_json("/v1/chunks/get", Bytes::from(body))
            }
            Route::ChunksExists => {
                Planned::post_json("/v1/chunks/exists", self.prep.exists_body.clone())
            }
        }
    }

    /// The request as the client sends it, with a timeout that never runs past the drain
    /// grace after the deadline.
    fn outgoing<'a>(&self, p: &'a Planned, intended: Option<Instant>) -> Outgoing<'a> {
        let timeout = drive::request_timeout(REQUEST_TIMEOUT, self.deadline);
        Outgoing {
            route: self.route.protocol(),
            method: p.method.clone(),
            path_and_query: &p.path_and_query,
            body: p.body.clone(),
            body_sha256: p.body_sha256.as_deref(),
            content_type: p.content_type,
            signed: true,
            timeout,
            intended,
        }
    }

    /// Issues one closed-loop request over the worker's own blocking connection, on its
    /// thread.
    fn one_blocking(&self, dev: &Device, rng: &mut ChaCha8Rng, conn: &mut WorkerConn) {
        let p = self.plan(dev, rng);
        let _ = dev.send_blocking(&self.rec, conn, &self.outgoing(&p, None));
    }
}

impl drive::Worker for Run {
    type Conn = WorkerConn;

    /// Open loop: over the device's pooled client; closed loop: over the worker's own
    /// connection. Devices take turns by worker (or request) index.
    async fn one(
        &self,
        w: usize,
        rng: &mut ChaCha8Rng,
        conn: Option<&mut WorkerConn>,
        intended: Option<Instant>,
    ) {
        let dev = &self.devices[w % self.devices.len()];
        let p = self.plan(dev, rng);
        let out = self.outgoing(&p, intended);
        let _ = match conn {
            Some(c) => dev.send_lean(&self.rec, c, &out).await.map(|_| ()),
            None => dev.send(&self.rec, out).await.map(|_| ()),
        };
    }
}

/// Whether a closed loop of `in_flight` connections runs each on a blocking thread of its own:
/// when every connection can have a CPU of those this thread may run on
/// (`available_parallelism` follows the affinity mask the sample child pins the generator
/// to). A request then costs two system calls and no runtime work. With more connections than
/// CPUs the threads would queue for a CPU, and one epoll loop serves them for less.
pub fn blocking_workers(in_flight: usize) -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= in_flight
}

/// Runs one route load. Stops at `duration` or `max_requests`, whichever comes first;
/// requests still out `DRAIN_GRACE` after the duration are abandoned and counted as
/// timeouts.
pub async fn run_route_load(
    devices: &[Device],
    cfg: &RouteLoadConfig,
) -> Result<RouteLoadReport, LoadError> {
    let rec = Recorder::with_intervals(matches!(cfg.mode, Mode::Open { .. }));
    run_route_load_until(devices, cfg, rec, None).await
}

/// [`run_route_load`] into a recorder the caller holds (a Locust worker reads it every few
/// seconds while the run goes on; it must keep intervals, and be open-loop exactly when the
/// mode is), stopping early when `stop` turns true: no request starts after that, and the
/// requests still out get a short grace before they are abandoned.
pub async fn run_route_load_until(
    devices: &[Device],
    cfg: &RouteLoadConfig,
    rec: Recorder,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
) -> Result<RouteLoadReport, LoadError> {
    if devices.is_empty() {
        return Err(LoadError::Invalid {
            what: "devices".into(),
            reason: "at least one enrolled device is needed".into(),
        });
    }
    drive::check(cfg.duration, cfg.max_requests, cfg.mode).map_err(|e| LoadError::Invalid {
        what: e.what.into(),
        reason: e.reason.into(),
    })?;
    let open = matches!(cfg.mode, Mode::Open { .. });
    if rec.open_loop() != open {
        return Err(LoadError::Invalid {
            what: "recorder".into(),
            reason: "must be open-loop exactly when the mode is".into(),
        });
    }
    // `--duration` bounds preparation too: a target that hangs while the route's data is
    // prepared ends the run after the duration, not after every request's retries.
    let prep = tokio::time::timeout(cfg.duration, prepare(devices, cfg))
        .await
        .map_err(|_| LoadError::Transport {
            route: cfg.route.name().to_owned(),
            kind: "timeout",
            detail: format!(
                "preparing the route load did not finish within the run's duration ({})",
                contract::quote::duration(cfg.duration)
            ),
        })??;
    let t0 = rec.start();
    let run = Arc::new(Run {
        route: cfg.route,
        devices: devices.to_vec(),
        prep,
        rec: rec.clone(),
        counter: AtomicU64::new(0),
        deadline: t0 + cfg.duration,
        seed: cfg.seed,
        // A shard's devices start above 0: its `put-chunk` bodies are its own, not a copy
        // of another shard's (device 0's run keeps the level it always had).
        level: match cfg.mode {
            Mode::Closed { in_flight } => in_flight as u64,
            Mode::Open { rate_per_s, .. } => (1 << 63) | rate_per_s.to_bits() >> 1,
        } ^ (devices[0].index() as u64).wrapping_mul(SHARD_MIX),
    });
    let issued = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    // Blocking connections, shut down at the requests' hard stop.
    let mut slots: Vec<Arc<BlockingSlot>> = Vec::new();
    match cfg.mode {
        Mode::Closed { in_flight } if blocking_workers(in_flight) => {
            // One thread per connection, each sleeping in its socket's `recv`: the workers and
            // their nonce streams are made here, in worker order, as below.
            let conns: Vec<WorkerConn> = (0..in_flight)
                .map(|w| {
                    let slot = Arc::new(BlockingSlot::default());
                    slots.push(slot.clone());
                    WorkerConn::blocking(&run.devices[w % run.devices.len()], REQUEST_TIMEOUT, slot)
                })
                .collect();
            for (w, mut conn) in conns.into_iter().enumerate() {
                let (run, issued, max) = (run.clone(), issued.clone(), cfg.max_requests);
                let stop = stop.clone();
                let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
                std::thread::Builder::new()
                    .name(crate::WORKER_THREAD.to_owned())
                    .spawn(move || {
                        let dev = run.devices[w % run.devices.len()].clone();
                        let mut rng = ChaCha8Rng::seed_from_u64(run.seed);
                        rng.set_stream(w as u64);
                        while Instant::now() < run.deadline
                            && !drive::stopped(&stop)
                            && issued.fetch_add(1, Ordering::Relaxed) < max
                        {
                            run.one_blocking(&dev, &mut rng, &mut conn);
                        }
                        let _ = done_tx.send(());
                    })
                    .map_err(|e| LoadError::Invalid {
                        what: "worker thread".into(),
                        reason: format!("could not start one: {e}"),
                    })?;
                // The run waits for the thread through its channel (a panicked worker drops
                // it, which ends the wait too).
                set.spawn(async move {
                    let _ = done_rx.await;
                });
            }
        }
        mode => {
            // Each worker keeps one connection of its own, as wrk and oha do. They are made
            // in worker order, so each worker's nonce stream is fixed by the seed.
            let bounds = drive::Bounds {
                t0,
                deadline: run.deadline,
                max_requests: cfg.max_requests,
                seed: cfg.seed,
                stop: stop.clone(),
            };
            let devices = run.devices.clone();
            drive::run_mode(&run, &rec, mode, &bounds, |n| {
                (0..n)
                    .map(|w| WorkerConn::new(&devices[w % devices.len()]))
                    .collect()
            })
            .await;
        }
    }
    drive::drain(&mut set, run.deadline, &slots, &stop).await;
    let f = report::figures(&rec, t0, cfg.route.name(), open);
    Ok(RouteLoadReport {
        route: cfg.route,
        config: cfg.clone(),
        devices: devices.len(),
        wall_ns: f.wall_ns,
        requests: f.stats.requests,
        throughput_per_s: f.throughput_per_s,
        late_starts: f.measured.late_starts,
        stats: f.stats,
        signing: f.measured.signing,
        start_wall: f.measured.start_wall,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_durations_are_seconds() {
        let cfg = RouteLoadConfig {
            route: Route::Changes,
            mode: Mode::Closed { in_flight: 1 },
            duration: Duration::from_millis(1500),
            max_requests: 10,
            seed: 1,
        };
        let v = serde_json::to_value(&cfg).unwrap();
        assert_eq!(v["duration_s"], serde_json::json!(1.5));
        assert!(v.get("duration").is_none());
    }

    use super::*;

    /// A `put-chunk` body depends on the request's index and the run's level only: the chunks
    /// a run stores do not depend on which worker sent what, and one level never repeats
    /// another's (an earlier stream-per-worker scheme made the 4-in-flight step re-send some
    /// of the 1-in-flight step's chunks, timing-dependently, so its renames and fsyncs varied).
    #[test]
    fn put_chunk_bodies_depend_on_index_and_level_only() {
        let (a, sa) = load_chunk(7, 1, 3);
        let (b, sb) = load_chunk(7, 1, 3);
        assert_eq!((a.clone(), sa.clone()), (b, sb));
        assert_eq!(sa, sid_of(&a));
        let c1: std::collections::BTreeSet<String> =
            (0..500).map(|n| load_chunk(7, 1, n).1).collect();
        let c4: std::collections::BTreeSet<String> =
            (0..500).map(|n| load_chunk(7, 4, n).1).collect();
        assert_eq!(c1.len(), 500);
        assert_eq!(c4.len(), 500);
        assert!(c1.is_disjoint(&c4));
    }
    use crate::fake::{Script, start};
    use crate::protocols::obsync::client::nonce_rng;

    /// A target that accepts and never answers under load: blocking workers (as many
    /// connections as CPUs) and the async workers (more) alike end at the requests' hard stop,
    /// each counting the request it waited on as a timeout.
    #[tokio::test]
    async fn a_silent_target_ends_both_kinds_of_worker_at_the_hard_stop() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for in_flight in [1, cpus + 1] {
            assert_eq!(blocking_workers(in_flight), in_flight <= cpus);
            let (target, _t) = crate::protocols::obsync::client::tests::hanging_target();
            let dev = crate::protocols::obsync::client::tests::test_device(target);
            let cfg = RouteLoadConfig {
                route: Route::Livez,
                mode: Mode::Closed { in_flight },
                duration: Duration::from_millis(300),
                max_requests: 1000,
                seed: 1,
            };
            let t0 = Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(15), run_route_load(&[dev], &cfg))
                .await
                .expect("the run ended by itself")
                .expect("a run of counted failures");
            let took = t0.elapsed();
            assert!(
                took >= DRAIN_GRACE && took < DRAIN_GRACE + Duration::from_secs(2),
                "in flight {in_flight}: took {took:?}"
            );
            assert_eq!(r.requests, in_flight as u64, "in flight {in_flight}");
            assert_eq!(
                r.stats.status.get("timeout").copied(),
                Some(in_flight as u64),
                "in flight {in_flight}: {:?}",
                r.stats.status
            );
        }
    }

    /// A target that accepts and never answers while the route's data is prepared: the run
    /// ends near its duration, not after three 30 s retries per request.
    #[tokio::test]
    async fn duration_bounds_a_hung_preparation() {
        let (target, _t) = crate::protocols::obsync::client::tests::hanging_target();
        let dev = crate::protocols::obsync::client::tests::test_device(target);
        let cfg = RouteLoadConfig {
            route: Route::Changes,
            mode: Mode::Closed { in_flight: 1 },
            duration: Duration::from_secs(1),
            max_requests: 10,
            seed: 1,
        };
        let t0 = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(15), run_route_load(&[dev], &cfg))
            .await
            .expect("the run ended by itself");
        let took = t0.elapsed();
        let e = r.unwrap_err();
        assert!(e.to_string().contains("duration"), "{e}");
        assert!(took < Duration::from_millis(1800), "{took:?}");
    }

    fn device(addr: std::net::SocketAddr) -> Device {
        let target = crate::Target::parse(&format!("http://{addr}"), false).unwrap();
        let creds = protocol::sign::DeviceCredentials {
            device_id: "00112233445566778899aabbccddeeff".into(),
            secret: [1; 32],
        };
        Device::new(target, creds, 0, String::new(), nonce_rng(1, 0, 0))
    }

    /// Little's law on a closed loop: throughput x mean latency = requests in flight.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn littles_law_holds_on_a_closed_loop() {
        let (addr, _) = start(Script {
            service: Duration::from_millis(10),
            stall: None,
            fail_after: None,
        })
        .await;
        let cfg = RouteLoadConfig {
            route: Route::Livez,
            mode: Mode::Closed { in_flight: 8 },
            duration: Duration::from_millis(1200),
            max_requests: 1_000_000,
            seed: 3,
        };
        let r = run_route_load(&[device(addr)], &cfg).await.unwrap();
        assert_eq!(r.stats.errors(), 0, "{:?}", r.stats.status);
        let mean_s = r.stats.latency.mean() / 1e6;
        let l = r.throughput_per_s * mean_s;
        assert!(
            (l - 8.0).abs() / 8.0 < 0.15,
            "throughput {} x mean {mean_s} = {l}",
            r.throughput_per_s
        );
        // And the service time is what the fake scripted (10 ms plus loopback overhead).
        assert!(
            r.summary().p50_us >= 10_000.0 && r.summary().p50_us < 30_000.0,
            "{:?}",
            r.summary()
        );
        assert_eq!(r.signing.len(), r.requests);
    }

    /// A target that stops answering for 300 ms: the open loop's corrected p99 shows the
    /// stall; the uncorrected p99 (what a naive generator reports) does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stall_shows_in_corrected_p99_not_only_uncorrected() {
        let (addr, _) = start(Script {
            service: Duration::from_millis(1),
            stall: Some((Duration::from_millis(500), Duration::from_millis(300))),
            fail_after: None,
        })
        .await;
        let cfg = RouteLoadConfig {
            route: Route::Livez,
            mode: Mode::Open {
                rate_per_s: 500.0,
                max_in_flight: 2,
            },
            duration: Duration::from_millis(1500),
            max_requests: 1_000_000,
            seed: 3,
        };
        let r = run_route_load(&[device(addr)], &cfg).await.unwrap();
        let corrected = HistSummary::of(r.stats.corrected.as_ref().unwrap(), 1000);
        let uncorrected = HistSummary::of(&r.stats.latency, 1000);
        // 750 intended; a loaded machine may not catch up with all of them before the end.
        assert!(r.requests >= 400, "{}", r.requests);
        assert!(corrected.p99_us >= 200_000.0, "corrected {corrected:?}");
        assert!(uncorrected.p99_us < 50_000.0, "uncorrected {uncorrected:?}");
        // The stall is in the uncorrected max (the few requests that were held) ...
        assert!(
            uncorrected.max_us >= 250_000.0,
            "uncorrected {uncorrected:?}"
        );
        // ... and the requests that could not leave on time were counted.
        assert!(r.late_starts >= 100, "late starts {}", r.late_starts);
    }

    #[tokio::test]
    async fn bounds_stop_the_run_and_bad_configs_are_refused() {
        let (addr, _) = start(Script {
            service: Duration::ZERO,
            stall: None,
            fail_after: None,
        })
        .await;
        let dev = device(addr);
        let mut cfg = RouteLoadConfig {
            route: Route::Livez,
            mode: Mode::Closed { in_flight: 4 },
            duration: Duration::from_secs(30),
            max_requests: 50,
            seed: 1,
        };
        let t = Instant::now();
        let r = run_route_load(std::slice::from_ref(&dev), &cfg)
            .await
            .unwrap();
        assert_eq!(r.requests, 50);
        assert!(t.elapsed() < Duration::from_secs(5));
        cfg.mode = Mode::Closed { in_flight: 0 };
        assert!(
            run_route_load(std::slice::from_ref(&dev), &cfg)
                .await
                .is_err()
        );
        cfg.mode = Mode::Open {
            rate_per_s: 0.0,
            max_in_flight: 1,
        };
        let e = run_route_load(std::slice::from_ref(&dev), &cfg)
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("rate:"), "{e}");
    }

    /// A target that starts answering 5xx mid-run: counted per status, the run ends on time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mid_run_5xx_is_counted_and_the_run_ends_on_time() {
        let (addr, _) = start(Script {
            service: Duration::from_millis(1),
            stall: None,
            fail_after: Some(Duration::from_millis(200)),
        })
        .await;
        let cfg = RouteLoadConfig {
            route: Route::Livez,
            mode: Mode::Closed { in_flight: 2 },
            duration: Duration::from_millis(500),
            max_requests: 1_000_000,
            seed: 1,
        };
        let t = Instant::now();
        let r = run_route_load(&[device(addr)], &cfg).await.unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        let ok = r.stats.status.get("200").copied().unwrap_or(0);
        let failed = r.stats.status.get("503").copied().unwrap_or(0);
        assert!(ok > 0 && failed > 0, "{:?}", r.stats.status);
        assert_eq!(ok + failed, r.requests);
        assert_eq!(r.stats.errors(), failed);
        // Nothing was counted long after the 500 ms run ended.
        assert!(r.stats.per_second.len() <= 2, "{:?}", r.stats.per_second);
    }

    /// A dead target: every request is counted as a transport error, the run still ends
    /// on time, and nothing aborts.
    #[tokio::test]
    async fn unreachable_target_is_counted_not_fatal() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let cfg = RouteLoadConfig {
            route: Route::Livez,
            mode: Mode::Closed { in_flight: 2 },
            duration: Duration::from_millis(300),
            max_requests: 1000,
            seed: 1,
        };
        let t = Instant::now();
        let r = run_route_load(&[device(addr)], &cfg).await.unwrap();
        assert!(t.elapsed() < Duration::from_secs(3));
        assert!(r.requests > 0);
        assert_eq!(r.stats.ok(), 0);
        assert!(
            r.stats.status.contains_key("connect"),
            "{:?}",
            r.stats.status
        );
    }
}

//! The generator as a Locust worker: a ZeroMQ DEALER connected to the master's ROUTER
//! (identity = the worker's `client_id`, as Locust's `rpc.Client` sets it), Locust's messages
//! (`client_ready`, `ack`, `spawn`, `spawning`, `spawning_complete`, `stats` every 3 s,
//! `heartbeat` every 1 s, `stop`, `client_stopped`, `quit`), and the route load in between.
//!
//! Every wait has a deadline: the `ack` within [`CONNECT_DEADLINE`], a heartbeat answer
//! within the configured liveness (the master only answers heartbeats, so silence means it
//! is gone), a stopped run within `crate::protocols::obsync::route::STOP_GRACE` and a little more.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::{mpsc, watch};
use zeromq::{Socket, SocketRecv, SocketSend};

use super::message::{self, FromMaster};
use super::report::Reporter;
use crate::protocols::obsync::client::Device;
use crate::protocols::obsync::route::{Mode, Route, RouteLoadConfig, run_route_load_until};
use crate::routeload::STOP_GRACE;
use crate::stats::{Measured, Recorder, write_interval_log};

/// Locust's `HEARTBEAT_INTERVAL`.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// Locust's `WORKER_REPORT_INTERVAL`.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(3);
/// How long the master has to answer `client_ready` (Locust's own worker waits 5 s per try,
/// 60 tries; a test or a job that starts the master first needs far less).
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(30);
/// Longest single run between two `spawn`s: a day, `--duration`'s own cap.
const RUN_CAP: Duration = contract::parse::MAX_DURATION;

/// Why the worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The master said `quit`.
    Quit,
    /// No heartbeat answer for longer than the liveness: the load was stopped.
    MasterGone { silent: Duration },
}

/// A worker's failure: one line naming the master and what it did.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("locust master {master}: {detail}")]
    Master { master: String, detail: String },
    #[error("locust master {master}: {err}")]
    Message {
        master: String,
        err: message::MessageError,
    },
    #[error(transparent)]
    Load(#[from] crate::LoadError),
    #[error("--hdr-log {}: {err}", path.display())]
    Log { path: PathBuf, err: std::io::Error },
}

/// What the worker runs.
pub struct WorkerConfig {
    /// `HOST:PORT` of the master's `--master-bind-port`.
    pub master: String,
    pub route: Route,
    pub seed: u64,
    /// Silence from the master longer than this ends the worker ([`Outcome::MasterGone`]).
    pub liveness: Duration,
    /// Rewritten (atomically) at every report with what that report covered, so even a
    /// killed worker leaves the log of what the master was told.
    pub hdr_log: Option<PathBuf>,
    /// This process's resident set size in bytes, for the heartbeat.
    pub rss_bytes: Arc<dyn Fn() -> u64 + Send + Sync>,
}

/// A connected worker that has its index but no devices yet.
pub struct Connected {
    master: String,
    client_id: String,
    out: mpsc::Sender<Vec<u8>>,
    inbox: mpsc::Receiver<Result<FromMaster, message::MessageError>>,
    last_heard: Arc<Mutex<Instant>>,
    state: Arc<Mutex<&'static str>>,
    io: tokio::task::JoinHandle<()>,
    heart: tokio::task::JoinHandle<()>,
    /// The index the master assigned (`None` from a master older than 2.10.3).
    pub index: Option<u32>,
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.io.abort();
        self.heart.abort();
    }
}

fn master_err(master: &str, detail: impl Into<String>) -> WorkerError {
    WorkerError::Master {
        master: master.to_owned(),
        detail: detail.into(),
    }
}

/// The `client_id` Locust's workers use: hostname + `_` + 32 hex digits (here from the
/// operating system, so two workers on one host differ).
fn client_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "vaultbench".into());
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read as _;
        let _ = f.read_exact(&mut b);
    }
    format!("{host}_{}", hex::encode(b))
}

#[derive(Serialize)]
struct Heartbeat {
    state: &'static str,
    current_cpu_usage: f64,
    current_memory_usage: u64,
}

#[derive(Serialize)]
struct SpawningComplete<'a> {
    user_classes_count: &'a BTreeMap<String, u64>,
    user_count: u64,
}

/// CPU time of this process so far (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we own; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Connects to the master, says `client_ready` (once a second) until it answers `ack` or
/// [`CONNECT_DEADLINE`] passes, and starts the heartbeat.
pub async fn connect(cfg: &WorkerConfig) -> Result<Connected, WorkerError> {
    let master = cfg.master.clone();
    let id = client_id();
    let mut opts = zeromq::SocketOptions::default();
    let ident = zeromq::util::PeerIdentity::try_from(id.as_bytes().to_vec())
        .map_err(|e| master_err(&master, format!("worker identity {id:?}: {e}")))?;
    opts.peer_identity(ident);
    let mut sock = zeromq::DealerSocket::with_options(opts);
    let endpoint = format!("tcp://{master}");
    tokio::time::timeout(CONNECT_DEADLINE, sock.connect(&endpoint))
        .await
        .map_err(|_| {
            master_err(
                &master,
                format!("no connection within {CONNECT_DEADLINE:?}"),
            )
        })?
        .map_err(|e| master_err(&master, format!("cannot connect to {endpoint}: {e}")))?;
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let (in_tx, in_rx) = mpsc::channel(64);
    let last_heard = Arc::new(Mutex::new(Instant::now()));
    let heard = last_heard.clone();
    // One task owns the socket: it sends what the others queue, and passes on what arrives.
    // One task owns the socket: it sends what the others queue, and passes on what arrives.
    // It outlives a vanished master (a failed send is dropped, a failed receive retried after
    // a pause): the heartbeat liveness, not a socket error, decides that the master is gone.
    let io = tokio::spawn(async move {
        loop {
            tokio::select! {
                m = sock.recv() => {
                    let Ok(m) = m else {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    *heard.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                    let bytes: Vec<u8> = m.into_vec().into_iter().last().map(|b| b.to_vec()).unwrap_or_default();
                    if in_tx.send(message::decode(&bytes)).await.is_err() {
                        break;
                    }
                }
                o = out_rx.recv() => {
                    let Some(o) = o else { break };
                    let _ = sock.send(zeromq::ZmqMessage::from(o)).await;
                }
            }
        }
    });
    let state = Arc::new(Mutex::new("ready"));
    let mut c = Connected {
        master: master.clone(),
        client_id: id,
        out: out_tx,
        inbox: in_rx,
        last_heard,
        state: state.clone(),
        io,
        heart: tokio::spawn(async {}),
        index: None,
    };
    // client_ready's data is Locust's version; -1 is what non-Python workers send (the
    // master accepts it without a version warning).
    let deadline = Instant::now() + CONNECT_DEADLINE;
    'ack: loop {
        c.send("client_ready", &-1i64).await?;
        let retry = (Instant::now() + Duration::from_secs(1)).min(deadline);
        loop {
            match tokio::time::timeout_at(retry.into(), c.inbox.recv()).await {
                Err(_) if Instant::now() >= deadline => {
                    return Err(master_err(
                        &master,
                        format!("no ack to client_ready within {CONNECT_DEADLINE:?}"),
                    ));
                }
                Err(_) => continue 'ack,
                Ok(None) => return Err(master_err(&master, "the connection closed")),
                Ok(Some(Err(e))) => {
                    return Err(WorkerError::Message {
                        master: master.clone(),
                        err: e,
                    });
                }
                Ok(Some(Ok(FromMaster::Ack { index }))) => {
                    c.index = index;
                    break 'ack;
                }
                Ok(Some(Ok(_))) => {}
            }
        }
    }
    let (out, client, rss) = (c.out.clone(), c.client_id.clone(), cfg.rss_bytes.clone());
    c.heart = tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
        let (mut cpu0, mut t0) = (cpu_time(), Instant::now());
        loop {
            tick.tick().await;
            let (cpu, t) = (cpu_time(), Instant::now());
            let share = (cpu.saturating_sub(cpu0)).as_secs_f64()
                / t.duration_since(t0).as_secs_f64().max(1e-3);
            (cpu0, t0) = (cpu, t);
            let hb = Heartbeat {
                state: *state.lock().unwrap_or_else(|p| p.into_inner()),
                current_cpu_usage: (share * 100.0 * 10.0).round() / 10.0,
                current_memory_usage: rss(),
            };
            if out
                .send(message::encode("heartbeat", &hb, &client))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    *c.last_heard.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    Ok(c)
}

/// One run of the route with the users of one `spawn`.
struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), crate::LoadError>>,
}

impl Connected {
    async fn send<T: Serialize>(&self, kind: &str, data: &T) -> Result<(), WorkerError> {
        self.out
            .send(message::encode(kind, data, &self.client_id))
            .await
            .map_err(|_| master_err(&self.master, "the connection closed"))
    }

    /// Waits (at most half a second, the master's own wait for a last report) until the
    /// socket task has taken every queued message, and a moment for it to be written.
    async fn flush(&self) {
        let end = Instant::now() + Duration::from_millis(500);
        while self.out.capacity() < self.out.max_capacity() && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    fn set_state(&self, s: &'static str) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    fn silent(&self) -> Duration {
        self.last_heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// Runs the worker over `devices` (user `u` sends from `devices[u % len]`) until the
    /// master says `quit` or goes silent.
    pub async fn run(
        mut self,
        devices: Vec<Device>,
        cfg: &WorkerConfig,
    ) -> Result<Outcome, WorkerError> {
        if devices.is_empty() {
            return Err(master_err(&self.master, "no devices to run users on"));
        }
        let methods = BTreeMap::from([(
            cfg.route.name().to_owned(),
            cfg.route.protocol().method().as_str().to_owned(),
        )]);
        let mut reporter = Reporter::new(methods);
        let mut recorder: Option<Recorder> = None;
        let mut running: Option<Running> = None;
        let mut classes: BTreeMap<String, u64> = BTreeMap::new();
        let mut users = 0u64;
        let mut last_spawn = f64::NEG_INFINITY;
        let mut report_tick = tokio::time::interval(REPORT_INTERVAL);
        report_tick.tick().await;
        let mut live_tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tokio::select! {
                m = self.inbox.recv() => {
                    let m = match m {
                        None => {
                            stop_run(&mut running).await;
                            return Ok(Outcome::MasterGone { silent: self.silent() });
                        }
                        Some(Err(e)) => {
                            stop_run(&mut running).await;
                            return Err(WorkerError::Message { master: self.master.clone(), err: e });
                        }
                        Some(Ok(m)) => m,
                    };
                    match m {
                        FromMaster::Spawn { timestamp, users: n, user_classes_count } => {
                            self.send("spawning", &None::<()>).await?;
                            if timestamp <= last_spawn {
                                continue;
                            }
                            last_spawn = timestamp;
                            self.set_state("spawning");
                            stop_run(&mut running).await;
                            let rec = recorder.get_or_insert_with(|| Recorder::with_intervals(false)).clone();
                            if n > 0 {
                                running = Some(start_run(&devices, cfg, n, rec));
                            }
                            users = n;
                            classes = user_classes_count;
                            self.send("spawning_complete", &SpawningComplete { user_classes_count: &classes, user_count: users }).await?;
                            self.set_state("running");
                        }
                        FromMaster::Stop => {
                            stop_run(&mut running).await;
                            users = 0;
                            classes.values_mut().for_each(|v| *v = 0);
                            self.report(&mut reporter, recorder.as_ref(), &classes, 0, cfg, false).await?;
                            self.send("client_stopped", &None::<()>).await?;
                            self.set_state("ready");
                            self.send("client_ready", &-1i64).await?;
                        }
                        FromMaster::Quit => {
                            // The master waits half a second for the last report: send it
                            // first, from what is counted now, then stop.
                            if let Some(r) = &running {
                                let _ = r.stop.send(true);
                            }
                            self.report(&mut reporter, recorder.as_ref(), &classes, users, cfg, true).await?;
                            self.flush().await;
                            stop_run(&mut running).await;
                            return Ok(Outcome::Quit);
                        }
                        FromMaster::Reconnect => {
                            self.send("client_ready", &-1i64).await?;
                        }
                        FromMaster::Ack { .. } | FromMaster::Heartbeat | FromMaster::Other(_) => {}
                    }
                }
                _ = report_tick.tick() => {
                    self.report(&mut reporter, recorder.as_ref(), &classes, users, cfg, false).await?;
                }
                _ = live_tick.tick() => {
                    let silent = self.silent();
                    if silent > cfg.liveness {
                        stop_run(&mut running).await;
                        // The log keeps what was last reported; nothing after it.
                        return Ok(Outcome::MasterGone { silent });
                    }
                }
            }
        }
    }

    /// Writes the interval log of everything counted so far and sends the stats since the
    /// previous report. Usually the log goes first: a worker killed between the two has the
    /// master's count in its log or one report more, never less. The last report (`last`, on
    /// `quit`) is sent first and the log of the same snapshot written after, because the
    /// master waits only half a second for it.
    async fn report(
        &self,
        reporter: &mut Reporter,
        rec: Option<&Recorder>,
        classes: &BTreeMap<String, u64>,
        users: u64,
        cfg: &WorkerConfig,
        last: bool,
    ) -> Result<(), WorkerError> {
        let m = snapshot(rec);
        if !last {
            write_log(&m, rec, cfg)?;
        }
        let data = reporter.report(&m, SystemTime::now(), classes, users);
        let sent = self.send("stats", &data).await;
        if last {
            write_log(&m, rec, cfg)?;
        }
        sent
    }
}

fn snapshot(rec: Option<&Recorder>) -> Measured {
    match rec {
        Some(r) => r.snapshot(),
        None => Measured {
            routes: BTreeMap::new(),
            signing: crate::stats::sign_histogram(),
            late_starts: 0,
            start_wall: SystemTime::now(),
        },
    }
}

fn write_log(m: &Measured, rec: Option<&Recorder>, cfg: &WorkerConfig) -> Result<(), WorkerError> {
    if let (Some(path), Some(_)) = (&cfg.hdr_log, rec) {
        let mut buf = Vec::new();
        write_interval_log(&mut buf, m.start_wall, &m.routes)
            .and_then(|_| durable::write_atomic(path, &buf, durable::SHARED))
            .map_err(|source| WorkerError::Log {
                path: path.clone(),
                err: source,
            })?;
    }
    Ok(())
}

fn start_run(devices: &[Device], cfg: &WorkerConfig, users: u64, rec: Recorder) -> Running {
    let n = users as usize;
    let devs: Vec<Device> = devices.iter().take(n).cloned().collect();
    let run_cfg = RouteLoadConfig {
        route: cfg.route,
        mode: Mode::Closed { in_flight: n },
        duration: RUN_CAP,
        max_requests: u64::MAX,
        seed: cfg.seed,
    };
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        run_route_load_until(&devs, &run_cfg, rec, Some(stop_rx))
            .await
            .map(|_| ())
    });
    Running { stop, task }
}

/// Stops a run and waits for it: no request starts after this, requests still out get
/// [`STOP_GRACE`]; a run that still has not ended a second later is aborted.
async fn stop_run(running: &mut Option<Running>) {
    let Some(mut r) = running.take() else {
        return;
    };
    let _ = r.stop.send(true);
    let bound = STOP_GRACE + Duration::from_secs(1);
    if tokio::time::timeout(bound, &mut r.task).await.is_err() {
        r.task.abort();
    }
}

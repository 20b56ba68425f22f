//! Paired route load: the same route driven against two servers (A and B) that are up at
//! once, alternating in slices that never overlap in time, so host drift lands on both arms.
//!
//! At 1 in flight a slice is one request: A, B, B, A, A, B, … (the order within a pair
//! alternates, so neither arm always runs first after the other). At N in flight every slice
//! is N connections each sending `slice` requests to one arm, then the same to the other; the
//! connections meet at a barrier between the halves, so the arms never overlap. Each half's
//! value is the median latency of its requests: one pair per slice.
//!
//! Both arms plan the same requests from the same seed (the route's own request plan), so the
//! work is the same; each arm has its own devices, its own connections and its own recorder.

use std::sync::{Barrier, Mutex};

use super::*;

/// One paired route load.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedRouteConfig {
    pub route: Route,
    pub in_flight: usize,
    /// Requests per arm in all (fixed work: both arms send exactly this many).
    pub requests: u64,
    /// Requests each connection sends to one arm before the other arm's turn. 1 at one in
    /// flight; larger at N in flight so a half is not dominated by its connections' start.
    pub slice: u64,
    /// Bound of the whole paired run (both arms); requests still out then are timeouts.
    pub duration: Duration,
    pub seed: u64,
}

/// The slice length used at `in_flight` connections: one request at 1 in flight (per-request
/// alternation), else 8 requests per connection, so a half of N connections holds 8·N
/// requests and its median rests on more than the few requests of its ramp-up and drain
/// (the first and last request of each connection overlap the barrier wait).
pub fn default_slice(in_flight: usize) -> u64 {
    if in_flight <= 1 { 1 } else { 8 }
}

/// What a paired route load measured.
#[derive(Debug, Clone)]
pub struct PairedRouteReport {
    pub route: Route,
    pub config: PairedRouteConfig,
    pub wall_ns: u64,
    /// Each arm's stats, as a single run's (their histograms hold every request).
    pub a: RouteStats,
    pub b: RouteStats,
    /// Per slice, in time order: (A's median latency µs, B's median latency µs). Slices with a
    /// failed request in either arm are left out (the failures are in the arms' stats).
    pub pairs: Vec<(f64, f64)>,
    /// Which arm ran first in each pair (true: A).
    pub a_first: Vec<bool>,
}

/// The arm that runs first in slice `s`: A, B, B, A, A, B, B, A, … (ABBA).
pub fn a_first_in(s: u64) -> bool {
    matches!(s % 4, 0 | 3)
}

/// Accumulates the current slice's latencies of each arm, and the finished pairs.
#[derive(Default)]
struct Acc {
    a: Vec<f64>,
    b: Vec<f64>,
    failed: bool,
    pairs: Vec<(f64, f64)>,
    a_first: Vec<bool>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn new_run(devices: &[Device], cfg: &PairedRouteConfig, prep: Prep, deadline: Instant) -> Run {
    Run {
        route: cfg.route,
        devices: devices.to_vec(),
        prep,
        rec: Recorder::new(false),
        counter: AtomicU64::new(0),
        deadline,
        seed: cfg.seed,
        level: cfg.in_flight as u64,
    }
}

fn empty_stats() -> RouteStats {
    RouteStats {
        requests: 0,
        status: Default::default(),
        bytes_sent: 0,
        bytes_received: 0,
        latency: crate::stats::latency_histogram(),
        corrected: None,
        per_second: vec![],
        intervals: vec![],
        intervals_uncorrected: vec![],
    }
}

/// Runs one paired route load against A's and B's devices (each enrolled on its own server).
/// Stops when both arms have sent `requests` or at `duration`, whichever comes first.
pub async fn run_paired_route_load(
    a_devices: &[Device],
    b_devices: &[Device],
    cfg: &PairedRouteConfig,
) -> Result<PairedRouteReport, LoadError> {
    let invalid = |what: &str, reason: &str| LoadError::Invalid {
        what: what.into(),
        reason: reason.into(),
    };
    if a_devices.is_empty() || b_devices.is_empty() {
        return Err(invalid(
            "devices",
            "each arm needs at least one enrolled device",
        ));
    }
    if cfg.in_flight == 0 {
        return Err(invalid("in-flight", "must be at least 1"));
    }
    if cfg.slice == 0 {
        return Err(invalid("slice", "must be at least 1"));
    }
    if cfg.requests == 0 {
        return Err(invalid("requests", "must be at least 1"));
    }
    if cfg.duration.is_zero() {
        return Err(invalid("duration", "must be more than 0"));
    }
    let single = RouteLoadConfig {
        route: cfg.route,
        mode: Mode::Closed {
            in_flight: cfg.in_flight,
        },
        duration: cfg.duration,
        max_requests: cfg.requests,
        seed: cfg.seed,
    };
    let prep_both = async {
        let pa = prepare(a_devices, &single).await?;
        let pb = prepare(b_devices, &single).await?;
        Ok::<_, LoadError>((pa, pb))
    };
    let (pa, pb) = tokio::time::timeout(cfg.duration, prep_both)
        .await
        .map_err(|_| LoadError::Transport {
            route: cfg.route.name().to_owned(),
            kind: "timeout",
            detail: format!(
                "preparing the paired route load did not finish within the run's duration ({})",
                contract::quote::duration(cfg.duration)
            ),
        })??;
    let t0 = Instant::now();
    let deadline = t0 + cfg.duration;
    let runs = Arc::new((
        new_run(a_devices, cfg, pa, deadline),
        new_run(b_devices, cfg, pb, deadline),
    ));
    let n = cfg.in_flight;
    let per_slice = cfg.slice * n as u64;
    let slices = cfg.requests.div_ceil(per_slice);
    let barrier = Arc::new(Barrier::new(n));
    let acc = Arc::new(Mutex::new(Acc::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut slots = Vec::new();
    let mut waits = Vec::new();
    for w in 0..n {
        let slot_a = Arc::new(BlockingSlot::default());
        let slot_b = Arc::new(BlockingSlot::default());
        slots.push(slot_a.clone());
        slots.push(slot_b.clone());
        let dev_a = a_devices[w % a_devices.len()].clone();
        let dev_b = b_devices[w % b_devices.len()].clone();
        let mut conn_a = WorkerConn::blocking(&dev_a, REQUEST_TIMEOUT, slot_a);
        let mut conn_b = WorkerConn::blocking(&dev_b, REQUEST_TIMEOUT, slot_b);
        let (runs, barrier, acc, stop) = (runs.clone(), barrier.clone(), acc.clone(), stop.clone());
        let (slice, total) = (cfg.slice, cfg.requests);
        let seed = cfg.seed;
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(crate::WORKER_THREAD.to_owned())
            .spawn(move || {
                // The same request stream for both arms: one rng per arm from the same seed.
                let mut rng_a = ChaCha8Rng::seed_from_u64(seed);
                rng_a.set_stream(w as u64);
                let mut rng_b = rng_a.clone();
                let (run_a, run_b) = (&runs.0, &runs.1);
                let mut mine = Vec::with_capacity(slice as usize);
                for s in 0..slices {
                    // Every connection takes the same decision to go on or stop.
                    if barrier.wait().is_leader() && Instant::now() >= deadline {
                        stop.store(true, Ordering::SeqCst);
                    }
                    barrier.wait();
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    // This connection's share of the slice (the last slice may be short).
                    let start = s * per_slice + w as u64 * slice;
                    let count = slice.min(total.saturating_sub(start));
                    let a_first = a_first_in(s);
                    for half in 0..2 {
                        let is_a = (half == 0) == a_first;
                        mine.clear();
                        let mut failed = false;
                        for _ in 0..count {
                            let t = Instant::now();
                            let ok = if is_a {
                                let p = run_a.plan(&dev_a, &mut rng_a);
                                dev_a
                                    .send_blocking(
                                        &run_a.rec,
                                        &mut conn_a,
                                        &run_a.outgoing(&p, None),
                                    )
                                    .is_ok_and(|st| (200..300).contains(&st))
                            } else {
                                let p = run_b.plan(&dev_b, &mut rng_b);
                                dev_b
                                    .send_blocking(
                                        &run_b.rec,
                                        &mut conn_b,
                                        &run_b.outgoing(&p, None),
                                    )
                                    .is_ok_and(|st| (200..300).contains(&st))
                            };
                            failed |= !ok;
                            mine.push(t.elapsed().as_secs_f64() * 1e6);
                        }
                        {
                            let mut g = acc.lock().unwrap_or_else(|e| e.into_inner());
                            g.failed |= failed;
                            if is_a {
                                g.a.extend_from_slice(&mine);
                            } else {
                                g.b.extend_from_slice(&mine);
                            }
                        }
                        // The other arm's half starts when every connection has finished this one.
                        barrier.wait();
                    }
                    let mut g = acc.lock().unwrap_or_else(|e| e.into_inner());
                    if !g.a.is_empty() && !g.b.is_empty() {
                        // The last connection to get here closes the slice.
                        let (mut va, mut vb) = (std::mem::take(&mut g.a), std::mem::take(&mut g.b));
                        let failed = std::mem::take(&mut g.failed);
                        if !failed {
                            let pair = (median(&mut va), median(&mut vb));
                            g.pairs.push(pair);
                            g.a_first.push(a_first);
                        }
                    }
                }
                let _ = done_tx.send(());
            })
            .map_err(|e| LoadError::Invalid {
                what: "worker thread".into(),
                reason: format!("could not start one: {e}"),
            })?;
        waits.push(done_rx);
    }
    // At the requests' hard stop the connections are shut down (a blocked `recv` returns), so
    // no thread outlives the run's bound by more than the drain grace.
    let hard_stop = deadline + DRAIN_GRACE;
    for rx in waits {
        tokio::select! {
            _ = rx => {}
            _ = tokio::time::sleep_until(hard_stop.into()) => {
                slots.iter().for_each(|s| s.shut_down());
            }
        }
    }
    let wall = t0.elapsed();
    let stats_of = |run: &Run| {
        run.rec
            .snapshot()
            .routes
            .get(cfg.route.name())
            .cloned()
            .unwrap_or_else(empty_stats)
    };
    let (a, b) = (stats_of(&runs.0), stats_of(&runs.1));
    let g = acc.lock().unwrap_or_else(|e| e.into_inner());
    Ok(PairedRouteReport {
        route: cfg.route,
        config: cfg.clone(),
        wall_ns: wall.as_nanos() as u64,
        a,
        b,
        pairs: g.pairs.clone(),
        a_first: g.a_first.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_arm_follows_abba() {
        let firsts: Vec<bool> = (0..8).map(a_first_in).collect();
        assert_eq!(firsts, [true, false, false, true, true, false, false, true]);
    }

    #[test]
    fn slices_are_one_request_at_one_in_flight() {
        assert_eq!(default_slice(1), 1);
        assert!(default_slice(4) > 1);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}

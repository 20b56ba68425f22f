//! The route-load driver every protocol shares: the config check, the closed loop (each
//! worker on its own connection), the open loop (a fixed rate, latency from the intended send
//! time, late starts counted), the drain at the hard stop and the route's figures. A protocol
//! supplies only its [`Worker`]: how one request of the route is planned and sent.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{DRAIN_GRACE, LATE_START, Mode, STOP_GRACE};
use crate::h1::BlockingSlot;
use crate::stats::{Measured, Recorder, RouteStats};

/// One protocol's part of a route load.
pub(crate) trait Worker: Send + Sync + 'static {
    /// A closed-loop worker's own connection.
    type Conn: Send + 'static;

    /// One request of the route: in closed loop by worker `w` on its own connection, in open
    /// loop (`conn` is `None`) as the `w`-th request, sent at `intended`. A failure is counted
    /// by the recorder, never returned.
    fn one(
        &self,
        w: usize,
        rng: &mut ChaCha8Rng,
        conn: Option<&mut Self::Conn>,
        intended: Option<Instant>,
    ) -> impl Future<Output = ()> + Send;
}

/// A stop from outside the run (a Locust `stop`, or its master gone): once it reads true, no
/// request starts, and the requests still out get [`STOP_GRACE`] instead of the drain.
pub(crate) type Stop = Option<tokio::sync::watch::Receiver<bool>>;

/// Whether `stop` has been turned on.
pub(crate) fn stopped(stop: &Stop) -> bool {
    stop.as_ref().is_some_and(|s| *s.borrow())
}

/// A config the driver refuses: what, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub what: &'static str,
    pub reason: &'static str,
}

/// Checks the bounds and the mode every route load shares.
pub(crate) fn check(duration: Duration, max_requests: u64, mode: Mode) -> Result<(), Invalid> {
    let invalid = |what, reason| Err(Invalid { what, reason });
    if duration.is_zero() {
        return invalid("duration", "must be more than 0");
    }
    if max_requests == 0 {
        return invalid("max-requests", "must be at least 1");
    }
    match mode {
        Mode::Closed { in_flight: 0 } => invalid("in-flight", "must be at least 1"),
        Mode::Open { rate_per_s, .. } if !(rate_per_s > 0.0 && rate_per_s.is_finite()) => {
            invalid("rate", "must be a positive number of requests per second")
        }
        Mode::Open {
            max_in_flight: 0, ..
        } => invalid("max-in-flight", "must be at least 1"),
        _ => Ok(()),
    }
}

/// Spawns one closed-loop worker per connection into `set`, worker `w` on `conns[w]` with its
/// own stream of the seed; each runs until the deadline, a stop, or until `issued` reaches the
/// bound on requests.
pub(crate) fn spawn_closed<R: Worker>(
    set: &mut JoinSet<()>,
    run: &Arc<R>,
    conns: Vec<R::Conn>,
    b: &Bounds,
    issued: &Arc<AtomicU64>,
) {
    let (deadline, max_requests, seed) = (b.deadline, b.max_requests, b.seed);
    for (w, mut conn) in conns.into_iter().enumerate() {
        let (run, issued, stop) = (run.clone(), issued.clone(), b.stop.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(w as u64);
        set.spawn(async move {
            while Instant::now() < deadline
                && !stopped(&stop)
                && issued.fetch_add(1, Ordering::Relaxed) < max_requests
            {
                run.one(w, &mut rng, Some(&mut conn), None).await;
            }
        });
    }
}

/// The open loop: the `i`-th request is due at `t0 + i / rate` and gets stream `i` of `seed`;
/// at most `max_in_flight` are out (more wait, start late, and count as late starts). Returns
/// when the last request due before `deadline` has left.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn open_loop<R: Worker>(
    set: &mut JoinSet<()>,
    run: &Arc<R>,
    rec: &Recorder,
    t0: Instant,
    deadline: Instant,
    (rate_per_s, max_in_flight): (f64, usize),
    max_requests: u64,
    seed: u64,
    stop: &Stop,
) {
    let sem = Arc::new(Semaphore::new(max_in_flight));
    let period = Duration::from_secs_f64(1.0 / rate_per_s);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut i: u64 = 0;
    while i < max_requests {
        let intended = t0 + period.mul_f64(i as f64);
        if intended >= deadline || stopped(stop) {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        let permit = tokio::select! {
            p = sem.clone().acquire_owned() => p.expect("semaphore never closed"),
            _ = tokio::time::sleep_until(deadline.into()) => break,
        };
        if Instant::now().saturating_duration_since(intended) > LATE_START {
            rec.late_start();
        }
        rng.set_stream(i);
        let mut req_rng = rng.clone();
        let run = run.clone();
        let w = i as usize;
        set.spawn(async move {
            run.one(w, &mut req_rng, None, Some(intended)).await;
            drop(permit);
        });
        i += 1;
        // Reap finished tasks so the set does not grow with the run.
        while set.try_join_next().is_some() {}
    }
}

/// The bounds every run of a route shares.
pub(crate) struct Bounds {
    pub t0: Instant,
    pub deadline: Instant,
    pub max_requests: u64,
    pub seed: u64,
    pub stop: Stop,
}

/// Runs `mode` over `run` and waits for it: in closed loop, one worker per connection
/// `conns(in_flight)` makes; in open loop, the schedule. `slots` are blocking connections the
/// caller started (shut down at the hard stop).
pub(crate) async fn run_mode<R: Worker>(
    run: &Arc<R>,
    rec: &Recorder,
    mode: Mode,
    b: &Bounds,
    conns: impl FnOnce(usize) -> Vec<R::Conn>,
) {
    let mut set = JoinSet::new();
    match mode {
        Mode::Closed { in_flight } => {
            let issued = Arc::new(AtomicU64::new(0));
            spawn_closed(&mut set, run, conns(in_flight), b, &issued);
        }
        Mode::Open {
            rate_per_s,
            max_in_flight,
        } => {
            open_loop(
                &mut set,
                run,
                rec,
                b.t0,
                b.deadline,
                (rate_per_s, max_in_flight),
                b.max_requests,
                b.seed,
                &b.stop,
            )
            .await;
        }
    }
    drain(&mut set, b.deadline, &[], &b.stop).await;
}

/// Waits for the workers. Requests time out at `deadline` + [`DRAIN_GRACE`] and are counted;
/// the extra quarter second lets them record that before anything still running is aborted.
/// Blocking connections (`slots`) have no timer of their own past the socket timeout: at the
/// requests' hard stop they are shut down, and the request each was waiting on is counted as
/// a timeout, as an async worker's timer would count it. Stopped from outside, the requests
/// out get [`STOP_GRACE`], not the run's drain.
pub(crate) async fn drain(
    set: &mut JoinSet<()>,
    deadline: Instant,
    slots: &[Arc<BlockingSlot>],
    stop: &Stop,
) {
    let mut hard_stop = deadline + DRAIN_GRACE + Duration::from_millis(250);
    let mut shut_at = deadline + DRAIN_GRACE;
    let mut shut = slots.is_empty();
    let mut stop_rx = stop.clone();
    if stopped(stop) {
        let now = Instant::now();
        shut_at = shut_at.min(now + STOP_GRACE);
        hard_stop = hard_stop.min(now + STOP_GRACE + Duration::from_millis(250));
        stop_rx = None;
    }
    loop {
        tokio::select! {
            r = set.join_next() => if r.is_none() { break },
            r = async { stop_rx.as_mut().expect("guarded").changed().await }, if stop_rx.is_some() => {
                if r.is_err() || stopped(&stop_rx) {
                    let now = Instant::now();
                    shut_at = shut_at.min(now + STOP_GRACE);
                    hard_stop = hard_stop.min(now + STOP_GRACE + Duration::from_millis(250));
                    stop_rx = None;
                }
            }
            _ = tokio::time::sleep_until(shut_at.into()), if !shut => {
                slots.iter().for_each(|s| s.shut_down());
                shut = true;
            }
            _ = tokio::time::sleep_until(hard_stop.into()) => {
                slots.iter().for_each(|s| s.shut_down());
                set.abort_all();
                break;
            }
        }
    }
}

/// A request's timeout: the exchange's own bound, never past the drain grace after the run's
/// deadline (at least 1 ms).
pub(crate) fn request_timeout(bound: Duration, deadline: Instant) -> Duration {
    bound
        .min((deadline + DRAIN_GRACE).saturating_duration_since(Instant::now()))
        .max(Duration::from_millis(1))
}

/// The route's figures from what the run's recorder counted (empty figures when no request
/// was counted).
pub(crate) fn route_stats(m: &Measured, route: &str, open: bool) -> RouteStats {
    m.routes.get(route).cloned().unwrap_or_else(|| RouteStats {
        requests: 0,
        status: Default::default(),
        bytes_sent: 0,
        bytes_received: 0,
        latency: crate::stats::latency_histogram(),
        corrected: open.then(crate::stats::latency_histogram),
        per_second: vec![],
        intervals: vec![],
        intervals_uncorrected: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_refuses_the_same_configs() {
        let d = Duration::from_secs(1);
        assert!(check(d, 1, Mode::Closed { in_flight: 1 }).is_ok());
        assert_eq!(
            check(Duration::ZERO, 1, Mode::Closed { in_flight: 1 })
                .unwrap_err()
                .what,
            "duration"
        );
        assert_eq!(
            check(d, 0, Mode::Closed { in_flight: 1 }).unwrap_err().what,
            "max-requests"
        );
        assert_eq!(
            check(d, 1, Mode::Closed { in_flight: 0 }).unwrap_err().what,
            "in-flight"
        );
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let open = Mode::Open {
                rate_per_s: rate,
                max_in_flight: 1,
            };
            assert_eq!(check(d, 1, open).unwrap_err().what, "rate");
        }
        let open = Mode::Open {
            rate_per_s: 1.0,
            max_in_flight: 0,
        };
        assert_eq!(check(d, 1, open).unwrap_err().what, "max-in-flight");
    }
}

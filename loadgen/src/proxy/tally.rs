//! What the recording proxy counts: per route, its requests, bytes each way, answers by
//! status class, exchanges without a whole answer, the most in flight, WebSocket frames, and
//! the latency at the proxy; and the connections and the most in flight of all routes. One
//! `Tally` is a phase's (or the proxy's whole life's, if nobody takes it).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

/// The most routes one tally keeps; the requests of routes beyond are counted under their
/// method's `{other}` route (`PUT_{other}`), and beyond 16 of those under `_{other}`, so a
/// client whose paths collapse into no template cannot grow the proxy's memory without bound.
pub const MAX_ROUTES: usize = 256;

/// One route's counts.
#[derive(Debug, Clone)]
pub struct RouteTally {
    /// Exchanges that ended: answered whole, or not.
    pub requests: u64,
    /// Request bytes as sent (head and body, chunk framing included; tunnel bytes after an
    /// upgrade).
    pub bytes_up: u64,
    /// Answer bytes as received (interim answers included; tunnel bytes after an upgrade).
    pub bytes_down: u64,
    /// Whole answers by class: `[1xx, 2xx, 3xx, 4xx, 5xx]` (a code above 599 counts as 5xx;
    /// an exchange answered `100 Continue` and then finally counts once, as its final class).
    pub status: [u64; 5],
    /// Exchanges without a whole answer: the server closed, stalled past the read deadline or
    /// answered what cannot be framed, or the client went away first.
    pub failed: u64,
    /// The most exchanges of the route open at once (from the request head's arrival to the
    /// answer's end).
    pub max_in_flight: u64,
    /// WebSocket frames through an upgraded connection, each way.
    pub ws_frames_up: u64,
    pub ws_frames_down: u64,
    /// Request fully sent to answer fully received, µs (answered exchanges only; an upgrade's
    /// ends at its `101` head).
    pub latency: Histogram<u64>,
}

impl Default for RouteTally {
    fn default() -> RouteTally {
        RouteTally {
            requests: 0,
            bytes_up: 0,
            bytes_down: 0,
            status: [0; 5],
            failed: 0,
            max_in_flight: 0,
            ws_frames_up: 0,
            ws_frames_down: 0,
            latency: crate::stats::latency_histogram(),
        }
    }
}

/// One phase's counts over every route.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// By route as written in keys ([`crate::proxy::Classifier`]).
    pub routes: BTreeMap<String, RouteTally>,
    /// Client connections accepted.
    pub connections: u64,
    /// The most exchanges open at once, over all routes.
    pub max_in_flight: u64,
    /// Connections the upstream's side ended early, by what happened (`no byte within the
    /// read deadline`, `the upstream closed mid-answer`, ...).
    pub faults: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// All requests of the phase.
    pub fn requests(&self) -> u64 {
        self.routes.values().map(|r| r.requests).sum()
    }

    /// The route's entry; a new route beyond [`MAX_ROUTES`] is its method's `{other}`.
    pub fn route_mut(&mut self, route: &str) -> &mut RouteTally {
        if !self.routes.contains_key(route) && self.routes.len() >= MAX_ROUTES {
            let method = route.split('_').next().unwrap_or("");
            let other = format!("{method}_{{other}}");
            let other = if self.routes.contains_key(&other) || self.routes.len() < MAX_ROUTES + 16 {
                other
            } else {
                "_{other}".to_owned()
            };
            return self.routes.entry(other).or_default();
        }
        self.routes.entry(route.to_owned()).or_default()
    }
}

/// How one exchange ended, for [`Tally::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The final status, `None` when no whole answer came.
    pub status: Option<u16>,
    pub latency: Option<Duration>,
    pub ws_frames: (u64, u64),
}

impl Tally {
    /// Counts one ended exchange of `route`.
    pub fn record(&mut self, route: &str, e: Ended) {
        let r = self.route_mut(route);
        r.requests += 1;
        r.bytes_up += e.bytes_up;
        r.bytes_down += e.bytes_down;
        r.ws_frames_up += e.ws_frames.0;
        r.ws_frames_down += e.ws_frames.1;
        match e.status {
            Some(s) => r.status[usize::from((s / 100).clamp(1, 5)) - 1] += 1,
            None => r.failed += 1,
        }
        if let Some(l) = e.latency {
            let us = u64::try_from(l.as_micros())
                .unwrap_or(u64::MAX)
                .clamp(1, crate::stats::MAX_LATENCY_US);
            // Within the histogram's bounds after the clamp.
            let _ = r.latency.record(us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanges_are_counted_by_class_and_routes_are_bounded() {
        let mut t = Tally::default();
        let ok = Ended {
            bytes_up: 10,
            bytes_down: 20,
            status: Some(201),
            latency: Some(Duration::from_micros(150)),
            ws_frames: (0, 0),
        };
        t.record("PUT_{path}", ok);
        t.record(
            "PUT_{path}",
            Ended {
                status: Some(404),
                ..ok
            },
        );
        t.record(
            "PUT_{path}",
            Ended {
                status: Some(799),
                ..ok
            },
        );
        t.record(
            "PUT_{path}",
            Ended {
                status: None,
                latency: None,
                ..ok
            },
        );
        let r = &t.routes["PUT_{path}"];
        assert_eq!(r.requests, 4);
        assert_eq!(r.status, [0, 1, 0, 1, 1]);
        assert_eq!(r.failed, 1);
        assert_eq!((r.bytes_up, r.bytes_down), (40, 80));
        assert_eq!(r.latency.len(), 3);
        for i in 0..MAX_ROUTES + 10 {
            t.record(&format!("GET_x{i}"), ok);
        }
        assert_eq!(t.routes.len(), MAX_ROUTES + 1);
        assert_eq!(t.routes["GET_{other}"].requests, 11);
        for i in 0..40 {
            t.record(&format!("M{i}_x"), ok);
        }
        assert_eq!(t.routes.len(), MAX_ROUTES + 17);
        assert_eq!(t.routes["_{other}"].requests, 25);
        assert_eq!(t.requests(), 4 + MAX_ROUTES as u64 + 10 + 40);
    }
}

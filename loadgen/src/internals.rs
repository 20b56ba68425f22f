//! Hot internals reachable by the fuzz targets in `fuzz/` and the criterion benches: the
//! answer parser ([`h1`]) and recording one sample. Hidden from the docs; not the API.

use std::time::{Duration, Instant};

pub use crate::h1::probe as h1;
pub use crate::stats::Recorder;

/// Records one closed-loop request outcome into `recorder` exactly as a route-load worker
/// does: service latency `latency` ending now, `status` ("200", "io", ...), and bytes.
pub fn record(recorder: &Recorder, route: &str, status: &str, latency: Duration, bytes: u64) {
    let done = Instant::now();
    recorder.record(
        route,
        status,
        crate::stats::Sample {
            sent: done.checked_sub(latency).unwrap_or(done),
            intended: None,
            done,
            bytes_sent: bytes,
            bytes_received: bytes,
            sign: None,
        },
    );
}

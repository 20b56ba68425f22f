//! Route load, whatever the protocol: how requests are issued ([`Mode`]) and the one driver
//! every protocol's route load runs through (`drive`: config check, closed and open loop,
//! drain), a protocol supplying only its worker, and what every route load is configured by
//! and reports (`report`).

use std::time::Duration;

use serde::Serialize;

pub(crate) mod drive;
pub mod report;

pub use report::{FolderRouteLoadConfig, LoadConfig, RouteKey, RouteLoadConfig, RouteLoadReport};

/// Body size of route-load chunks, every protocol's: 1.5 KiB, the median note size of the
/// vault profiles (the `fixture` profile's median, inside the real-vault range of
/// docs/src/vaults/real-vaults.md).
pub const LOAD_CHUNK_BYTES: usize = 1536;

/// `len` bytes of printable text from `rng`, as a note is: lines of 31 letters and a newline.
pub(crate) fn note_text(rng: &mut rand_chacha::ChaCha8Rng, len: usize) -> Vec<u8> {
    use rand::Rng;
    let mut buf = vec![0u8; len];
    rng.fill_bytes(&mut buf);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if i % 32 == 31 { b'\n' } else { b'a' + *b % 26 };
    }
    buf
}

/// tokio's timer wheel has 1 ms resolution: an open-loop start more than 2 ms after its
/// intended time counts as late.
pub const LATE_START: Duration = Duration::from_millis(2);
/// After the duration, requests still out get this long before they count as timeouts.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Stopped from outside (a Locust `stop`, or its master gone), requests still out get this
/// long: the stop must land within Locust's heartbeat liveness of 3 s.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// How requests are issued.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Keep exactly `in_flight` requests outstanding.
    Closed { in_flight: usize },
    /// Start one request every `1 / rate_per_s` seconds; at most `max_in_flight` may be
    /// outstanding (more waits, starts late, and the corrected latency shows it).
    Open {
        rate_per_s: f64,
        max_in_flight: usize,
    },
}

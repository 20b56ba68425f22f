//! Route load, whatever the protocol: how requests are issued ([`Mode`]) and the one driver
//! every protocol's route load runs through (`drive`: config check, closed and open loop,
//! drain), a protocol supplying only its worker.

use std::time::Duration;

use serde::Serialize;

pub(crate) mod drive;

/// Body size of route-load chunks, every protocol's: 1.5 KiB, the median note size of the
/// vault profiles (the `fixture` profile's median, inside the real-vault range of
/// docs/src/vaults/real-vaults.md).
pub const LOAD_CHUNK_BYTES: usize = 1536;

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

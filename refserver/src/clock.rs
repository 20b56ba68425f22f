//! The server's clock, a parameter so tests can check stale timestamps and nonce expiry
//! without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Wall-clock time in unix milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;

    fn now_s(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }
}

/// The system clock (`SystemTime::now`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that moves only when told to; shared by cloning the `Arc`.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicI64,
}

impl ManualClock {
    pub fn new(now_ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            ms: AtomicI64::new(now_ms),
        })
    }

    pub fn advance_s(&self, s: i64) {
        self.ms.fetch_add(s * 1000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_700_000_000_500);
        assert_eq!(c.now_s(), 1_700_000_000);
        c.advance_s(601);
        assert_eq!(c.now_ms(), 1_700_000_601_500);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_s() > 1_577_836_800);
    }
}

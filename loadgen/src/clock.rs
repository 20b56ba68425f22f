//! The wall clock a signed request reads: unix seconds, a parameter so that signing can be
//! tested at a fixed time.

use std::sync::Arc;

/// Unix seconds, read for every signed request.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The real wall clock in unix seconds (0 before the epoch).
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    })
}

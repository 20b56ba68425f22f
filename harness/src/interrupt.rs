//! SIGINT/SIGTERM: a flag the long-running loops poll, so children are killed and reaped and
//! temp dirs removed before exiting with code 130.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM (idempotent).
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// True once SIGINT or SIGTERM arrived.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The error flows return when interrupted; `main` maps it to exit code 130.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: children killed and reaped, nothing written")]
pub struct Interrupted;

//! The one way this crate takes a `std::sync::Mutex`: a poisoned lock is taken anyway. Every
//! mutex here guards counters or a cursor that a panicking holder leaves consistent (a value
//! is replaced whole or an entry incremented), so refusing them would only turn one failed
//! task into many.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking its value even when a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

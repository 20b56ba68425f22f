//! Connection admission: a cap on open connections and a tighter one on connections that have
//! not yet carried an authenticated request, so stalled or idle strangers cannot use up the
//! server's file descriptors and lock out signed clients (strangers may hold seven eighths of
//! the connections; the rest is kept for connections that have carried a signed request).
//!
//! A connection is *proven* once one of its requests passed signature verification. When a
//! new connection would exceed either cap, the oldest unproven connection is closed to make
//! room (oldest first: a flood evicts its own earlier connections, and a legitimate client
//! that connects after it is served before it is evicted). Only when every open connection is
//! proven and the total cap is reached is a new connection refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Descriptors kept back from connections: the listener, journal, nonce log, lock file,
/// standard streams, the runtime's epoll and wake-up descriptors, blocking-pool files.
/// Counted on this server: 20 open at idle; 64 leaves room to spare.
const RESERVED_FDS: u64 = 64;
/// Each connection may hold a second descriptor (a chunk's temp file while it is received).
const FDS_PER_CONNECTION: u64 = 2;
/// Upper bound of the derived cap, whatever the open-file limit says.
const MAX_CONNECTIONS: usize = 16_384;

/// Marks a connection proven; handlers find it in the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct Proven(pub Arc<AtomicBool>);

impl Proven {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The cap on connections, derived from `RLIMIT_NOFILE` (soft limit) unless given.
pub(crate) fn connection_cap(given: Option<usize>) -> usize {
    if let Some(n) = given {
        return n.max(2);
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct this function owns.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let soft = if rc == 0 { lim.rlim_cur } else { 1024 };
    let n = soft.saturating_sub(RESERVED_FDS) / FDS_PER_CONNECTION;
    usize::try_from(n)
        .unwrap_or(MAX_CONNECTIONS)
        .clamp(2, MAX_CONNECTIONS)
}

#[derive(Debug)]
struct Slot {
    proven: Arc<AtomicBool>,
    /// Dropping it (eviction) tells the connection's task to close.
    _kill: tokio::sync::oneshot::Sender<()>,
}

/// The open connections, by admission order.
#[derive(Debug)]
pub(crate) struct Conns {
    open: Mutex<(u64, BTreeMap<u64, Slot>)>,
    max_total: usize,
    max_unproven: usize,
}

/// An admitted connection: removed from the registry when dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    id: u64,
    conns: Arc<Conns>,
    pub proven: Proven,
    /// Resolves (with an error) when the connection was evicted.
    pub evicted: tokio::sync::oneshot::Receiver<()>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.conns.lock().1.remove(&self.id);
    }
}

impl Conns {
    /// At most `max_total` connections; strangers may hold all but an eighth of them, the
    /// room kept for signed clients. (Not less: `bench-peer` drives `/livez` through wrk's
    /// unsigned connections, and an open-loop burst opens hundreds before any is proven.)
    pub(crate) fn new(max_total: usize) -> Arc<Conns> {
        let max_total = max_total.max(2);
        Arc::new(Conns {
            open: Mutex::new((0, BTreeMap::new())),
            max_total,
            max_unproven: (max_total - max_total / 8).clamp(1, max_total - 1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, BTreeMap<u64, Slot>)> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new connection, evicting the oldest unproven one if a cap is reached;
    /// `None` when every open connection is proven and the total cap is reached.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut g = self.lock();
        let (next, open) = &mut *g;
        let unproven = open
            .values()
            .filter(|s| !s.proven.load(Ordering::Relaxed))
            .count();
        if unproven >= self.max_unproven || open.len() >= self.max_total {
            let oldest = open
                .iter()
                .find(|(_, s)| !s.proven.load(Ordering::Relaxed))
                .map(|(id, _)| *id);
            match oldest {
                Some(id) => {
                    open.remove(&id);
                }
                None if open.len() >= self.max_total => return None,
                None => {}
            }
        }
        let id = *next;
        *next += 1;
        let proven = Arc::new(AtomicBool::new(false));
        let (kill, evicted) = tokio::sync::oneshot::channel();
        open.insert(
            id,
            Slot {
                proven: proven.clone(),
                _kill: kill,
            },
        );
        Some(Admitted {
            id,
            conns: self.clone(),
            proven: Proven(proven),
            evicted,
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().1.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unproven_connections_are_evicted_oldest_first() {
        use tokio::sync::oneshot::error::TryRecvError;
        // 8 connections at most, 7 of them strangers.
        let c = Conns::new(8);
        let mut first: Vec<Admitted> = (0..7).map(|_| c.admit().unwrap()).collect();
        // The eighth stranger evicts the oldest.
        let eighth = c.admit().unwrap();
        assert_eq!(c.len(), 7);
        assert!(matches!(
            first[0].evicted.try_recv(),
            Err(TryRecvError::Closed)
        ));
        assert!(matches!(
            first[1].evicted.try_recv(),
            Err(TryRecvError::Empty)
        ));
        // Proven connections are never evicted; with all 8 proven, a ninth is refused.
        for a in first.iter().skip(1) {
            a.proven.set();
        }
        eighth.proven.set();
        let last = c.admit().unwrap();
        last.proven.set();
        assert_eq!(c.len(), 8);
        assert!(c.admit().is_none());
        for a in first.iter_mut().skip(1) {
            assert!(matches!(a.evicted.try_recv(), Err(TryRecvError::Empty)));
        }
        drop(last);
        assert!(c.admit().is_some());
    }

    #[test]
    fn the_cap_follows_the_open_file_limit() {
        assert_eq!(connection_cap(Some(10)), 10);
        let derived = connection_cap(None);
        assert!((2..=MAX_CONNECTIONS).contains(&derived), "{derived}");
    }
}

//! Spent nonces: refused for 600 s, and persisted in an fsynced log so a restart still
//! refuses a replay (protocol page, "Device authentication").
//!
//! A nonce is spent by being sent: it enters the cache the moment a correctly signed request
//! carries it, and that request is answered only once its log record is durable. The log is
//! compacted on start (only records younger than the window are kept).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::metrics::Metrics;
use crate::store::frame;
use crate::store::log::{Appender, Compactor, LogKind, replay};

/// Live nonces held at most; beyond this the server answers `503 nonce_cache_full` rather than
/// grow without bound. 1M × ~80 B ≈ 80 MB; at 1,000 requests/s a 600 s window holds 600k.
pub const MAX_LIVE_NONCES: usize = 1_000_000;

/// The nonce log is rewritten with only live records once it passes this size (≈ 1.4M
/// records), so a long run's log stays bounded on disk.
pub const COMPACT_AT_BYTES: u64 = 64 * 1024 * 1024;

/// `accepted_at_s` (8, LE) + device id (16) + nonce (16).
const RECORD_LEN: usize = 40;

/// Why a nonce was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NonceError {
    #[error("nonce was already used within the last 600 s")]
    Replayed,
    #[error("more than {MAX_LIVE_NONCES} nonces are live")]
    CacheFull,
    #[error("nonce log: {0}")]
    LogUnavailable(String),
}

type Key = [u8; 32];

#[derive(Debug, Default)]
struct Cache {
    // Never reaches output: a lookup table keyed by (device, nonce).
    #[allow(clippy::disallowed_types)]
    seen: std::collections::HashMap<Key, i64>,
    /// Keys in acceptance order with the second they were accepted, for expiry.
    order: VecDeque<(i64, Key)>,
}

impl Cache {
    fn expire(&mut self, now_s: i64) {
        let window = protocol::limits::NONCE_WINDOW_S;
        while let Some(&(at, key)) = self.order.front() {
            if at + window > now_s {
                break;
            }
            self.order.pop_front();
            if self.seen.get(&key) == Some(&at) {
                self.seen.remove(&key);
            }
        }
    }

    fn insert(&mut self, key: Key, at: i64) {
        self.seen.insert(key, at);
        self.order.push_back((at, key));
    }
}

#[derive(Debug)]
pub struct Nonces {
    cache: Arc<Mutex<Cache>>,
    log: Appender,
}

pub(crate) fn encode(at: i64, key: &Key) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[..8].copy_from_slice(&at.to_le_bytes());
    r[8..].copy_from_slice(key);
    r
}

pub(crate) fn decode(rec: &[u8]) -> Option<(i64, Key)> {
    if rec.len() != RECORD_LEN {
        return None;
    }
    let at = i64::from_le_bytes(rec[..8].try_into().ok()?);
    let key: Key = rec[8..].try_into().ok()?;
    Some((at, key))
}

impl Nonces {
    /// Replays the log at `path` (truncating a torn tail), keeps the nonces still inside the
    /// window at `now_s`, rewrites the log with only those (`durable::write_atomic`: temp +
    /// fsync + rename + dir fsync), and opens it for appending.
    pub fn open(
        path: &Path,
        group_commit: bool,
        metrics: Arc<Metrics>,
        now_s: i64,
    ) -> std::io::Result<(Nonces, u64)> {
        let (records, dropped) = replay(path)?;
        let mut cache = Cache::default();
        let mut live: Vec<(i64, Key)> = records.iter().filter_map(|r| decode(r)).collect();
        live.retain(|(at, _)| at + protocol::limits::NONCE_WINDOW_S > now_s);
        live.sort_by_key(|(at, _)| *at);
        let mut buf = Vec::with_capacity(live.len() * (RECORD_LEN + frame::HEADER));
        for (at, key) in &live {
            cache.insert(*key, *at);
            frame::encode_into(&mut buf, &encode(*at, key));
        }
        // Start-up compaction drops expired nonces. It is an optimisation: on a full disk
        // (or any write failure) the replayed log is kept as it is and appended to, so a
        // restart never needs free space.
        if let Err(e) = durable::write_atomic(path, &buf, durable::PRIVATE) {
            eprintln!(
                "obsync-refserver: kept {} uncompacted ({e})",
                path.display()
            );
        }
        Self::open_with(path, group_commit, metrics, cache, COMPACT_AT_BYTES).map(|n| (n, dropped))
    }

    fn open_with(
        path: &Path,
        group_commit: bool,
        metrics: Arc<Metrics>,
        cache: Cache,
        compact_at: u64,
    ) -> std::io::Result<Nonces> {
        let cache = Arc::new(Mutex::new(cache));
        let snapshot = cache.clone();
        let compactor = Compactor {
            max_bytes: compact_at,
            live: Box::new(move || {
                let mut c = snapshot.lock().unwrap_or_else(|e| e.into_inner());
                // The writer has no clock; the newest acceptance time is "now" closely enough
                // (it can only keep a record a little longer than needed).
                let now_s = c.order.back().map_or(0, |&(at, _)| at);
                c.expire(now_s);
                let mut buf = Vec::with_capacity(c.order.len() * (RECORD_LEN + frame::HEADER));
                for (at, key) in &c.order {
                    frame::encode_into(&mut buf, &encode(*at, key));
                }
                buf
            }),
        };
        let log = Appender::open(
            path,
            LogKind::Nonce,
            group_commit,
            metrics,
            None,
            Some(compactor),
        )?;
        Ok(Nonces { cache, log })
    }

    /// Spends `nonce` for `device`: refused if seen within the window, otherwise recorded and
    /// made durable before this returns.
    pub async fn spend(
        &self,
        device: &[u8; 16],
        nonce: &[u8; 16],
        now_s: i64,
    ) -> Result<(), NonceError> {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(device);
        key[16..].copy_from_slice(nonce);
        let rx = {
            let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            c.expire(now_s);
            if c.seen.contains_key(&key) {
                return Err(NonceError::Replayed);
            }
            if c.seen.len() >= MAX_LIVE_NONCES {
                return Err(NonceError::CacheFull);
            }
            c.insert(key, now_s);
            self.log
                .enqueue(&encode(now_s, &key), None)
                .map_err(|e| NonceError::LogUnavailable(e.to_string()))?
        };
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NonceError::LogUnavailable(e.to_string())),
            Err(_) => Err(NonceError::LogUnavailable(
                "the nonce writer stopped".into(),
            )),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.log.is_poisoned()
    }

    pub fn close(&self) {
        self.log.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn replays_are_refused_across_a_restart_until_the_window_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nonces.log");
        let dev = [1u8; 16];
        let t0 = 1_700_000_000;
        {
            let (n, _) = Nonces::open(&path, false, Arc::new(Metrics::new()), t0).unwrap();
            n.spend(&dev, &[2u8; 16], t0).await.unwrap();
            assert_eq!(
                n.spend(&dev, &[2u8; 16], t0 + 1).await,
                Err(NonceError::Replayed)
            );
            // The same nonce from another device is a different key.
            n.spend(&[9u8; 16], &[2u8; 16], t0).await.unwrap();
            n.close();
        }
        let (n, _) = Nonces::open(&path, true, Arc::new(Metrics::new()), t0 + 10).unwrap();
        assert_eq!(
            n.spend(&dev, &[2u8; 16], t0 + 10).await,
            Err(NonceError::Replayed)
        );
        // After the window the nonce is forgotten (the timestamp check refuses such old
        // requests anyway).
        n.spend(&dev, &[2u8; 16], t0 + 600).await.unwrap();
        n.close();
        // Compaction on a late start keeps only live records.
        let (n, _) = Nonces::open(&path, false, Arc::new(Metrics::new()), t0 + 1199).unwrap();
        assert_eq!(
            n.spend(&dev, &[2u8; 16], t0 + 1199).await,
            Err(NonceError::Replayed)
        );
        n.close();
        let (records, _) = replay(&path).unwrap();
        assert_eq!(records.len(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_log_past_the_threshold_is_rewritten_with_live_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nonces.log");
        let metrics = Arc::new(Metrics::new());
        // 10 records' worth of bytes before compacting.
        let n = Nonces::open_with(&path, false, metrics, Cache::default(), 480).unwrap();
        let dev = [1u8; 16];
        let t0 = 1_700_000_000;
        for i in 0..10u8 {
            n.spend(&dev, &[i; 16], t0).await.unwrap();
        }
        // Past the window: the old ten expire; these twelve trigger one compaction.
        for i in 0..12u8 {
            n.spend(&dev, &[100 + i; 16], t0 + 700).await.unwrap();
        }
        n.close();
        let (records, _) = replay(&path).unwrap();
        assert!(records.len() < 22, "{} records kept", records.len());
        let (n, _) = Nonces::open(&path, false, Arc::new(Metrics::new()), t0 + 700).unwrap();
        for i in 0..12u8 {
            assert_eq!(
                n.spend(&dev, &[100 + i; 16], t0 + 701).await,
                Err(NonceError::Replayed)
            );
        }
        n.close();
    }
}

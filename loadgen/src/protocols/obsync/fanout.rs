//! Many long-polling devices while a few push: N devices each hold `GET
//! /v1/changes?since=..&wait=..`, and D devices each push their own files concurrently, one
//! every interval. Measured: how long after a post was sent each waiting device is answered
//! with it (the fan-out), how long the posts took (push throughput), and which waiters the
//! server refused (a connection cap is a refusal, not an error).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::error::LoadError;
use crate::protocols::obsync::client::Device;
use crate::protocols::obsync::held::HeldConn;
use crate::protocols::obsync::sync::{file_id_for, push_file, wait_changes, wait_changes_held};
use crate::stats::{HistSummary, latency_histogram};

/// The reference server's `/metrics` counter of journal flushes, read around the posts.
pub const JOURNAL_FLUSHES: &str = "obsync_journal_flushes_total";
/// The reference server's `/metrics` counter of journal records.
pub const JOURNAL_RECORDS: &str = "obsync_journal_records_total";

/// Body size of a pushed note: 1.5 KiB, the median note of the vault profiles.
const NOTE_BYTES: usize = 1536;

/// One fan-out run.
#[derive(Debug, Clone)]
pub struct FanoutConfig {
    /// Posts per pushing device.
    pub posts: u32,
    /// Between one device's posts.
    pub interval: Duration,
    /// `wait` of each long poll (≤ 55 s, the protocol's bound).
    pub wait: Duration,
    /// After the waiters' first polls went out, before the first post.
    pub settle: Duration,
    /// Where the pushers' files are written before they are pushed.
    pub work_dir: std::path::PathBuf,
    pub seed: u64,
    /// When not empty, pusher `d` pushes every file under `parts[d]` (sorted, one after
    /// another, as fast as answered) instead of `posts` generated notes; `interval` is not
    /// used. One part per pusher; their relative paths must not overlap.
    pub parts: Vec<std::path::PathBuf>,
}

/// A moment the caller may measure the server and this process at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Devices enrolled, no waiter started.
    Before,
    /// Every waiter's first poll has been out for `settle`.
    Held,
    /// The last post is answered and the deliveries are in (or the wait passed).
    Done,
}

/// What a fan-out run measured.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutReport {
    pub waiters: usize,
    pub pushers: usize,
    pub posts: u64,
    /// Waiters that were refused their first poll (connection refused or closed at once, or
    /// a 503), by reason: a connection cap, not a failure of the run.
    pub refused: BTreeMap<String, u64>,
    /// Deliveries of a post to a waiting device (one per post per waiter that held).
    pub deliveries: u64,
    /// Deliveries expected: posts x waiters that held.
    pub expected_deliveries: u64,
    /// Errors of waiters after their first poll, and of pushers, by kind.
    pub errors: BTreeMap<String, u64>,
    /// From a post being sent to a waiting device having it, µs.
    #[serde(rename = "fanout_us", serialize_with = "ser_hist")]
    pub fanout: Histogram<u64>,
    /// One post (chunk upload and version), µs.
    #[serde(rename = "post_us", serialize_with = "ser_hist")]
    pub post: Histogram<u64>,
    /// Posts answered per second of the posting phase.
    pub posts_per_s: f64,
    pub post_phase_ms: u64,
}

fn ser_hist<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    HistSummary::of(h, 1000).serialize(s)
}

/// The outcome label of an error: a refused connection or a 503 is `refused:<kind>`.
fn label(e: &LoadError) -> (bool, String) {
    match e {
        LoadError::Transport { kind, .. } if matches!(*kind, "connect" | "io") => {
            (true, format!("refused:{kind}"))
        }
        LoadError::Transport { kind, .. } => (false, (*kind).to_owned()),
        LoadError::Status {
            status: 503, code, ..
        } => (true, format!("refused:503 {code}")),
        LoadError::Status { status, code, .. } => (false, format!("{status} {code}")),
        other => (false, other.to_string().chars().take(60).collect()),
    }
}

struct Shared {
    /// file_id -> when its post was sent.
    sent: Mutex<BTreeMap<String, Instant>>,
    fanout: Mutex<Histogram<u64>>,
    deliveries: AtomicU64,
    held: AtomicU64,
    first_polls: AtomicU64,
    refused: Mutex<BTreeMap<String, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

fn bump(m: &Mutex<BTreeMap<String, u64>>, k: String) {
    *m.lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(k)
        .or_default() += 1;
}

/// Runs the waiters on `waiters` and the pushers on `pushers`, calling `at` at each
/// [`Moment`] (the caller reads `/proc` there).
pub async fn run_fanout(
    waiters: &[Device],
    pushers: &[Device],
    cfg: &FanoutConfig,
    mut at: impl FnMut(Moment),
) -> Result<FanoutReport, LoadError> {
    let invalid = |what: &str, reason: &str| LoadError::Invalid {
        what: what.into(),
        reason: reason.into(),
    };
    if pushers.is_empty() || (cfg.parts.is_empty() && cfg.posts == 0) {
        return Err(invalid(
            "pushers",
            "at least one device must push at least one post",
        ));
    }
    if !cfg.parts.is_empty() && cfg.parts.len() != pushers.len() {
        return Err(invalid(
            "parts",
            &format!(
                "{} parts for {} pushers: one part each",
                cfg.parts.len(),
                pushers.len()
            ),
        ));
    }
    // Each pusher's files, listed before the clock starts.
    let mut files: Vec<Vec<String>> = Vec::new();
    for part in &cfg.parts {
        files.push(list_files(part).map_err(|e| LoadError::io(part.clone(), e))?);
    }
    let wait_s = cfg.wait.as_secs().clamp(1, protocol::limits::MAX_WAIT_S);
    // Where the feed is now: every waiter starts there. Every pusher asks once, so each has
    // its connection before the waiters take the server's connection slots.
    let mut head = 0;
    for p in pushers {
        head = head.max(wait_changes(p, 0, 0).await?.head_seq);
    }
    at(Moment::Before);
    let shared = Arc::new(Shared {
        sent: Mutex::new(BTreeMap::new()),
        fanout: Mutex::new(latency_histogram()),
        deliveries: AtomicU64::new(0),
        held: AtomicU64::new(0),
        first_polls: AtomicU64::new(0),
        refused: Mutex::new(BTreeMap::new()),
        errors: Mutex::new(BTreeMap::new()),
    });
    let mut set = JoinSet::new();
    for dev in waiters {
        let (dev, sh) = (dev.clone(), shared.clone());
        set.spawn(async move {
            let mut since = head;
            let mut first = true;
            // The waiter's own connection: while it waits, a socket and nothing else.
            let mut conn = HeldConn::default();
            sh.first_polls.fetch_add(1, Ordering::Relaxed);
            loop {
                match wait_changes_held(&dev, &mut conn, since, wait_s).await {
                    Ok(page) => {
                        if first {
                            sh.held.fetch_add(1, Ordering::Relaxed);
                            first = false;
                        }
                        let now = Instant::now();
                        let sent = sh.sent.lock().unwrap_or_else(|p| p.into_inner());
                        let mut got = 0;
                        for c in &page.changes {
                            if let Some(t) = sent.get(&c.file_id) {
                                let us = now.saturating_duration_since(*t).as_micros() as u64;
                                sh.fanout
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .saturating_record(us.max(1));
                                got += 1;
                            }
                        }
                        drop(sent);
                        sh.deliveries.fetch_add(got, Ordering::Relaxed);
                        since = since.max(page.seq);
                    }
                    Err(e) => {
                        let (refusal, l) = label(&e);
                        if first && refusal {
                            bump(&sh.refused, l);
                            return;
                        }
                        bump(&sh.errors, l);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
    }
    // Every waiter's first poll is out, then the settle time.
    let out_by = Instant::now() + Duration::from_secs(60);
    while (shared.first_polls.load(Ordering::Relaxed) as usize) < waiters.len()
        && Instant::now() < out_by
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(cfg.settle).await;
    at(Moment::Held);

    let post_hist = Arc::new(Mutex::new(latency_histogram()));
    let t_posts = Instant::now();
    let mut pushes = JoinSet::new();
    for (d, dev) in pushers.iter().enumerate() {
        let (dev, sh, ph, cfg) = (dev.clone(), shared.clone(), post_hist.clone(), cfg.clone());
        let mine = files.get(d).cloned();
        pushes.spawn(async move {
            let (dir, rels, generated) = match mine {
                Some(rels) => (cfg.parts[d].clone(), rels, false),
                None => (
                    cfg.work_dir.join(format!("pusher-{d}")),
                    // Named by the device's index in the enrolment, not by `d`: shards of
                    // one state file have disjoint devices, so their notes never share a path
                    // (a waiter would count another shard's post of that path as its own).
                    (0..cfg.posts)
                        .map(|n| format!("fanout/{:016x}/{}/{n}.md", cfg.seed, dev.index()))
                        .collect(),
                    true,
                ),
            };
            let mut errors = 0u64;
            for (n, rel) in rels.iter().enumerate() {
                if generated && let Err(e) = write_note(&dir, rel, cfg.seed, dev.index(), n as u32)
                {
                    return Err(LoadError::io(dir.join(rel), e));
                }
                let t = Instant::now();
                sh.sent
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(file_id_for(rel), t);
                match push_file(&dev, &dir, rel).await {
                    Ok(_) => ph
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .saturating_record((t.elapsed().as_micros() as u64).max(1)),
                    Err(e) => {
                        errors += 1;
                        bump(&sh.errors, format!("post: {}", label(&e).1));
                    }
                }
                if generated {
                    tokio::time::sleep(cfg.interval).await;
                }
            }
            Ok((rels.len() as u64, errors))
        });
    }
    let (mut attempted, mut post_errors) = (0, 0);
    while let Some(r) = pushes.join_next().await {
        match r {
            Ok(Ok((n, e))) => {
                attempted += n;
                post_errors += e;
            }
            Ok(Err(e)) => {
                set.abort_all();
                return Err(e);
            }
            Err(_) => {
                attempted += 1;
                post_errors += 1;
            }
        }
    }
    let post_phase = t_posts.elapsed();
    let posts = attempted.saturating_sub(post_errors);
    // Deliveries: every holding waiter gets every post, or the wait passes.
    let held = shared.held.load(Ordering::Relaxed);
    let expected = posts * held;
    let end = Instant::now() + Duration::from_secs(wait_s + 5);
    while shared.deliveries.load(Ordering::Relaxed) < expected && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    at(Moment::Done);
    set.abort_all();
    while set.join_next().await.is_some() {}
    let fanout = shared
        .fanout
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let post = post_hist.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(FanoutReport {
        waiters: waiters.len(),
        pushers: pushers.len(),
        posts,
        refused: shared
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        deliveries: shared.deliveries.load(Ordering::Relaxed),
        expected_deliveries: expected,
        errors: shared
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        fanout,
        post,
        posts_per_s: posts as f64 / post_phase.as_secs_f64().max(1e-9),
        post_phase_ms: post_phase.as_millis() as u64,
    })
}

/// Every file under `dir`, as sorted relative paths with `/` separators.
fn list_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A note of [`NOTE_BYTES`] for post `n` of the device enrolled as `d`, seeded, written under
/// `dir`.
fn write_note(dir: &Path, rel: &str, seed: u64, d: usize, n: u32) -> std::io::Result<()> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((d as u64) << 32) | u64::from(n));
    let mut body = vec![0u8; NOTE_BYTES];
    rng.fill_bytes(&mut body);
    for b in &mut body {
        *b = b'a' + (*b % 26);
    }
    let path = dir.join(rel);
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(path, body)
}

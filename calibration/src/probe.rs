//! The fsync probe: flushes per second at 1..N threads, to see whether the device serialises flushes and whether group commit pays.
//!
//! Each thread appends 100 bytes (a small journal record) to its own file, or with `shared_file` to one
//! file all threads share, and calls `fsync` (`sync_all`) or `fdatasync` (`sync_data`) in a
//! loop until the time is up. Every thread checks the deadline before each write, so a run
//! ends within one flush of its time.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Bytes appended before each flush: a small journal record.
pub const WRITE_BYTES: usize = 100;
/// Most thread count the probe accepts (a bound on what one command can start).
pub const MAX_THREADS: usize = 256;
/// Longest time per thread count, seconds (a bound on how long one command runs).
pub const MAX_SECONDS: f64 = 60.0;
/// Latencies kept per thread for percentiles; beyond this only the count grows.
const MAX_LATENCIES: usize = 1 << 20;

/// Which flush call the probe makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// `fsync(2)` via `File::sync_all`.
    Fsync,
    /// `fdatasync(2)` via `File::sync_data`.
    Fdatasync,
}

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub threads: Vec<usize>,
    pub seconds: f64,
    pub dir: PathBuf,
    pub mode: SyncMode,
    pub shared_file: bool,
}

/// One thread count's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    pub threads: usize,
    pub flushes: u64,
    pub elapsed_s: f64,
    pub flushes_per_s: f64,
    pub flushes_per_s_per_thread: f64,
    /// flushes_per_s / the first row's flushes_per_s.
    pub speedup_vs_first: f64,
    pub latency_us_p50: u64,
    pub latency_us_p99: u64,
    pub latency_us_max: u64,
}

/// The whole probe (`probe fsync --json` prints this).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub probe: String,
    pub mode: SyncMode,
    pub shared_file: bool,
    pub dir: PathBuf,
    pub fs_type: Option<String>,
    pub seconds_per_step: f64,
    pub write_bytes: usize,
    pub rows: Vec<ProbeRow>,
}

/// A probe that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("probe dir {}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("probe file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--threads {0}: each count must be 1..={MAX_THREADS}")]
    Threads(usize),
    #[error("--threads: at least one thread count is needed")]
    NoThreads,
    #[error("--seconds {0}: must be > 0 and <= {MAX_SECONDS}")]
    Seconds(f64),
}

/// Checks the config before anything is created.
pub fn validate(cfg: &ProbeConfig) -> Result<(), ProbeError> {
    if cfg.threads.is_empty() {
        return Err(ProbeError::NoThreads);
    }
    if let Some(&bad) = cfg.threads.iter().find(|&&t| t == 0 || t > MAX_THREADS) {
        return Err(ProbeError::Threads(bad));
    }
    if !(cfg.seconds > 0.0 && cfg.seconds <= MAX_SECONDS) {
        return Err(ProbeError::Seconds(cfg.seconds));
    }
    Ok(())
}

/// Runs the probe for each thread count in turn, in a fresh directory inside `cfg.dir`
/// that is removed afterwards. `progress` is called after each row.
pub fn run_fsync_probe(
    cfg: &ProbeConfig,
    mut progress: impl FnMut(&ProbeRow),
) -> Result<ProbeReport, ProbeError> {
    validate(cfg)?;
    let work = tempfile::Builder::new()
        .prefix(".vaultbench-probe-")
        .tempdir_in(&cfg.dir)
        .map_err(|source| ProbeError::Dir {
            dir: cfg.dir.clone(),
            source,
        })?;
    let mut rows: Vec<ProbeRow> = Vec::new();
    for (step, &threads) in cfg.threads.iter().enumerate() {
        let step_dir = work.path().join(format!("step{step}"));
        std::fs::create_dir(&step_dir).map_err(|source| ProbeError::Dir {
            dir: step_dir.clone(),
            source,
        })?;
        let mut row = run_step(cfg, &step_dir, threads)?;
        row.speedup_vs_first = match rows.first() {
            Some(first) if first.flushes_per_s > 0.0 => row.flushes_per_s / first.flushes_per_s,
            Some(_) => 0.0,
            None => 1.0,
        };
        // Free the space now: a long probe on a fast device writes tens of MB per step.
        let _ = std::fs::remove_dir_all(&step_dir);
        progress(&row);
        rows.push(row);
    }
    Ok(ProbeReport {
        probe: "fsync".to_owned(),
        mode: cfg.mode,
        shared_file: cfg.shared_file,
        dir: cfg.dir.clone(),
        fs_type: crate::fingerprint::fs_type(&cfg.dir),
        seconds_per_step: cfg.seconds,
        write_bytes: WRITE_BYTES,
        rows,
    })
}

fn run_step(cfg: &ProbeConfig, dir: &Path, threads: usize) -> Result<ProbeRow, ProbeError> {
    let duration = Duration::from_secs_f64(cfg.seconds);
    let barrier = Barrier::new(threads + 1);
    let paths: Vec<PathBuf> = (0..threads)
        .map(|t| {
            if cfg.shared_file {
                dir.join("shared")
            } else {
                dir.join(format!("t{t}"))
            }
        })
        .collect();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = paths
            .iter()
            .map(|path| {
                let barrier = &barrier;
                s.spawn(move || flush_loop(path, cfg.mode, barrier, duration))
            })
            .collect();
        // The threads start their clocks when every thread has opened its file.
        barrier.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("probe thread panicked")))
            })
            .collect::<Vec<_>>()
    });
    let mut flushes = 0u64;
    let mut latencies = Vec::new();
    let mut span: Option<(Instant, Instant)> = None;
    for (path, result) in paths.iter().zip(results) {
        let run = result.map_err(|source| ProbeError::Io {
            path: path.clone(),
            source,
        })?;
        flushes += run.flushes;
        latencies.extend(run.latencies_us);
        span = Some(match span {
            None => (run.start, run.end),
            Some((a, b)) => (a.min(run.start), b.max(run.end)),
        });
    }
    // From the first thread's start to the last thread's end: the time the flushes took.
    let elapsed_s = span.map_or(0.0, |(a, b)| (b - a).as_secs_f64());
    latencies.sort_unstable();
    let pct = |p: f64| -> u64 {
        if latencies.is_empty() {
            return 0;
        }
        let idx = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        u64::from(latencies[idx])
    };
    let flushes_per_s = flushes as f64 / elapsed_s;
    Ok(ProbeRow {
        threads,
        flushes,
        elapsed_s,
        flushes_per_s,
        flushes_per_s_per_thread: flushes_per_s / threads as f64,
        speedup_vs_first: 1.0,
        latency_us_p50: pct(0.50),
        latency_us_p99: pct(0.99),
        latency_us_max: latencies.last().copied().map(u64::from).unwrap_or(0),
    })
}

/// What one probe thread did.
struct ThreadRun {
    flushes: u64,
    latencies_us: Vec<u32>,
    start: Instant,
    end: Instant,
}

/// One thread: open, wait for the others, append + flush until the deadline.
fn flush_loop(
    path: &Path,
    mode: SyncMode,
    barrier: &Barrier,
    duration: Duration,
) -> std::io::Result<ThreadRun> {
    let opened = OpenOptions::new().create(true).append(true).open(path);
    // Wait at the barrier even on failure, or the other threads would wait forever.
    barrier.wait();
    let mut file = opened?;
    let start = Instant::now();
    let deadline = start + duration;
    let line = [b'x'; WRITE_BYTES];
    let mut count = 0u64;
    let mut latencies = Vec::new();
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        file.write_all(&line)?;
        match mode {
            SyncMode::Fsync => file.sync_all()?,
            SyncMode::Fdatasync => file.sync_data()?,
        }
        count += 1;
        if latencies.len() < MAX_LATENCIES {
            let us = t0.elapsed().as_micros();
            latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
        }
    }
    Ok(ThreadRun {
        flushes: count,
        latencies_us: latencies,
        start,
        end: Instant::now(),
    })
}

impl ProbeReport {
    /// A table for the terminal.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "fsync probe: {} of {} B per flush, {}, {:.1} s per step, dir {} ({})",
            match self.mode {
                SyncMode::Fsync => "fsync",
                SyncMode::Fdatasync => "fdatasync",
            },
            self.write_bytes,
            if self.shared_file {
                "one shared file"
            } else {
                "one file per thread"
            },
            self.seconds_per_step,
            self.dir.display(),
            self.fs_type.as_deref().unwrap_or("fs unknown"),
        )];
        out.push(format!(
            "{:>7} {:>10} {:>12} {:>14} {:>8} {:>9} {:>9}",
            "threads", "flushes", "flushes/s", "per thread/s", "speedup", "p50 us", "p99 us"
        ));
        for r in &self.rows {
            out.push(format!(
                "{:>7} {:>10} {:>12.0} {:>14.0} {:>7.2}x {:>9} {:>9}",
                r.threads,
                r.flushes,
                r.flushes_per_s,
                r.flushes_per_s_per_thread,
                r.speedup_vs_first,
                r.latency_us_p50,
                r.latency_us_p99
            ));
        }
        if self.fs_type.as_deref() == Some("tmpfs") {
            out.push(
                "note: tmpfs does not persist; its flushes are free and say nothing about a disk"
                    .into(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path, threads: Vec<usize>, seconds: f64) -> ProbeConfig {
        ProbeConfig {
            threads,
            seconds,
            dir: dir.to_owned(),
            mode: SyncMode::Fdatasync,
            shared_file: false,
        }
    }

    #[test]
    fn bad_config_is_refused_before_anything_runs() {
        let d = Path::new("/nonexistent");
        assert!(matches!(
            validate(&cfg(d, vec![], 1.0)),
            Err(ProbeError::NoThreads)
        ));
        assert!(matches!(
            validate(&cfg(d, vec![1, 0], 1.0)),
            Err(ProbeError::Threads(0))
        ));
        assert!(matches!(
            validate(&cfg(d, vec![1], 0.0)),
            Err(ProbeError::Seconds(_))
        ));
        assert!(matches!(
            validate(&cfg(d, vec![1], 61.0)),
            Err(ProbeError::Seconds(_))
        ));
        assert!(validate(&cfg(d, vec![1, 256], 60.0)).is_ok());
    }

    #[test]
    fn an_unusable_dir_is_named() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let err = run_fsync_probe(&cfg(f.path(), vec![1], 0.05), |_| {}).unwrap_err();
        assert!(matches!(err, ProbeError::Dir { .. }));
        assert!(
            err.to_string()
                .starts_with(&format!("probe dir {}: ", f.path().display()))
        );
    }

    #[test]
    fn shared_file_rows_count_every_flush() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cfg(dir.path(), vec![1, 2], 0.05);
        c.shared_file = true;
        let report = run_fsync_probe(&c, |_| {}).unwrap();
        assert_eq!(report.rows.len(), 2);
        for r in &report.rows {
            assert!(r.flushes > 0);
            assert!(r.latency_us_p50 <= r.latency_us_p99 && r.latency_us_p99 <= r.latency_us_max);
        }
        assert_eq!(report.rows[0].speedup_vs_first, 1.0);
        // The work dir is removed afterwards.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

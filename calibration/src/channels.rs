//! The two calibration channels: a fixed CPU kernel (`cpu_ms`) and a fixed write + fsync kernel (`io_ms`).
//!
//! Both kernels do the same fixed amount of work every time, so on a quiet machine their
//! wall time is a property of the machine; when it moves, something else was using the CPU
//! or the storage. A sample reads both channels before and after its measurement, in its own
//! fresh process (design.md §5).

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use contract::schema::median;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One reading of both channels, in milliseconds of wall time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// Wall time of [`cpu_kernel_ms`]'s fixed hashing work.
    pub cpu_ms: f64,
    /// Wall time of [`io_kernel_ms`]'s fixed appends + fsyncs.
    pub io_ms: f64,
}

/// Bytes hashed per round of the CPU kernel (fits in L2, so the kernel measures the core,
/// not the memory bus).
const CPU_BLOCK: usize = 64 * 1024;
/// Rounds of the CPU kernel: 512 x 64 KiB = 32 MiB of chained SHA-256. Sized on the
/// development VM (Xeon with SHA-NI, 2 vCPU) to take ~30 ms, inside the 20-50 ms the
/// issue asks for: long enough that timer resolution and one scheduler tick are < 1 %,
/// short enough that a recording's readings cost well under a second.
const CPU_ROUNDS: usize = 512;

/// Appends per io reading, each followed by `sync_data` (issue 5: "16 x 4 KiB appends").
const IO_APPENDS: usize = 16;
/// Size of each append.
const IO_BLOCK: usize = 4 * 1024;

/// Runs the fixed CPU kernel once and returns its wall time in milliseconds.
///
/// Chained SHA-256 over a deterministic 64 KiB block: each round hashes the previous digest
/// and the block, so no round can be skipped or reordered, and `black_box` keeps the
/// compiler from proving the result unused. The hashing is done by the `sha2` crate, which
/// the workspace optimises even in dev builds, so a debug and a release `vaultbench` time
/// the same machine code (the kernel is not a measure of how this crate was compiled).
///
/// The rounds run as `CPU_SLICES` (8) timed slices and the reading is the median slice time
/// times the slice count. Measured on this VM (2026-11-30, idle, no steal): single-shot
/// readings in fresh processes ranged 25-85 ms, and a quiet gate trial accepted 3 of 20
/// recordings — one preemption or host hiccup inside one reading decided the verdict. The
/// median slice ignores a hiccup that hits fewer than half the slices, while a contender
/// that takes a share of the core slows most slices and still moves the reading.
pub fn cpu_kernel_ms() -> f64 {
    let block: Vec<u8> = (0..CPU_BLOCK)
        .map(|i| (i.wrapping_mul(31).wrapping_add(7) & 0xff) as u8)
        .collect();
    let per_slice = CPU_ROUNDS / CPU_SLICES;
    let mut slices = [0f64; CPU_SLICES];
    for s in &mut slices {
        let start = Instant::now();
        let digest = cpu_kernel(black_box(&block), black_box(per_slice));
        *s = start.elapsed().as_secs_f64() * 1e3;
        black_box(digest);
    }
    median(&slices).expect("8 elapsed times") * CPU_SLICES as f64
}

/// Timed slices of one cpu reading (see [`cpu_kernel_ms`]).
const CPU_SLICES: usize = 8;

/// The work itself, separate so a unit test can pin its result.
fn cpu_kernel(block: &[u8], rounds: usize) -> [u8; 32] {
    let mut state = [0u8; 32];
    for _ in 0..rounds {
        let mut h = Sha256::new();
        h.update(state);
        h.update(black_box(block));
        state.copy_from_slice(&h.finalize());
    }
    state
}

/// Distinguishes io-kernel files of concurrent readings in one process.
static IO_SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs the fixed io kernel once in `dir` and returns its wall time in milliseconds.
///
/// Creates a fresh file, appends 16 x 4 KiB, each followed by `sync_data` (an append changes
/// the file size, so every `sync_data` is a real journal commit, like the reference server's
/// journal frames), then unlinks the file. The timer covers create, appends, flushes and
/// close; the unlink is outside it. `dir` must be on the filesystem being judged (the
/// server's data dir).
pub fn io_kernel_ms(dir: &Path) -> io::Result<f64> {
    let name = format!(
        ".vaultbench-io-{}-{}",
        std::process::id(),
        IO_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let block = [0x5au8; IO_BLOCK];
    let start = Instant::now();
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut per = [0f64; IO_APPENDS];
        for p in &mut per {
            let t = Instant::now();
            file.write_all(&block)?;
            file.sync_data()?;
            *p = t.elapsed().as_secs_f64() * 1e3;
        }
        Ok::<_, io::Error>(per)
    })();
    let _whole = start.elapsed();
    // Remove the file even when a write failed; a failed remove of a file that was never
    // created is expected then, so only the first error is reported.
    let removed = std::fs::remove_file(&path);
    let per = result?;
    removed?;
    // As for the cpu channel: the median append+flush times the count, so one stalled flush
    // does not decide a reading, while a device slowed by a contender slows most flushes.
    Ok(median(&per).expect("16 elapsed times") * IO_APPENDS as f64)
}

/// Reads both channels once, in this process: the CPU kernel, then the io kernel in `io_dir`.
pub fn read_channels(io_dir: &Path) -> io::Result<Reading> {
    let cpu_ms = cpu_kernel_ms();
    let io_ms = io_kernel_ms(io_dir)?;
    Ok(Reading { cpu_ms, io_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_kernel_is_deterministic_and_chained() {
        let block = vec![1u8; 16];
        let one = cpu_kernel(&block, 1);
        // One round is SHA-256 of 32 zero bytes followed by the block.
        let mut h = Sha256::new();
        h.update([0u8; 32]);
        h.update(&block);
        assert_eq!(one.as_slice(), h.finalize().as_slice());
        let two = cpu_kernel(&block, 2);
        let mut h = Sha256::new();
        h.update(one);
        h.update(&block);
        assert_eq!(two.as_slice(), h.finalize().as_slice());
        assert_ne!(one, two);
    }

    #[test]
    fn io_kernel_leaves_no_file_and_reports_a_missing_dir() {
        let dir = tempfile::tempdir().unwrap();
        let ms = io_kernel_ms(dir.path()).unwrap();
        assert!(ms > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let err = io_kernel_ms(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}

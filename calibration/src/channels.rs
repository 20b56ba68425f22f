//! The three calibration channels: a fixed CPU kernel (`cpu_ms`), a fixed write + fsync kernel
//! (`io_ms`) and a fixed loopback request/answer exchange between two threads (`rtt_ms`).
//!
//! Each kernel does the same fixed amount of work every time, so on a quiet machine their
//! wall time is a property of the machine; when it moves, something else was using the CPU
//! or the storage. A sample reads both channels before and after its measurement, in its own
//! fresh process.

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use contract::schema::median;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One reading of every channel, in milliseconds of wall time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// Wall time of [`cpu_kernel_ms`]'s fixed hashing work.
    pub cpu_ms: f64,
    /// Wall time of [`io_kernel_ms`]'s fixed appends + fsyncs.
    pub io_ms: f64,
    /// Wall time of [`rtt_kernel_ms`]'s fixed loopback exchanges (absent from a reading of a
    /// build before the channel existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
}

/// Bytes hashed per round of the CPU kernel (fits in L2, so the kernel measures the core,
/// not the memory bus).
const CPU_BLOCK: usize = 64 * 1024;
/// Rounds of the CPU kernel: 512 x 64 KiB = 32 MiB of chained SHA-256. Sized on the
/// development VM (Xeon with SHA-NI, 2 vCPU) to take ~30 ms, inside the 20-50 ms the
/// calibration needs: long enough that timer resolution and one scheduler tick are < 1 %,
/// short enough that a recording's readings cost well under a second.
const CPU_ROUNDS: usize = 512;

/// Appends per io reading, each followed by `sync_data` (16 × 4 KiB: a journal's small appends, each made durable).
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
/// times the slice count. Measured on a 2-vCPU cloud VM (2026-11-30, idle, no steal): single-shot
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

/// Exchanges per rtt reading: 8 timed slices of 32 request/answer round trips each.
const RTT_SLICES: usize = 8;
/// Round trips per timed slice of the rtt kernel.
const RTT_PER_SLICE: usize = 32;
/// Untimed round trips before the first slice: the connection's first exchanges pay for
/// slow-start state, page faults of fresh buffers and the echo thread's first wake-up.
const RTT_WARMUP: usize = 16;
/// Bytes of one request: about the head of a signed request to the reference server (request
/// line, host, device id, timestamp, nonce, HMAC signature; the protocol doc's example is ~330
/// bytes).
const RTT_REQUEST: usize = 320;
/// Bytes of one answer: about a small JSON answer with its head.
const RTT_ANSWER: usize = 160;

/// Runs the fixed round-trip kernel once and returns its wall time in milliseconds.
///
/// Two threads of this process, a client and an echo server, exchange a fixed 320-byte
/// request and 160-byte answer over a loopback TCP connection (`TCP_NODELAY`, as a route's
/// client and server do), one exchange in flight at a time: each round trip is two socket
/// writes, two wake-ups of a thread blocked in `read`, and two passes through the loopback
/// TCP stack, which is what a 1-in-flight route's latency rests on beside the server's own
/// work. When the process may run on two or more CPUs, the two threads are pinned to two
/// different ones, as the harness pins the server and the generator to disjoint CPU sets, so
/// the wake-ups cross CPUs (on a VM a cross-CPU wake-up is an inter-processor interrupt, the
/// cost that differs most between hosts). The reading, as for the other channels, is the
/// median of 8 timed slices of 32 round trips, times 8.
pub fn rtt_kernel_ms() -> io::Result<f64> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let cpus = allowed_cpus();
    let (echo_cpu, client_cpu) = match cpus.as_deref() {
        Some([first, .., last]) => (Some(*last), Some(*first)),
        _ => (None, None),
    };
    let total = RTT_WARMUP + RTT_SLICES * RTT_PER_SLICE;
    let echo =
        std::thread::Builder::new()
            .name("rtt-echo".into())
            .spawn(move || -> io::Result<()> {
                if let Some(c) = echo_cpu {
                    pin_this_thread(c);
                }
                let (mut conn, _) = listener.accept()?;
                conn.set_nodelay(true)?;
                let mut request = [0u8; RTT_REQUEST];
                let answer = [0xa5u8; RTT_ANSWER];
                for _ in 0..total {
                    conn.read_exact(&mut request)?;
                    conn.write_all(&answer)?;
                }
                Ok(())
            })?;
    let client = std::thread::Builder::new()
        .name("rtt-client".into())
        .spawn(move || -> io::Result<[f64; RTT_SLICES]> {
            if let Some(c) = client_cpu {
                pin_this_thread(c);
            }
            let mut conn = TcpStream::connect(addr)?;
            conn.set_nodelay(true)?;
            let request = [0x5au8; RTT_REQUEST];
            let mut answer = [0u8; RTT_ANSWER];
            let mut exchange = |conn: &mut TcpStream| -> io::Result<()> {
                conn.write_all(&request)?;
                conn.read_exact(&mut answer)
            };
            for _ in 0..RTT_WARMUP {
                exchange(&mut conn)?;
            }
            let mut slices = [0f64; RTT_SLICES];
            for s in &mut slices {
                let start = Instant::now();
                for _ in 0..RTT_PER_SLICE {
                    exchange(&mut conn)?;
                }
                *s = start.elapsed().as_secs_f64() * 1e3;
            }
            Ok(slices)
        })?;
    let slices = joined(client.join());
    if slices.is_err() {
        // A client that failed before it connected would leave the echo thread in `accept`:
        // one connection, closed at once, lets it fail and return.
        let _ = TcpStream::connect(addr);
    }
    // A client that failed closes its end, so the echo thread's read fails and it returns.
    let echoed = joined(echo.join());
    let slices = slices?;
    echoed?;
    Ok(median(&slices).expect("8 elapsed times") * RTT_SLICES as f64)
}

/// A kernel thread's result; a panic (none is expected) becomes an error.
fn joined<T>(r: std::thread::Result<io::Result<T>>) -> io::Result<T> {
    r.unwrap_or_else(|_| Err(io::Error::other("rtt kernel thread panicked")))
}

/// The CPUs this thread may run on, `None` when the kernel would not say.
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size passed is the set's own.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: i is below CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// Restricts the calling thread to one CPU; best effort (an unpinned kernel still measures
/// round trips, only perhaps on one CPU).
fn pin_this_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from `allowed_cpus`, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the size passed is the set's own.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

/// Reads every channel once, in this process: the CPU kernel, the io kernel in `io_dir`, then
/// the round-trip kernel.
pub fn read_channels(io_dir: &Path) -> io::Result<Reading> {
    let cpu_ms = cpu_kernel_ms();
    let io_ms = io_kernel_ms(io_dir)?;
    let rtt_ms = rtt_kernel_ms()?;
    Ok(Reading {
        cpu_ms,
        io_ms,
        rtt_ms: Some(rtt_ms),
    })
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

    #[test]
    fn rtt_kernel_reads_a_positive_time_and_leaves_this_thread_unpinned() {
        let before = allowed_cpus();
        let ms = rtt_kernel_ms().unwrap();
        assert!(ms.is_finite() && ms > 0.0, "{ms}");
        // 256 loopback round trips take well under a second on anything that runs the suite.
        assert!(ms < 1000.0, "{ms}");
        assert_eq!(
            allowed_cpus(),
            before,
            "the kernel pins its own threads only"
        );
    }

    #[test]
    fn a_reading_without_the_rtt_channel_still_parses_and_writes_back_as_it_was() {
        let old = r#"{"cpu_ms":25.0,"io_ms":1.5}"#;
        let r: Reading = serde_json::from_str(old).unwrap();
        assert_eq!(r.rtt_ms, None);
        assert_eq!(serde_json::to_string(&r).unwrap(), old);
    }
}

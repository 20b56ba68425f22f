//! A real workload for procstat's live tests and cost example: named threads that burn CPU
//! or sleep, driven by commands on stdin.
//!
//! `procstat-child [--burn N] [--idle N]` starts N threads named `burn` that spin and N named
//! `idle` that sleep, prints `ready`, then reads one command a line, answering `done` (or a
//! pid) after each:
//! - `churn MS`: spawn a thread named `churn`, let it burn MS ms of CPU, join it;
//! - `write PATH BYTES`: write BYTES bytes to PATH and fsync it;
//! - `spawn`: start a copy of this program with one `idle` thread as a child, print its pid;
//! - `exit`, or end of input: exit.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// This thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`), so a burn of N ms uses N ms of
/// CPU however busy the machine is.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

fn burn_for(d: Duration) {
    let start = thread_cpu();
    let mut x = 0u64;
    while thread_cpu() - start < d {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = |flag: &str| -> usize {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..count("--burn") {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("burn".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    burn_for(Duration::from_millis(5));
                }
            })
            .expect("spawn burn thread");
    }
    for _ in 0..count("--idle") {
        std::thread::Builder::new()
            .name("idle".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            })
            .expect("spawn idle thread");
    }
    let mut children = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["churn", ms] => {
                let d = Duration::from_millis(ms.parse().unwrap_or(0));
                std::thread::Builder::new()
                    .name("churn".into())
                    .spawn(move || burn_for(d))
                    .expect("spawn churn thread")
                    .join()
                    .expect("join churn thread");
                writeln!(out, "done").expect("stdout");
            }
            ["write", path, bytes] => {
                let data = vec![b'x'; bytes.parse().unwrap_or(0)];
                let mut f = std::fs::File::create(path).expect("create file");
                f.write_all(&data)
                    .and_then(|()| f.sync_all())
                    .expect("write file");
                writeln!(out, "done").expect("stdout");
            }
            ["spawn"] => {
                let exe = std::env::current_exe().expect("current exe");
                let child = std::process::Command::new(exe)
                    .args(["--idle", "1"])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .expect("spawn child");
                writeln!(out, "{}", child.id()).expect("stdout");
                children.push(child);
            }
            ["exit"] => break,
            _ => writeln!(out, "unknown command").expect("stdout"),
        }
        out.flush().expect("stdout");
    }
    stop.store(true, Ordering::Relaxed);
    for mut c in children {
        drop(c.stdin.take());
        let _ = c.wait();
    }
}

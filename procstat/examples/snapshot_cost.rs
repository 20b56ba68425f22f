//! Measures what one `Snapshot::capture` of a 10-thread process costs: it starts
//! `procstat-child --idle 9` (main thread + 9 idle threads), takes many snapshots and prints
//! the median and the 90th percentile in µs, and the CPU the reading process used per snapshot.
//! The same for a 1-thread process, and for the system counters alone, show where the time goes.
//!
//! Run: `cargo build --release -p procstat && cargo run --release -p procstat --example snapshot_cost`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let t = std::time::Instant::now();
    let n = 2000;
    for _ in 0..n {
        std::hint::black_box(procstat::SystemSample::read());
    }
    println!(
        "system counters alone: {:.1} us per read (mean of {n})",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    measure(9);
    measure(0);
}

fn measure(idle: usize) {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/snapshot_cost -> target/<profile>/procstat-child
    let child_exe = exe
        .parent()
        .and_then(|p| p.parent())
        .expect("target dir")
        .join("procstat-child");
    let mut child = Command::new(&child_exe)
        .args(["--idle", &idle.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (build it with cargo build -p procstat)",
                child_exe.display()
            )
        });
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while procstat::Snapshot::capture(pid)
        .expect("snapshot")
        .task_count()
        < 10
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let n = 2000;
    let me = std::process::id();
    let before = procstat::Snapshot::capture(me).expect("self snapshot");
    let mut times = Vec::with_capacity(n);
    let mut tasks = 0;
    for _ in 0..n {
        let t0 = Instant::now();
        let s = procstat::Snapshot::capture(pid).expect("snapshot");
        times.push(t0.elapsed());
        tasks = s.task_count();
    }
    let after = procstat::Snapshot::capture(me).expect("self snapshot");
    let cpu = procstat::Delta::between(&before, &after).cpu_ns;
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "snapshot of a {tasks}-thread process ({} processes on this machine): median {:.1} us, p90 {:.1} us, \
         CPU {:.1} us per snapshot, over {n} snapshots",
        std::fs::read_dir("/proc")
            .map(|r| r
                .filter(|e| e.as_ref().is_ok_and(|e| e
                    .file_name()
                    .to_string_lossy()
                    .parse::<u32>()
                    .is_ok()))
                .count())
            .unwrap_or(0),
        us(times[n / 2]),
        us(times[n * 9 / 10]),
        cpu as f64 / 1000.0 / n as f64
    );
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}

//! Cold push and cold pull of a vault against each WebDAV preset, with the server's whole
//! process tree measured: the figures behind the README's WebDAV table.
//!
//! `cargo run --release -p loadgen --example webdav_bench -- [PROFILE] [RUNS]` (default
//! `small`, 3 runs). Each run starts a fresh server in a temp dir (basic auth on), pushes the
//! vault (MKCOL + PUT, four in flight), pulls it into an empty dir (PROPFIND Depth 1 walk +
//! GET, four in flight) and checks the pulled tree byte for byte. Server CPU is the sum of
//! on-CPU time over every thread of every process in the server's process group (Apache's
//! children, nginx's workers), read from `/proc/<pid>/task/*/schedstat` before and after
//! each phase; RSS is sampled
//! every 20 ms over the same processes and the peak of the sum kept. Prints medians.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use loadgen::Target;
use loadgen::webdav::{BasicAuth, DavClient, Depth, Preset, pull_vault, push_vault};

/// Processes whose process group is `pgid`: (pid, utime + stime in ticks, RSS in pages).
fn group(pgid: u32) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for ent in rd.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised name: state(3) ppid(4) pgrp(5) ... utime(14)
        // stime(15) ... rss(24), numbered as proc(5) numbers them.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        let num = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if num(5) == u64::from(pgid) {
            out.push((pid, num(14) + num(15), num(24)));
        }
    }
    out
}

/// CPU time of every task (thread) of every process in the group, in ns, from
/// `/proc/<pid>/task/<tid>/schedstat` (its first field: time spent on the CPU).
fn cpu_ns(pgid: u32) -> u64 {
    let mut total = 0;
    for (pid, _, _) in group(pgid) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            total += s
                .split_ascii_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

fn page_kib() -> u64 {
    // SAFETY: as above.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) as u64 / 1024
}

#[derive(Default, Clone, Copy)]
struct Run {
    push_s: f64,
    pull_s: f64,
    files: u64,
    push_cpu_s: f64,
    pull_cpu_s: f64,
    peak_rss_kib: u64,
    processes: usize,
    /// Vault files the pull did not bring back.
    missing: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn one(preset: Preset, vault: &Path) -> Result<Run, Box<dyn std::error::Error>> {
    let data = tempfile::tempdir()?;
    let auth = BasicAuth::new("vaultbench", "bench");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let server = preset
        .prepare(data.path(), addr, Some(&auth))?
        .start(Some(&auth))?;
    let pgid = server.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let procs = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak, procs) = (stop.clone(), peak.clone(), procs.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let g = group(pgid);
                let rss: u64 = g.iter().map(|p| p.2).sum::<u64>() * page_kib();
                peak.fetch_max(rss, Ordering::SeqCst);
                procs.fetch_max(g.len() as u64, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client = DavClient::new(
        Target::parse(&format!("http://{addr}"), false)?,
        Some(&auth),
    );
    let out = tempfile::tempdir()?;
    let c0 = cpu_ns(pgid);
    let pushed = rt.block_on(push_vault(&client, vault))?;
    let c1 = cpu_ns(pgid);
    let pulled = rt.block_on(pull_vault(&client, out.path(), Depth::One))?;
    let c2 = cpu_ns(pgid);
    stop.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    // A pull may legitimately come back short (nginx lists no dot-names); anything else
    // that differs is an error.
    let (got, want) = (tree(out.path()), tree(vault));
    let missing = want.keys().filter(|k| !got.contains_key(*k)).count();
    if got.iter().any(|(k, v)| want.get(k) != Some(v)) {
        return Err(format!("{}: a pulled file differs from the vault", preset.name()).into());
    }
    server.stop();
    Ok(Run {
        push_s: pushed.wall_ns as f64 / 1e9,
        pull_s: pulled.wall_ns as f64 / 1e9,
        files: pushed.files,
        push_cpu_s: c1.saturating_sub(c0) as f64 / 1e9,
        pull_cpu_s: c2.saturating_sub(c1) as f64 / 1e9,
        peak_rss_kib: peak.load(Ordering::SeqCst),
        processes: procs.load(Ordering::SeqCst) as usize,
        missing,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let profile = args.first().map_or("small", String::as_str);
    let runs: usize = args.get(1).map_or(Ok(3), |r| r.parse())?;
    let vault = tempfile::tempdir()?;
    let p = scenarios::profile(profile).ok_or_else(|| format!("unknown profile {profile:?}"))?;
    for f in scenarios::generate(&p, scenarios::DEFAULT_SEED) {
        let path = vault.path().join(&f.path);
        std::fs::create_dir_all(path.parent().ok_or("generated path has no parent")?)?;
        std::fs::write(&path, f.to_vec())?;
    }
    println!(
        "| server | files | cold push wall (s) | push files/s | cold pull wall (s) | pull files/s | server CPU per file pushed (ms) | per file pulled (ms) | peak RSS, process tree (MiB) | processes | pull |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for preset in Preset::ALL {
        let mut all = Vec::new();
        for _ in 0..runs {
            all.push(one(preset, vault.path())?);
        }
        let m = |f: fn(&Run) -> f64| median(all.iter().map(f).collect());
        let files = all[0].files as f64;
        println!(
            "| {} | {} | {:.2} | {:.0} | {:.2} | {:.0} | {:.3} | {:.3} | {:.1} | {} | {} |",
            preset.name(),
            all[0].files,
            m(|r| r.push_s),
            m(|r| r.files as f64 / r.push_s),
            m(|r| r.pull_s),
            m(|r| (r.files - r.missing as u64) as f64 / r.pull_s),
            m(|r| r.push_cpu_s) * 1e3 / files,
            m(|r| r.pull_cpu_s) * 1e3 / files,
            m(|r| r.peak_rss_kib as f64) / 1024.0,
            all.iter().map(|r| r.processes).max().unwrap_or(0),
            match all.iter().map(|r| r.missing).max().unwrap_or(0) {
                0 => "byte-identical".to_owned(),
                n => format!("{n} files not listed (dot-names), the rest byte-identical"),
            },
        );
    }
    Ok(())
}

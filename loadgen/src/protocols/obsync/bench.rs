//! The side-by-side ratio behind `vaultbench load bench-peer`: is the generator ever the
//! bottleneck? Drives the same trivial endpoint (`GET /livez`) with vaultbench (signing every
//! request) and with `wrk` at the same connection count, alternating, and returns the
//! requests/s ratio, CPU-µs per request of each, and the signing cost (the
//! generator's speed target: at least 0.8 × the peer's requests/s). The command's flags and output are the harness's
//! (`harness/src/commands/load.rs`).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::protocols::obsync::client::{Device, WorkerConn, nonce_rng};
use crate::protocols::obsync::route::{Mode, Route, RouteLoadConfig, run_route_load};
use crate::target::Target;

/// What `bench-peer` runs (the harness's `load bench-peer` flags).
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Server to drive; `None`: start `BIN serve-ref` on a temp data dir.
    pub target: Option<String>,
    /// Allow a target outside loopback.
    pub allow_remote: bool,
    /// Binary that serves the reference server as `BIN serve-ref --data DIR`
    /// (`None`: this executable).
    pub server_bin: Option<PathBuf>,
    /// Connections (requests in flight) for both generators.
    pub connections: usize,
    /// Length of each run, whole seconds (wrk's resolution).
    pub duration: Duration,
    /// Rounds; each runs both generators, order alternating.
    pub rounds: usize,
    /// The wrk binary.
    pub wrk: PathBuf,
    /// Held connections to compare (0: none): wrk holding this many keep-alive connections
    /// against vaultbench holding this many devices' long polls. Needs the server `run`
    /// starts (its setup token enrols the devices).
    pub held: usize,
}

/// A child process killed and reaped when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin serve-ref --data DIR --listen 127.0.0.1:0` and waits for its
/// `listening on http://IP:PORT` line.
fn start_server(bin: &PathBuf, data: &std::path::Path) -> anyhow::Result<(ChildGuard, String)> {
    let mut child = Command::new(bin)
        .args(["serve-ref", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve-ref", bin.display()))?;
    let stdout = child.stdout.take().context("server stdout")?;
    let guard = ChildGuard(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(15))
        .context("the reference server did not print its address within 15 s")?;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("unexpected first server line {:?}", line.trim()))?
        .to_owned();
    Ok((guard, url))
}

/// User + system CPU time of this process (`RUSAGE_SELF`) or its reaped children.
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own; both `who` values are valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One generator run.
#[derive(Debug, Clone, Serialize)]
pub struct GenRun {
    pub round: usize,
    pub generator: &'static str,
    pub requests: u64,
    pub requests_per_s: f64,
    pub cpu_us_per_request: f64,
}

/// Held connections side by side, in one run: what each generator's RSS grows by per
/// connection it holds.
#[derive(Debug, Clone, Serialize)]
pub struct HeldReport {
    pub connections: usize,
    /// wrk's peak RSS with `-c N` and with `-c 1`, KiB.
    pub wrk_peak_kib: u64,
    pub wrk_base_kib: u64,
    /// This process's RSS before its devices' long polls and while all of them are held, KiB.
    pub vaultbench_before_kib: u64,
    pub vaultbench_holding_kib: u64,
    /// Per held connection: wrk's (`-c N` over `-c 1`) and vaultbench's (holding over
    /// before), KiB.
    pub wrk_kib_per_connection: f64,
    pub vaultbench_kib_per_connection: f64,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub target: String,
    pub connections: usize,
    pub duration_s: u64,
    pub runs: Vec<GenRun>,
    /// Median over rounds of vaultbench req/s ÷ wrk req/s.
    pub ratio_median: f64,
    pub vaultbench_cpu_us_per_request: f64,
    pub wrk_cpu_us_per_request: f64,
    /// Mean signing time (hash + HMAC) per request during the vaultbench runs, µs.
    pub signing_mean_us: f64,
    /// A tight loop of `protocol::sign_request`, ns per signature.
    pub sign_loop_ns: f64,
    /// A tight loop of the generator's signing path (nonce + canonical + cached-key HMAC).
    pub device_sign_loop_ns: f64,
    /// Held connections side by side, when asked for.
    pub held: Option<HeldReport>,
}

fn median(v: Vec<f64>) -> f64 {
    contract::schema::median(&v).unwrap_or(f64::NAN)
}

fn run_wrk(wrk: &PathBuf, url: &str, conns: usize, secs: u64) -> anyhow::Result<(u64, f64)> {
    let threads = conns.clamp(1, 2);
    let out = Command::new(wrk)
        .args(["-t", &threads.to_string(), "-c", &conns.to_string()])
        .args(["-d", &format!("{secs}s"), &format!("{url}/livez")])
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!(
                "running {} (install it: apt-get install -y wrk, or pass --wrk PATH)",
                wrk.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} exited with {}: {}",
            wrk.display(),
            out.status,
            text.trim()
        );
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("no Requests/sec in wrk output: {}", text.trim()))?;
    let reqs = text
        .lines()
        .find_map(|l| {
            l.split_once(" requests in ")
                .map(|(n, _)| n.trim().to_owned())
        })
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or((rps * secs as f64) as u64);
    Ok((reqs, rps))
}

/// This process's resident set, KiB (`VmRSS`).
fn rss_kib_self() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// A process's peak resident set, KiB (`VmHWM`: the peak of its own address space, so a
/// child's counts from its `exec` on, unlike `wait4`'s `ru_maxrss`, which keeps the forked
/// parent's pages).
fn peak_kib_of(pid: u32) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    t.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// wrk holding `conns` keep-alive connections on `/livez` for `secs`: its peak RSS in KiB,
/// read from `/proc` while it runs (the last reading before it exits).
fn wrk_peak_kib(wrk: &PathBuf, url: &str, conns: usize, secs: u64) -> anyhow::Result<u64> {
    let threads = conns.clamp(1, 2);
    let child = Command::new(wrk)
        .args(["-t", &threads.to_string(), "-c", &conns.to_string()])
        .args(["-d", &format!("{secs}s"), &format!("{url}/livez")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", wrk.display()))?;
    let pid = child.id();
    let mut guard = ChildGuard(child);
    let deadline = Instant::now() + Duration::from_secs(secs + 15);
    let mut peak = None;
    loop {
        // Read before asking whether it exited: a reading taken after the exit is not there.
        if let Some(k) = peak_kib_of(pid) {
            peak = Some(k);
        }
        match guard.0.try_wait() {
            Ok(Some(status)) if status.success() => {
                return peak.with_context(|| format!("no reading of {}'s memory", wrk.display()));
            }
            Ok(Some(status)) => bail!("{} -c {conns} exited with {status}", wrk.display()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => bail!(
                "{} -c {conns} did not finish within {} s",
                wrk.display(),
                secs + 15
            ),
            Err(e) => bail!("waiting for {}: {e}", wrk.display()),
        }
    }
}

/// vaultbench holding `n` devices' long polls on the server whose setup token is at
/// `token`: enrols them (one shared pool), then holds every poll for a while and reads this
/// process's RSS before and while they are held.
async fn vaultbench_holding(
    target: &Target,
    token: &std::path::Path,
    n: usize,
) -> anyhow::Result<(u64, u64)> {
    use crate::protocols::obsync::held::HeldConn;
    use crate::protocols::obsync::sync::wait_changes_held;
    let token = std::fs::read_to_string(token)
        .with_context(|| format!("the server's setup token {}", token.display()))?;
    let mut devices =
        crate::protocols::obsync::enroll::enroll(target, token.trim(), 1, 0x5eed).await?;
    for i in 1..n {
        let d = crate::protocols::obsync::enroll::pair_sharing(&devices[0], i, 0x5eed, 0).await?;
        devices.push(d);
    }
    let head = crate::protocols::obsync::sync::wait_changes(&devices[0], 0, 0)
        .await?
        .head_seq;
    let before = rss_kib_self();
    let mut set = tokio::task::JoinSet::new();
    for d in devices {
        set.spawn(async move {
            let mut conn = HeldConn::default();
            let _ = wait_changes_held(&d, &mut conn, head, 30).await;
        });
    }
    // Every poll out and waiting: the server answers none of them before its wait.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let holding = rss_kib_self();
    set.abort_all();
    while set.join_next().await.is_some() {}
    Ok((before, holding))
}

/// Signing cost in a tight loop, ns per signature: (protocol crate's `sign_request`, the
/// generator's closed-loop path = nonce from the worker's stream + clock + canonical string in
/// a reused buffer + precomputed-key HMAC, as `Device::send_lean` signs).
fn sign_loop_ns(dev: &Device) -> (f64, f64) {
    let creds = protocol::sign::DeviceCredentials {
        device_id: "00112233445566778899aabbccddeeff".into(),
        secret: [7; 32],
    };
    let n = 200_000u32;
    let t0 = Instant::now();
    let mut acc = 0usize;
    for i in 0..n {
        let h = protocol::sign_request(
            &creds,
            "GET",
            "/livez",
            1_700_000_000 + i64::from(i),
            "0123456789abcdef0123456789abcdef",
            protocol::sign::EMPTY_BODY_SHA256,
        );
        acc += h.sig.len();
    }
    let plain = t0.elapsed().as_nanos() as f64 / f64::from(n);
    let mut w = WorkerConn::new(dev);
    let t0 = Instant::now();
    for _ in 0..n {
        let s = w.sign(
            dev,
            "GET",
            "/livez",
            protocol::sign::EMPTY_BODY_SHA256.as_bytes(),
        );
        acc += usize::from(s.sig[0]);
    }
    std::hint::black_box(acc);
    (plain, t0.elapsed().as_nanos() as f64 / f64::from(n))
}

/// Runs the comparison; `on_round` sees each round's two runs (vaultbench's, wrk's) as it
/// ends.
pub async fn run(
    a: BenchConfig,
    mut on_round: impl FnMut(&GenRun, &GenRun),
) -> anyhow::Result<BenchReport> {
    if a.connections == 0 {
        bail!("--connections 0: must be at least 1");
    }
    if a.rounds == 0 {
        bail!("--rounds 0: must be at least 1");
    }
    let secs = a.duration.as_secs();
    if secs == 0 || a.duration.subsec_nanos() != 0 {
        bail!(
            "--duration {:?}: whole seconds only (wrk's resolution)",
            a.duration
        );
    }
    let data = tempfile::tempdir().context("temp dir for the reference server")?;
    let (_guard, url) = match &a.target {
        Some(t) => (None, t.clone()),
        None => {
            let bin = match &a.server_bin {
                Some(b) => b.clone(),
                None => std::env::current_exe().context("locating this executable")?,
            };
            let (g, url) = start_server(&bin, data.path())?;
            (Some(g), url)
        }
    };
    let target = Target::parse(&url, a.allow_remote)?;
    // /livez needs no credentials; the device still signs every request so that the
    // measured cost includes signing, exactly as on device routes.
    let creds = protocol::sign::DeviceCredentials {
        device_id: "00112233445566778899aabbccddeeff".into(),
        secret: [7; 32],
    };
    let dev = Device::new(
        target.clone(),
        creds,
        0,
        String::new(),
        nonce_rng(0x5eed, 0, 0),
    );
    let cfg = RouteLoadConfig {
        route: Route::Livez,
        mode: Mode::Closed {
            in_flight: a.connections,
        },
        duration: a.duration,
        max_requests: u64::MAX,
        seed: 0x5eed,
    };
    let mut runs = Vec::new();
    let mut ratios = Vec::new();
    let mut sign_means = Vec::new();
    for round in 0..a.rounds {
        let mut vb = None;
        let mut wr = None;
        for step in 0..2 {
            let vaultbench_turn = (step == 0) == (round % 2 == 0);
            if vaultbench_turn {
                let c0 = cpu_time(libc::RUSAGE_SELF);
                let r = run_route_load(std::slice::from_ref(&dev), &cfg).await?;
                let cpu = cpu_time(libc::RUSAGE_SELF) - c0;
                if r.stats.ok() == 0 {
                    bail!(
                        "vaultbench got no 2xx from {}/livez: {:?}",
                        target.base(),
                        r.stats.status
                    );
                }
                sign_means.push(r.signing_summary().mean_us);
                vb = Some(GenRun {
                    round,
                    generator: "vaultbench",
                    requests: r.requests,
                    requests_per_s: r.stats.ok() as f64 / (r.wall_ns as f64 / 1e9),
                    cpu_us_per_request: cpu.as_secs_f64() * 1e6 / r.requests.max(1) as f64,
                });
            } else {
                let c0 = cpu_time(libc::RUSAGE_CHILDREN);
                let wrk = a.wrk.clone();
                let (u, c) = (target.base().to_owned(), a.connections);
                let (reqs, rps) =
                    tokio::task::spawn_blocking(move || run_wrk(&wrk, &u, c, secs)).await??;
                let cpu = cpu_time(libc::RUSAGE_CHILDREN) - c0;
                wr = Some(GenRun {
                    round,
                    generator: "wrk",
                    requests: reqs,
                    requests_per_s: rps,
                    cpu_us_per_request: cpu.as_secs_f64() * 1e6 / reqs.max(1) as f64,
                });
            }
        }
        let (vb, wr) = (vb.expect("ran"), wr.expect("ran"));
        ratios.push(vb.requests_per_s / wr.requests_per_s);
        on_round(&vb, &wr);
        runs.push(vb);
        runs.push(wr);
    }
    let pick = |g: &str| {
        median(
            runs.iter()
                .filter(|r| r.generator == g)
                .map(|r| r.cpu_us_per_request)
                .collect(),
        )
    };
    let (sign_loop_ns, device_sign_loop_ns) = sign_loop_ns(&dev);
    let held = match (a.held, &a.target) {
        (0, _) => None,
        (_, Some(_)) => bail!(
            "--held {}: holding devices needs the server bench-peer starts (leave out --url)",
            a.held
        ),
        (n, None) => {
            let (wrk, u) = (a.wrk.clone(), target.base().to_owned());
            let (base, peak) = tokio::task::spawn_blocking(move || {
                Ok::<_, anyhow::Error>((
                    wrk_peak_kib(&wrk, &u, 1, 2)?,
                    wrk_peak_kib(&wrk, &u, n, 3)?,
                ))
            })
            .await??;
            let (before, holding) =
                vaultbench_holding(&target, &data.path().join("setup-token"), n).await?;
            let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / n as f64;
            Some(HeldReport {
                connections: n,
                wrk_peak_kib: peak,
                wrk_base_kib: base,
                vaultbench_before_kib: before,
                vaultbench_holding_kib: holding,
                wrk_kib_per_connection: per(base, peak),
                vaultbench_kib_per_connection: per(before, holding),
            })
        }
    };
    let report = BenchReport {
        held,
        target: target.base().to_owned(),
        connections: a.connections,
        duration_s: secs,
        ratio_median: median(ratios),
        vaultbench_cpu_us_per_request: pick("vaultbench"),
        wrk_cpu_us_per_request: pick("wrk"),
        signing_mean_us: median(sign_means),
        sign_loop_ns,
        device_sign_loop_ns,
        runs,
    };
    Ok(report)
}

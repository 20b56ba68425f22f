//! The cost sample: the scenario driven twice more against fresh servers, once under
//! Valgrind's callgrind (instructions retired per phase, class `cost`) and once under strace
//! (syscalls by name per phase, class `exact`). Both wrap any target command line; timing
//! samples never run under either, since both distort time.
//!
//! Boundaries come from the tools themselves, as `docs/cost-channel-study.md` measured and
//! recommends: at each phase boundary the harness sends `vgdb --pid=P dump <phase>`, which
//! reaches even a server idle in `epoll_wait` (vgdb interrupts it with ptrace) and makes
//! callgrind write the instructions since the last dump as a part named after the phase; the
//! strace run records the wall-clock time of each boundary, and a call counts in the phase its
//! entry line's `-ttt` time falls in (strace and the harness read the same clock). The two tools
//! cannot share one run: vgdb's ptrace and strace's would be two tracers on one process.
//! `perf_event_open` is not used: a 2-vCPU cloud VM exposes no PMU (the study tried it).

use anyhow::{Context, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use contract::key::{SYSCALLS as SYSCALLS_GROUP, Scope, ServerKey};

use crate::sample::checkpoint_cost::{PushTrace, TICK, tick_name};
use crate::sample::phases::Boundary;
use crate::sample::plan::Metrics;
use crate::sample::server_cost::Work;

/// Which tool a cost run wraps the target in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostTool {
    Callgrind,
    Strace,
}

/// The syscalls counted by name. `rename` sums rename, renameat and renameat2, `mkdir` sums
/// mkdir and mkdirat; `write` counts only writes to regular files (the study found tokio's
/// eventfd wake-ups and socket writes vary with thread interleaving; file writes repeat exactly).
pub const SYSCALLS: &[&str] = &["fsync", "fdatasync", "rename", "openat", "mkdir", "write"];

/// How long one `vgdb dump` may take before the cost sample fails: the study's slowest dump
/// under load took 2.18 s; ten seconds is more than four times that.
pub const DUMP_TIMEOUT: Duration = Duration::from_secs(10);

/// The tools `--cost` needs and their versions, checked before any sample runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CostTools {
    /// e.g. `valgrind-callgrind 3.19.0`.
    pub instructions: String,
    /// e.g. `strace 6.1`.
    pub syscalls: String,
}

/// Finds valgrind, vgdb, strace and setpriv, or fails with one line naming the Debian packages.
pub fn check_tools() -> anyhow::Result<CostTools> {
    let missing: Vec<&str> = [
        ("valgrind", "valgrind"),
        ("vgdb", "valgrind"),
        ("strace", "strace"),
        ("setpriv", "util-linux"),
    ]
    .into_iter()
    .filter(|(exe, _)| which(exe).is_none())
    .map(|(_, pkg)| pkg)
    .collect();
    if !missing.is_empty() {
        let mut pkgs = missing.clone();
        pkgs.dedup();
        bail!(
            "--cost needs valgrind and strace: install the Debian package(s) {} (apt-get install -y {})",
            pkgs.join(", "),
            pkgs.join(" ")
        );
    }
    let first_line = |exe: &str, arg: &str| -> String {
        Command::new(exe)
            .arg(arg)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            })
            .unwrap_or_default()
    };
    let vg = first_line("valgrind", "--version");
    let st = first_line("strace", "-V");
    Ok(CostTools {
        instructions: format!("valgrind-callgrind {}", vg.trim_start_matches("valgrind-")),
        syscalls: format!("strace {}", st.trim_start_matches("strace -- version ")),
    })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// The command line put in front of the target's for `tool`, writing into `out`.
pub fn wrapper(tool: CostTool, out: &Path) -> Vec<String> {
    match tool {
        CostTool::Callgrind => vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            // Function-level costs keep each part small; syscall *time* would be wall-clock
            // noise; one file per process with a part per dump, named by its trigger.
            "--dump-instr=no".into(),
            "--collect-systime=no".into(),
            "--combine-dumps=yes".into(),
            "--trace-children=yes".into(),
            format!("--callgrind-out-file={}/callgrind.out.%p", out.display()),
            "--log-file=/dev/null".into(),
            "--".into(),
        ],
        CostTool::Strace => vec![
            "strace".into(),
            "-f".into(),
            "-y".into(),
            "-ttt".into(),
            // Time inside each call, for the blocked-time table; every syscall but those
            // that wait for work, which a seccomp filter lets through without a stop.
            "-T".into(),
            "--seccomp-bpf".into(),
            "-e".into(),
            format!("trace=!{}", WAITING.join(",")),
            "-o".into(),
            format!("{}/strace.log", out.display()),
            "--".into(),
            // The server's parent is strace, which does not take it along when it is killed:
            // the server dies with strace, as every server dies with its sample.
            "setpriv".into(),
            "--pdeathsig".into(),
            "KILL".into(),
            "--".into(),
        ],
    }
}

/// Callgrind's boundaries: a `vgdb dump` to every process of the server's tree.
pub struct CallgrindMarks {
    root: u32,
    started: bool,
    /// The work of each dumped part, by its scope (the part is named by the scope's text).
    pub work: BTreeMap<Scope, Work>,
    /// Wall time of each dump, ms.
    pub dump_ms: Vec<f64>,
    /// The dumper of the checkpointed push running now.
    ticker: Option<Ticker>,
    /// Every checkpointed push of the run, with its tick dumps.
    pub pushes: Vec<PushTrace>,
}

/// Dumps a part every [`TICK`] while a checkpointed push runs (`sample::checkpoint_cost`).
struct Ticker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    started: Instant,
    trace: PushTrace,
    handle: Option<std::thread::JoinHandle<Ticks>>,
}

/// The tick parts dumped (name, the dump's start and end since the push began) and each dump's
/// wall time in ms.
type Ticks = (Vec<(String, Duration, Duration)>, Vec<f64>);

impl Ticker {
    fn start(root: u32, phase: &str) -> Ticker {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let (s, name) = (stop.clone(), phase.to_owned());
        let handle = std::thread::Builder::new()
            .name("vb-tick".into())
            .spawn(move || {
                let (mut ticks, mut ms) = (Vec::new(), Vec::new());
                for k in 1u32.. {
                    let next = Instant::now() + TICK;
                    while Instant::now() < next {
                        if s.load(Ordering::Relaxed) {
                            return (ticks, ms);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let part = tick_name(&name, k);
                    let a = Instant::now();
                    let pids: Vec<u32> = match procstat::Snapshot::capture(root) {
                        Ok(snap) => snap.processes.keys().copied().collect(),
                        Err(_) => vec![root],
                    };
                    // A failed dump ends the ticks; the windows are then read from fewer
                    // points (the phase's own dump still closes the push).
                    if pids.iter().any(|&pid| vgdb_dump(pid, &part).is_err()) {
                        return (ticks, ms);
                    }
                    let b = Instant::now();
                    ticks.push((part, a - started, b - started));
                    ms.push((b - a).as_secs_f64() * 1e3);
                }
                (ticks, ms)
            })
            .ok();
        Ticker {
            stop,
            started,
            trace: PushTrace {
                phase: phase.to_owned(),
                ..PushTrace::default()
            },
            handle,
        }
    }

    /// Stops the dumps (waiting for one under way) and returns the push's trace so far.
    fn finish(mut self) -> (PushTrace, Vec<f64>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (ticks, ms) = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let mut trace = std::mem::take(&mut self.trace);
        trace.ticks = ticks;
        trace.ended = self.started.elapsed();
        (trace, ms)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl CallgrindMarks {
    pub fn new(root: u32) -> CallgrindMarks {
        CallgrindMarks {
            root,
            started: false,
            work: BTreeMap::new(),
            dump_ms: Vec::new(),
            ticker: None,
            pushes: Vec::new(),
        }
    }

    fn dump(&mut self, name: &str) -> anyhow::Result<()> {
        let t0 = Instant::now();
        let pids: Vec<u32> = match procstat::Snapshot::capture(self.root) {
            Ok(s) => s.processes.keys().copied().collect(),
            Err(_) => vec![self.root],
        };
        for pid in pids {
            vgdb_dump(pid, name)?;
        }
        self.dump_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        Ok(())
    }
}

/// `vgdb --pid=P dump NAME`, bounded by [`DUMP_TIMEOUT`].
fn vgdb_dump(pid: u32, name: &str) -> anyhow::Result<()> {
    let mut vgdb = Command::new("vgdb");
    vgdb.arg(format!("--pid={pid}"))
        // A server idle in epoll_wait runs no code that would poll for vgdb, so vgdb
        // interrupts it with ptrace after this wait; its default of 100 ms was most of a
        // dump's 0.2 s here (measured: 0.21 s -> 0.12 s per dump at 5 ms).
        .arg("--max-invoke-ms=5")
        .arg("dump")
        .arg(name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Registered: the sample may be its targets' subreaper (`sample::subreaper`).
    let mut child =
        crate::sample::subreaper::spawn_command(crate::sample::subreaper::Own::Helper, &mut vgdb)
            .context("starting vgdb")?;
    let deadline = Instant::now() + DUMP_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("vgdb --pid={pid} dump {name} failed ({status})");
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "vgdb --pid={pid} dump {name} gave no answer within {} s (killed)",
                DUMP_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Boundary for CallgrindMarks {
    fn begin(&mut self) -> anyhow::Result<()> {
        // Start-up and enrolment go into a part of their own; later phases follow one another
        // with nothing in between (no /metrics reads in this run), so one dump per phase end
        // suffices.
        if !self.started {
            self.started = true;
            self.dump("setup")?;
        }
        Ok(())
    }
    fn end(&mut self, scope: &Scope, work: Work, _: bool, _: &mut Metrics) -> anyhow::Result<()> {
        // A push that failed before `push_ended` still stops its dumps first.
        drop(self.ticker.take());
        self.dump(&scope.to_string())?;
        self.work.insert(scope.clone(), work);
        Ok(())
    }
    fn scrapes(&self) -> bool {
        false
    }
    fn push_started(&mut self, phase: &str) -> anyhow::Result<()> {
        self.ticker = Some(Ticker::start(self.root, phase));
        Ok(())
    }
    fn push_ended(&mut self, r: &loadgen::TransferReport) -> anyhow::Result<()> {
        if let Some(t) = self.ticker.take() {
            let (mut trace, ms) = t.finish();
            trace.checkpoints_of(r);
            self.dump_ms.extend(ms);
            self.pushes.push(trace);
        }
        Ok(())
    }
}

/// strace's boundaries: the wall-clock window of every phase, and a `/proc` snapshot of the
/// traced tree at each end for the per-thread scheduler figures.
#[derive(Default)]
pub struct StraceMarks {
    open: Option<f64>,
    /// The traced tree's root (strace itself), 0 for none.
    pub root: u32,
    snapshot: Option<procstat::Snapshot>,
    /// (part, start, end) in Unix seconds.
    pub windows: Vec<(Scope, f64, f64)>,
    /// The parts that were time-bounded route steps: their counts scale with throughput.
    pub timed: BTreeSet<Scope>,
    /// Per part, on-CPU, run-queue and blocked time per thread name.
    pub threads: BTreeMap<Scope, Vec<contract::profile::ThreadTime>>,
    /// The checkpointed push running now.
    push: Option<PushTrace>,
    /// Every checkpointed push of the run.
    pub pushes: Vec<PushTrace>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Boundary for StraceMarks {
    fn begin(&mut self) -> anyhow::Result<()> {
        self.snapshot = (self.root != 0)
            .then(|| procstat::Snapshot::capture(self.root).ok())
            .flatten();
        self.open = Some(unix_now());
        Ok(())
    }
    fn end(&mut self, scope: &Scope, work: Work, _: bool, _: &mut Metrics) -> anyhow::Result<()> {
        let Some(t0) = self.open.take() else {
            bail!("strace run: phase {scope} ended without a start");
        };
        self.windows.push((scope.clone(), t0, unix_now()));
        if let Some(a) = self.snapshot.take()
            && let Ok(b) = procstat::Snapshot::capture(self.root)
        {
            self.threads.insert(scope.clone(), thread_times(&a, &b));
        }
        if work.timed {
            self.timed.insert(scope.clone());
        }
        Ok(())
    }
    fn push_started(&mut self, phase: &str) -> anyhow::Result<()> {
        self.push = Some(PushTrace {
            phase: phase.to_owned(),
            started_unix: unix_now(),
            ..PushTrace::default()
        });
        Ok(())
    }
    fn push_ended(&mut self, r: &loadgen::TransferReport) -> anyhow::Result<()> {
        if let Some(mut t) = self.push.take() {
            t.ended = Duration::from_secs_f64((unix_now() - t.started_unix).max(0.0));
            t.checkpoints_of(r);
            self.pushes.push(t);
        }
        Ok(())
    }
}

/// Instructions per dump name in callgrind's combined output: each part's
/// `desc: Trigger: Client Request: dump NAME`-style trigger line names it and its `totals:`
/// (or `summary:`) line carries the instruction count. Parts of the same name add up (one per
/// process of a forking server).
pub fn parse_callgrind(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut name: Option<String> = None;
    let mut counted = false;
    for line in text.lines() {
        if line.starts_with("part:") {
            name = None;
            counted = false;
        } else if let Some(t) = line.strip_prefix("desc: Trigger:") {
            // `dump NAME` as vgdb sends it, whatever callgrind puts before it.
            name = t
                .rsplit_once("dump ")
                .map(|(_, n)| n.trim().to_owned())
                .filter(|n| !n.is_empty());
        } else if let Some(v) = line
            .strip_prefix("totals:")
            .or_else(|| line.strip_prefix("summary:"))
            && !counted
            && let Some(n) = &name
            && let Some(x) = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
        {
            *out.entry(n.clone()).or_insert(0) += x;
            counted = true;
        }
    }
    out
}

/// Syscalls by name per window from an `strace -f -y -ttt` log: a call counts in the window
/// its entry time falls in (`<... resumed>` lines are the second half of one already counted);
/// `write` only to a regular file (`-y` shows a path outside `/dev`).
pub fn parse_strace(
    text: &str,
    windows: &[(Scope, f64, f64)],
) -> BTreeMap<Scope, BTreeMap<&'static str, u64>> {
    let mut out: BTreeMap<Scope, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for (w, _, _) in windows {
        let e = out.entry(w.clone()).or_default();
        for s in SYSCALLS {
            e.insert(s, 0);
        }
    }
    for line in text.lines() {
        let mut it = line.split_whitespace();
        // With -f every line starts with the pid, then the -ttt time.
        let (Some(_pid), Some(ts), Some(call)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(t) = ts.parse::<f64>() else { continue };
        if call.starts_with("<...") {
            continue;
        }
        let Some((sys, args)) = call.split_once('(') else {
            continue;
        };
        let name: &'static str = match sys {
            "fsync" => "fsync",
            "fdatasync" => "fdatasync",
            "rename" | "renameat" | "renameat2" => "rename",
            "openat" => "openat",
            "mkdir" | "mkdirat" => "mkdir",
            "write" => {
                // `write(5</data/journal>, ...`: the fd's path between `<` and `>`.
                let rest = line.split_once("write(").map(|(_, r)| r).unwrap_or(args);
                let path = rest
                    .split_once('<')
                    .and_then(|(fd, p)| fd.chars().all(|c| c.is_ascii_digit()).then_some(p))
                    .unwrap_or("");
                if !path.starts_with('/') || path.starts_with("/dev/") {
                    continue;
                }
                "write"
            }
            _ => continue,
        };
        if let Some((w, _, _)) = windows.iter().find(|(_, a, b)| t >= *a && t <= *b) {
            *out.entry(w.clone()).or_default().entry(name).or_insert(0) += 1;
        }
    }
    out
}

/// The cost keys of the callgrind run: `<part>.server.instructions` and per request (or per
/// file for a push or pull), class `cost`; the `setup` part (start-up, enrolment) is left out.
pub fn instruction_keys(
    counts: &BTreeMap<String, u64>,
    work: &BTreeMap<Scope, Work>,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    for (part, w) in work {
        let Some(&n) = counts.get(&part.to_string()) else {
            bail!("callgrind wrote no part for phase {part}");
        };
        let key = |stat: &str| ServerKey::new(part.clone(), stat);
        m.cost(key("instructions"), n as f64, "instructions");
        match w.files {
            Some(f) if f > 0 => m.cost(
                key("instructions_per_file"),
                (n as f64 / f as f64).round(),
                "instructions/file",
            ),
            _ if w.requests > 0 => m.cost(
                key("instructions_per_request"),
                (n as f64 / w.requests as f64).round(),
                "instructions/request",
            ),
            _ => {}
        }
    }
    Ok(())
}

/// `<part>.server.syscalls.<name>`, class `exact`: a phase's or fixed-work step's counts are
/// what the build does for that work. A time-bounded step's (one of `timed`) did as many
/// requests as the throughput allowed, so its counts are `resource` keys.
pub fn syscall_keys(
    counts: &BTreeMap<Scope, BTreeMap<&'static str, u64>>,
    timed: &BTreeSet<Scope>,
    m: &mut Metrics,
) {
    for (part, by) in counts {
        for (name, n) in by {
            let key = ServerKey::grouped(part.clone(), SYSCALLS_GROUP, name);
            if timed.contains(part) {
                m.resource(key, *n as f64, "count");
            } else {
                m.exact(key, *n as f64, "count");
            }
        }
    }
}

/// Every `callgrind.out.*` file in `dir`, parsed and summed.
pub fn read_callgrind_dir(dir: &Path) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("callgrind.out."))
        {
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            for (k, v) in parse_callgrind(&text) {
                *out.entry(k).or_insert(0) += v;
            }
        }
    }
    Ok(out)
}

/// One part's functions as callgrind counted them: name -> (self, inclusive) instructions,
/// and the inclusive instructions of every caller -> callee pair.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartFunctions {
    pub fns: BTreeMap<String, (u64, u64)>,
    pub calls: BTreeMap<(String, String), u64>,
}

impl PartFunctions {
    fn add(&mut self, other: PartFunctions) {
        for (f, (s, i)) in other.fns {
            let x = self.fns.entry(f).or_insert((0, 0));
            x.0 += s;
            x.1 += i;
        }
        for (k, v) in other.calls {
            *self.calls.entry(k).or_insert(0) += v;
        }
    }
}

/// Collapsed stacks from a part's call graph, top down: each root (a function whose
/// inclusive cost exceeds what its callers in the part account for) is expanded into its
/// callees in proportion to each call's inclusive cost. Callgrind counts by caller–callee pair,
/// not by whole stack, so below the first level a frame's split among its callers is this
/// proportion, not a measurement. Stacks under `min` instructions stay in their parent frame.
pub fn fold_stacks(g: &PartFunctions, min: u64) -> Vec<contract::profile::Stack> {
    let mut callees: BTreeMap<&str, Vec<(&str, u64)>> = BTreeMap::new();
    let mut incoming: BTreeMap<&str, u64> = BTreeMap::new();
    for ((a, b), v) in &g.calls {
        if a != b {
            callees.entry(a).or_default().push((b, *v));
            *incoming.entry(b).or_insert(0) += v;
        }
    }
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let min = min.max(1) as f64;
    #[allow(clippy::too_many_arguments)]
    fn expand<'a>(
        g: &'a PartFunctions,
        callees: &BTreeMap<&'a str, Vec<(&'a str, u64)>>,
        f: &'a str,
        weight: f64,
        stack: &mut Vec<&'a str>,
        min: f64,
        out: &mut BTreeMap<String, f64>,
    ) {
        stack.push(f);
        let incl = g.fns.get(f).map_or(0, |v| v.1) as f64;
        let mut below = 0.0;
        if incl > 0.0 && stack.len() < 64 {
            for (c, e) in callees.get(f).map(Vec::as_slice).unwrap_or(&[]) {
                let w = *e as f64 * weight / incl;
                if w >= min && !stack.contains(c) {
                    expand(g, callees, c, w, stack, min, out);
                    below += w;
                }
            }
        }
        let own = weight - below;
        if own >= 0.5 {
            *out.entry(stack.join(";")).or_insert(0.0) += own;
        }
        stack.pop();
    }
    for (f, (_, incl)) in &g.fns {
        let root = incl.saturating_sub(incoming.get(f.as_str()).copied().unwrap_or(0));
        if root as f64 >= min {
            expand(g, &callees, f, root as f64, &mut Vec::new(), min, &mut out);
        }
    }
    out.into_iter()
        .map(|(frames, v)| contract::profile::Stack {
            frames,
            ir: v.round() as u64,
        })
        .filter(|s| s.ir > 0)
        .collect()
}

/// Per dump name, every function's self and inclusive instructions in callgrind's combined
/// output. Names are compressed (`fn=(12) name` once, `fn=(12)` after, one table per file);
/// a cost line after `fn=` is the function's own cost, the line after `calls=` is the
/// inclusive cost of that call, which adds to the caller's inclusive cost (a direct recursive
/// call excepted). Parts of one name add up, as in [`parse_callgrind`].
pub fn parse_callgrind_functions(text: &str) -> BTreeMap<String, PartFunctions> {
    let mut out: BTreeMap<String, PartFunctions> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut part: Option<String> = None;
    let mut current: Option<String> = None;
    let mut callee: Option<String> = None;
    let mut call_line = false;
    // `fn=(12) name` or `fn=(12)` or `fn=name`: the name, the table filled as it goes.
    let mut resolve = |spec: &str| -> String {
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix('(')
            && let Some((id, name)) = rest.split_once(')')
        {
            let name = name.trim();
            if name.is_empty() {
                return names.get(id).cloned().unwrap_or_else(|| format!("({id})"));
            }
            let clean = clean_name(name);
            names.insert(id.to_owned(), clean.clone());
            return clean;
        }
        clean_name(spec)
    };
    for line in text.lines() {
        if line.starts_with("part:") {
            part = None;
            current = None;
            callee = None;
            call_line = false;
            continue;
        }
        if let Some(t) = line.strip_prefix("desc: Trigger:") {
            part = t
                .rsplit_once("dump ")
                .map(|(_, n)| n.trim().to_owned())
                .filter(|n| !n.is_empty());
            continue;
        }
        if let Some(spec) = line.strip_prefix("fn=") {
            current = Some(resolve(spec));
            continue;
        }
        if let Some(spec) = line.strip_prefix("cfn=") {
            callee = Some(resolve(spec));
            continue;
        }
        if line.starts_with("calls=") {
            call_line = true;
            continue;
        }
        let first = line.as_bytes().first().copied().unwrap_or(b' ');
        if !(first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*') {
            continue;
        }
        let Some(ir) = line
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<u64>().ok())
        else {
            call_line = false;
            continue;
        };
        let (Some(p), Some(f)) = (&part, &current) else {
            call_line = false;
            continue;
        };
        let part = out.entry(p.clone()).or_default();
        if call_line && let Some(c) = &callee {
            *part.calls.entry((f.clone(), c.clone())).or_insert(0) += ir;
        }
        let e = part.fns.entry(f.clone()).or_insert((0, 0));
        if call_line {
            if callee.as_ref() != Some(f) {
                e.1 += ir;
            }
        } else {
            e.0 += ir;
            e.1 += ir;
        }
        call_line = false;
    }
    out
}

/// A function name as a reader wants it: callgrind's recursion suffix (`f'2`) and a Rust
/// legacy name's hash (`::h0123456789abcdef`) dropped. Valgrind demangles C++ and both Rust
/// manglings itself (`--demangle=yes`, its default), so no name reaches here mangled.
pub fn clean_name(name: &str) -> String {
    let mut n = name.trim();
    if let Some((head, depth)) = n.rsplit_once('\'')
        && !depth.is_empty()
        && depth.chars().all(|c| c.is_ascii_digit())
    {
        n = head;
    }
    strip_rust_hash(n)
}

fn strip_rust_hash(n: &str) -> String {
    match n.rsplit_once("::h") {
        Some((head, h)) if h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()) => {
            head.to_owned()
        }
        _ => n.to_owned(),
    }
}

/// How many functions a cost sample hands its parent per part (by self, and by inclusive):
/// enough that an A/B's per-function medians see every function above about 0.05 % of a part.
pub const SAMPLE_FUNCTIONS: usize = 300;

/// Every `callgrind.out.*` file in `dir`, per part, as capped profiles with each part's work.
pub fn read_profiles_dir(
    dir: &Path,
    work: &BTreeMap<Scope, Work>,
) -> anyhow::Result<contract::profile::Profiles> {
    let mut all: BTreeMap<String, PartFunctions> = BTreeMap::new();
    for p in callgrind_files(dir)? {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        for (part, fns) in parse_callgrind_functions(&text) {
            all.entry(part).or_default().add(fns);
        }
    }
    // The parts dumped during a checkpointed push belong to its phase.
    let ticks: Vec<String> = all
        .keys()
        .filter(|k| crate::sample::checkpoint_cost::tick_phase(k).is_some())
        .cloned()
        .collect();
    for t in ticks {
        if let (Some(f), Some(phase)) = (
            all.remove(&t),
            crate::sample::checkpoint_cost::tick_phase(&t),
        ) {
            all.entry(phase.to_owned()).or_default().add(f);
        }
    }
    let mut out = BTreeMap::new();
    for (scope, w) in work {
        let name = scope.to_string();
        let Some(g) = all.get(&name) else { continue };
        let fns = &g.fns;
        let (work, unit) = match w.files {
            Some(f) if f > 0 => (f, "file"),
            _ if w.requests > 0 => (w.requests, "request"),
            _ => (0, ""),
        };
        let total: u64 = fns.values().map(|v| v.0).sum();
        let profile = contract::profile::PartProfile {
            total_ir: total,
            work,
            work_unit: unit.into(),
            functions: fns
                .iter()
                .map(|(n, (s, i))| contract::profile::FunctionCost {
                    name: n.clone(),
                    self_ir: *s,
                    // A call cycle through other functions (a runtime's poll calling into
                    // itself) counts its calls again; nothing includes more than the part.
                    inclusive_ir: (*i).min(total),
                })
                .collect(),
            stacks: Vec::new(),
        };
        let min = (profile.total_ir as f64 * contract::profile::STACK_MIN_SHARE) as u64;
        out.insert(
            name,
            contract::profile::PartProfile {
                stacks: fold_stacks(g, min),
                ..profile.capped(SAMPLE_FUNCTIONS)
            },
        );
    }
    Ok(out)
}

fn callgrind_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("callgrind.out."))
        {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Syscalls whose time is waiting for work, not work: left out of the blocked-time table (a
/// server idle between requests sits in them whatever it does with a request).
pub const WAITING: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "futex",
    "accept",
    "accept4",
    "nanosleep",
    "clock_nanosleep",
    "wait4",
    "waitid",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "pause",
    "io_getevents",
    "io_uring_enter",
];

/// Wall time inside each syscall per window from an `strace -f -T -ttt` log: a call spans its
/// entry time to entry time plus its `<secs>`, and each window gets the part of it that falls
/// inside (a call across a phase boundary is split there). An `<unfinished ...>` call is
/// matched with its `<... resumed>` line by pid. [`WAITING`] calls are left out.
pub fn parse_strace_times(
    text: &str,
    windows: &[(Scope, f64, f64)],
) -> BTreeMap<Scope, BTreeMap<String, (u64, f64)>> {
    let mut out: BTreeMap<Scope, BTreeMap<String, (u64, f64)>> = BTreeMap::new();
    for (w, _, _) in windows {
        out.entry(w.clone()).or_default();
    }
    let mut open: BTreeMap<&str, (String, f64)> = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(pid), Some(ts), Some(call)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(t) = ts.parse::<f64>() else { continue };
        let (name, start) = if call.starts_with("<...") {
            let Some(name) = line
                .split_once("<... ")
                .and_then(|(_, r)| r.split_once(" resumed>"))
                .map(|(n, _)| n.to_owned())
            else {
                continue;
            };
            match open.remove(pid) {
                Some((n, t0)) if n == name => (name, t0),
                _ => continue,
            }
        } else {
            let Some((sys, _)) = call.split_once('(') else {
                continue;
            };
            if line.trim_end().ends_with("<unfinished ...>") {
                open.insert(pid, (sys.to_owned(), t));
                continue;
            }
            (sys.to_owned(), t)
        };
        if WAITING.contains(&name.as_str()) {
            continue;
        }
        // The duration: the last `<secs>` of the line.
        let Some(secs) = line
            .trim_end()
            .strip_suffix('>')
            .and_then(|l| l.rsplit_once('<'))
            .and_then(|(_, x)| x.parse::<f64>().ok())
        else {
            continue;
        };
        let (begin, end) = (start, start + secs);
        for (w, a, b) in windows {
            let overlap = end.min(*b) - begin.max(*a);
            let inside = overlap > 0.0 || (secs == 0.0 && begin >= *a && begin <= *b);
            if inside {
                let e = out
                    .entry(w.clone())
                    .or_default()
                    .entry(name.clone())
                    .or_insert((0, 0.0));
                if begin >= *a && begin <= *b {
                    e.0 += 1;
                }
                e.1 += overlap.max(0.0) * 1e6;
            }
        }
    }
    out
}

/// The blocked-time table of each window: syscalls by time, largest first.
pub fn blocked_tables(
    times: &BTreeMap<Scope, BTreeMap<String, (u64, f64)>>,
    windows: &[(Scope, f64, f64)],
    threads: &BTreeMap<Scope, Vec<contract::profile::ThreadTime>>,
) -> contract::profile::Blocked {
    let mut out = BTreeMap::new();
    for (w, a, b) in windows {
        let mut syscalls: Vec<contract::profile::SyscallTime> = times
            .get(w)
            .into_iter()
            .flatten()
            .map(|(n, (c, us))| contract::profile::SyscallTime {
                name: n.clone(),
                calls: *c,
                time_us: (us * 10.0).round() / 10.0,
            })
            .collect();
        syscalls.sort_by(|x, y| {
            y.time_us
                .total_cmp(&x.time_us)
                .then_with(|| x.name.cmp(&y.name))
        });
        syscalls.truncate(contract::profile::RECORDED_FUNCTIONS);
        out.insert(
            w.to_string(),
            contract::profile::PartBlocked {
                wall_ms: ((b - a) * 1e6).round() / 1e3,
                syscalls,
                threads: threads.get(w).cloned().unwrap_or_default(),
            },
        );
    }
    out
}

/// Per thread name between two snapshots of the traced tree: on-CPU and run-queue time from
/// schedstat, and blocked time as the rest of the window (threads alive in both snapshots;
/// the tracer's own process left out).
pub fn thread_times(
    a: &procstat::Snapshot,
    b: &procstat::Snapshot,
) -> Vec<contract::profile::ThreadTime> {
    let window_ms = b.taken.duration_since(a.taken).as_secs_f64() * 1e3;
    let mut by: BTreeMap<String, (u64, f64, f64)> = BTreeMap::new();
    for (pid, p) in &b.processes {
        if p.comm == "strace" {
            continue;
        }
        let Some(pa) = a.processes.get(pid) else {
            continue;
        };
        for (tid, t) in &p.tasks {
            let Some(ta) = pa
                .tasks
                .get(tid)
                .filter(|x| x.starttime_ticks == t.starttime_ticks)
            else {
                continue;
            };
            let e = by.entry(t.comm.clone()).or_insert((0, 0.0, 0.0));
            e.0 += 1;
            e.1 += t.sched.cpu_ns.saturating_sub(ta.sched.cpu_ns) as f64 / 1e6;
            e.2 += t.sched.run_delay_ns.saturating_sub(ta.sched.run_delay_ns) as f64 / 1e6;
        }
    }
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut out: Vec<contract::profile::ThreadTime> = by
        .into_iter()
        .map(|(thread, (n, cpu, rq))| contract::profile::ThreadTime {
            thread,
            threads: n,
            on_cpu_ms: r(cpu),
            run_queue_ms: r(rq),
            blocked_ms: r((window_ms * n as f64 - cpu - rq).max(0.0)),
        })
        .collect();
    out.sort_by(|x, y| {
        y.on_cpu_ms
            .total_cmp(&x.on_cpu_ms)
            .then_with(|| x.thread.cmp(&y.thread))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_parts_are_named_by_their_dump() {
        let text = "version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: x\npart: 1\ndesc: I1 cache:\ndesc: Trigger: Client Request: dump setup\nevents: Ir\nsummary: 500\nfn=(1) main\n3 4\ntotals: 500\n\
part: 2\ndesc: Trigger: dump cold_push\nevents: Ir\nsummary: 1200\ntotals: 1200\npart: 3\ndesc: Trigger: Program termination\nevents: Ir\nsummary: 9\ntotals: 9\n";
        let p = parse_callgrind(text);
        assert_eq!(p.get("setup"), Some(&500));
        assert_eq!(p.get("cold_push"), Some(&1200));
        assert_eq!(p.len(), 2, "{p:?}");
        // Two processes' parts of one name add up.
        let twice = format!("{text}{text}");
        assert_eq!(parse_callgrind(&twice).get("cold_push"), Some(&2400));
    }

    #[test]
    fn instruction_keys_are_per_request_or_per_file() {
        let counts: BTreeMap<String, u64> = [
            ("setup".to_owned(), 1),
            ("cold_push".into(), 1000),
            ("route.post-version.c1".into(), 3001),
        ]
        .into();
        let work: BTreeMap<Scope, Work> = [
            (
                Scope::phase("cold_push"),
                Work {
                    requests: 7,
                    files: Some(4),
                    timed: false,
                },
            ),
            (
                contract::key::RouteLevel::new("post-version", 1).into(),
                Work {
                    requests: 2,
                    files: None,
                    timed: false,
                },
            ),
        ]
        .into();
        let mut m = Metrics::default();
        instruction_keys(&counts, &work, &mut m).unwrap();
        let v = |k: &str| m.map[k].value;
        assert_eq!(v("cold_push.server.instructions"), 1000.0);
        assert_eq!(v("cold_push.server.instructions_per_file"), 250.0);
        assert_eq!(
            v("route.post-version.c1.server.instructions_per_request"),
            1501.0
        );
        assert_eq!(
            m.map["cold_push.server.instructions"].class,
            reports::schema::MetricClass::Cost
        );
        assert_eq!(m.map.len(), 4, "setup is not a phase");
        let missing: BTreeMap<Scope, Work> = [(Scope::phase("edit"), Work::default())].into();
        let e = instruction_keys(&counts, &missing, &mut m).unwrap_err();
        assert!(e.to_string().contains("edit"), "{e}");
    }

    #[test]
    fn strace_calls_count_in_their_window_and_writes_only_to_files() {
        let log = "\
101 100.5 openat(AT_FDCWD</>, \"/d/x\", O_RDONLY) = 3</d/x>
101 101.0 fdatasync(5</d/journal>) = 0
102 101.1 write(7<anon_inode:[eventfd]>, \"\\1\\0\", 8) = 8
102 101.2 write(9</d/journal>, \"abc\", 3) = 3
102 101.3 write(2<pipe:[123]>, \"x\", 1) = 1
102 101.4 write(1</dev/null>, \"x\", 1) = 1
103 101.5 fsync(6</d/chunks/ab> <unfinished ...>
101 101.6 renameat2(AT_FDCWD</>, \"/d/a\", AT_FDCWD</>, \"/d/b\", 0) = 0
103 101.7 <... fsync resumed>) = 0
101 101.8 mkdir(\"/d/c\", 0700) = 0
101 102.5 fsync(6</d/chunks/ab>) = 0
101 103.5 fsync(6</d/chunks/ab>) = 0
+++ exited with 0 +++
";
        let (p, q) = (Scope::phase("p"), Scope::phase("q"));
        let w = vec![(p.clone(), 101.0, 102.0), (q.clone(), 103.0, 104.0)];
        let c = parse_strace(log, &w);
        let p = &c[&p];
        assert_eq!(
            (
                p["fdatasync"],
                p["write"],
                p["fsync"],
                p["rename"],
                p["mkdir"],
                p["openat"]
            ),
            (1, 1, 1, 1, 1, 0)
        );
        assert_eq!(c[&q]["fsync"], 1);
        assert_eq!(c[&q]["write"], 0, "every name is present, zero included");
        let mut m = Metrics::default();
        syscall_keys(&c, &BTreeSet::from([q]), &mut m);
        assert_eq!(m.map["p.server.syscalls.fsync"].value, 1.0);
        assert_eq!(
            m.map["p.server.syscalls.fsync"].class,
            reports::schema::MetricClass::Exact
        );
        // A time-bounded step's counts follow its throughput: resource, not exact.
        assert_eq!(
            m.map["q.server.syscalls.fsync"].class,
            reports::schema::MetricClass::Resource
        );
        assert_eq!(m.map.len(), 12);
    }

    #[test]
    fn callgrind_functions_have_self_and_inclusive_costs_per_part() {
        let text = "version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: x\npart: 1\n\
desc: Trigger: Client Request: dump setup\nevents: Ir\nsummary: 30\nfl=(1) a.rs\n\
fn=(1) main\n3 10\ncfn=(2) srv::work::h0123456789abcdef\ncalls=1 5\n4 20\nfn=(2)\n5 20\ntotals: 30\n\
part: 2\ndesc: Trigger: dump cold_push\nevents: Ir\nfn=(2)\n+1 100\ncfn=(3) helper'2\ncalls=2 9\n* 50\n\
cfn=(2)\ncalls=1 5\n+2 7\nfn=(3)\n9 50\ntotals: 150\n";
        let p = parse_callgrind_functions(text);
        assert_eq!(p["setup"].fns["main"], (10, 30));
        assert_eq!(p["setup"].fns["srv::work"], (20, 20), "{p:?}");
        // The recursion suffix is dropped; a direct recursive call adds nothing inclusive.
        assert_eq!(p["cold_push"].fns["srv::work"], (100, 150));
        assert_eq!(p["cold_push"].fns["helper"], (50, 50));
        let self_sum: u64 = p["cold_push"].fns.values().map(|v| v.0).sum();
        assert_eq!(self_sum, 150, "self costs add up to the part's total");
        let stacks = fold_stacks(&p["setup"], 1);
        let pairs: Vec<(&str, u64)> = stacks.iter().map(|s| (s.frames.as_str(), s.ir)).collect();
        assert_eq!(pairs, [("main", 10), ("main;srv::work", 20)]);
        let stacks = fold_stacks(&p["cold_push"], 1);
        let pairs: Vec<(&str, u64)> = stacks.iter().map(|s| (s.frames.as_str(), s.ir)).collect();
        assert_eq!(pairs, [("srv::work", 100), ("srv::work;helper", 50)]);
        assert_eq!(clean_name("f::h0123"), "f::h0123", "not a hash");
    }

    #[test]
    fn blocked_time_is_split_at_phase_boundaries() {
        let log = "\
101 10.000 fdatasync(5</d/j>) = 0 <0.500000>
102 10.100 fsync(6</d/c> <unfinished ...>
101 10.200 epoll_wait(3<anon_inode:[eventpoll]>, [], 1024, 300) = 0 <0.300000>
102 10.900 <... fsync resumed>) = 0 <0.800000>
103 11.500 write(7</d/x>, \"a\", 1) = 1 <0.000010>
+++ exited with 0 +++
";
        let (p, q) = (Scope::phase("p"), Scope::phase("q"));
        let w = vec![(p.clone(), 10.0, 10.5), (q.clone(), 10.5, 12.0)];
        let t = parse_strace_times(log, &w);
        let near = |x: f64, y: f64| (x - y).abs() < 1.0;
        assert_eq!(t[&p]["fdatasync"].0, 1);
        assert!(near(t[&p]["fdatasync"].1, 500_000.0), "{t:?}");
        assert_eq!(t[&p]["fsync"].0, 1);
        assert!(near(t[&p]["fsync"].1, 400_000.0), "{t:?}");
        assert_eq!(t[&q]["fsync"].0, 0, "counted where it began");
        assert!(near(t[&q]["fsync"].1, 400_000.0), "{t:?}");
        assert!(near(t[&q]["write"].1, 10.0), "{t:?}");
        assert!(
            !t[&p].contains_key("epoll_wait"),
            "waiting for work is left out"
        );
        let b = blocked_tables(&t, &w, &BTreeMap::new());
        assert_eq!(b["p"].syscalls[0].name, "fdatasync");
        assert_eq!(b["p"].wall_ms, 500.0);
        assert!(near(b["p"].total_us(), 900_000.0));
    }

    #[test]
    fn wrappers_put_the_tool_in_front() {
        let w = wrapper(CostTool::Callgrind, Path::new("/o"));
        assert_eq!(w[0], "valgrind");
        assert!(w.contains(&"--callgrind-out-file=/o/callgrind.out.%p".to_owned()));
        assert_eq!(w.last().map(String::as_str), Some("--"));
        let w = wrapper(CostTool::Strace, Path::new("/o"));
        assert_eq!(w[0], "strace");
        assert!(w.contains(&"/o/strace.log".to_owned()));
        assert!(w.windows(2).any(|p| p == ["--pdeathsig", "KILL"]));
    }
}

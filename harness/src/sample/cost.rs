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
//! `perf_event_open` is not used: this project's VM exposes no PMU (the study tried it).

use anyhow::{Context, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use contract::key::{SYSCALLS as SYSCALLS_GROUP, Scope, ServerKey};

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

/// strace's `-e trace=` list behind [`SYSCALLS`].
const TRACED: &str = "fsync,fdatasync,rename,renameat,renameat2,openat,mkdir,mkdirat,write";

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
            "-e".into(),
            format!("trace={TRACED}"),
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
}

impl CallgrindMarks {
    pub fn new(root: u32) -> CallgrindMarks {
        CallgrindMarks {
            root,
            started: false,
            work: BTreeMap::new(),
            dump_ms: Vec::new(),
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
    let mut child = Command::new("vgdb")
        .arg(format!("--pid={pid}"))
        // A server idle in epoll_wait runs no code that would poll for vgdb, so vgdb
        // interrupts it with ptrace after this wait; its default of 100 ms was most of a
        // dump's 0.2 s here (measured: 0.21 s -> 0.12 s per dump at 5 ms).
        .arg("--max-invoke-ms=5")
        .arg("dump")
        .arg(name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
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
        self.dump(&scope.to_string())?;
        self.work.insert(scope.clone(), work);
        Ok(())
    }
    fn scrapes(&self) -> bool {
        false
    }
}

/// strace's boundaries: the wall-clock window of every phase.
#[derive(Default)]
pub struct StraceMarks {
    open: Option<f64>,
    /// (part, start, end) in Unix seconds.
    pub windows: Vec<(Scope, f64, f64)>,
    /// The parts that were time-bounded route steps: their counts scale with throughput.
    pub timed: BTreeSet<Scope>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Boundary for StraceMarks {
    fn begin(&mut self) -> anyhow::Result<()> {
        self.open = Some(unix_now());
        Ok(())
    }
    fn end(&mut self, scope: &Scope, work: Work, _: bool, _: &mut Metrics) -> anyhow::Result<()> {
        let Some(t0) = self.open.take() else {
            bail!("strace run: phase {scope} ended without a start");
        };
        self.windows.push((scope.clone(), t0, unix_now()));
        if work.timed {
            self.timed.insert(scope.clone());
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

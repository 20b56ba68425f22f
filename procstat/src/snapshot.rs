//! Reading a process tree and the system counters into a [`Snapshot`], and the [`Delta`]
//! between two snapshots.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;
use std::time::Instant;

use crate::Error;
use crate::parse::{self, CpuTimes, CtxSwitches, Io, Pressure, Schedstat};

/// One thread at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSample {
    /// The thread name (`comm`), at most 15 bytes.
    pub comm: String,
    /// Start time in clock ticks after boot: tells a reused tid from the thread that had it.
    pub starttime_ticks: u64,
    /// CPU ns, run-queue delay ns, timeslices.
    pub sched: Schedstat,
    /// Context switches.
    pub ctx: CtxSwitches,
}

/// One process of the tree at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSample {
    /// The process name (its main thread's `comm`).
    pub comm: String,
    /// The parent pid.
    pub ppid: u32,
    /// Start time in clock ticks after boot.
    pub starttime_ticks: u64,
    /// utime + stime of the whole thread group, exited threads included, in clock ticks.
    pub cpu_ticks: u64,
    /// cutime + cstime: the CPU of the children it has reaped, in clock ticks.
    pub reaped_children_ticks: u64,
    /// `/proc/<pid>/io`; `None` when the kernel refuses it (another user's process without
    /// `CAP_SYS_PTRACE`, or a kernel without `CONFIG_TASK_IO_ACCOUNTING`).
    pub io: Option<Io>,
    /// Every thread that could be read, by tid.
    pub tasks: BTreeMap<u32, TaskSample>,
}

/// System-wide counters; each `None` when this kernel does not offer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SystemSample {
    /// `/proc/pressure/cpu` (needs `CONFIG_PSI` and no `psi=0` on the kernel command line).
    pub psi_cpu: Option<Pressure>,
    /// `/proc/pressure/io`.
    pub psi_io: Option<Pressure>,
    /// The aggregate `cpu` line of `/proc/stat` (steal is `None` on kernels that lack it).
    pub cpu: Option<CpuTimes>,
}

impl SystemSample {
    /// Reads the system counters; a file the kernel lacks gives `None`, never an error.
    pub fn read() -> Self {
        let mut buf = String::new();
        let psi = |name: &str, buf: &mut String| {
            read_opt(name, buf)
                .ok()
                .flatten()
                .and_then(|()| parse::pressure(buf, name).ok())
        };
        let psi_cpu = psi("/proc/pressure/cpu", &mut buf);
        let psi_io = psi("/proc/pressure/io", &mut buf);
        let cpu = read_opt("/proc/stat", &mut buf)
            .ok()
            .flatten()
            .and_then(|()| parse::proc_stat_cpu(&buf, "/proc/stat").ok());
        Self {
            psi_cpu,
            psi_io,
            cpu,
        }
    }

    /// Names of the counters this kernel did not offer, for a one-line note in a report.
    pub fn unavailable(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.psi_cpu.is_none() {
            out.push("PSI cpu (/proc/pressure/cpu: kernel without CONFIG_PSI, or psi=0)");
        }
        if self.psi_io.is_none() {
            out.push("PSI io (/proc/pressure/io: kernel without CONFIG_PSI, or psi=0)");
        }
        match self.cpu {
            None => out.push("/proc/stat cpu line"),
            Some(c) if c.steal.is_none() => out.push("steal (/proc/stat has no steal field)"),
            Some(_) => {}
        }
        out
    }
}

/// A process tree and the system counters, read at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When the read started.
    pub taken: Instant,
    /// The root pid.
    pub root: u32,
    /// The root and every descendant process that could be read, by pid.
    pub processes: BTreeMap<u32, ProcessSample>,
    /// System-wide counters.
    pub system: SystemSample,
    /// Every process outside the tree: its start time and `/proc/<pid>/io` storage bytes
    /// (`None` when unreadable: another user's process, read without privilege).
    pub others: BTreeMap<u32, OtherSample>,
}

/// A process outside the measured tree, for the foreign I/O channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherSample {
    pub starttime_ticks: u64,
    /// utime + stime, clock ticks (exited threads included).
    pub cpu_ticks: u64,
    /// A kernel thread (kthreadd or one of its children). Kernel threads serve every
    /// process's I/O, the measured server's included (the journal thread, writeback, a loop
    /// device's worker writing the server's fsyncs to its backing file), so neither their CPU
    /// nor their storage bytes are foreign: a foreign process's writes are charged to that
    /// process when it dirties the pages.
    pub kernel_thread: bool,
    /// `read_bytes + write_bytes` of `/proc/<pid>/io` (bytes the process caused to be read
    /// from or sent to the storage layer); `None` when it could not be read.
    pub storage_bytes: Option<u64>,
}

impl Snapshot {
    /// Reads the tree under `root` (the root included) and the system counters.
    ///
    /// Tasks and processes that exit while being read are skipped; only the root's absence
    /// is an error.
    pub fn capture(root: u32) -> Result<Self, Error> {
        let taken = Instant::now();
        let mut buf = String::new();
        let pids = tree_pids(root, &mut buf)?;
        let mut processes = BTreeMap::new();
        for pid in pids {
            if let Some(p) = read_process(pid, &mut buf)? {
                processes.insert(pid, p);
            }
        }
        if !processes.contains_key(&root) {
            return Err(Error::NoSuchProcess { pid: root });
        }
        let others = read_others(&processes, &mut buf)?;
        Ok(Self {
            taken,
            root,
            processes,
            system: SystemSample::read(),
            others,
        })
    }

    /// Number of threads read, over all processes.
    pub fn task_count(&self) -> usize {
        self.processes.values().map(|p| p.tasks.len()).sum()
    }
}

/// What a process tree spent between two snapshots. See the crate doc for what it can and
/// cannot include.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Delta {
    /// Time between the two snapshots, ns.
    pub window_ns: u64,
    /// CPU ns of the threads alive at the second snapshot (exact, from `schedstat`).
    pub cpu_ns: u64,
    /// `cpu_ns` split by thread name.
    pub cpu_ns_by_name: BTreeMap<String, u64>,
    /// Run-queue delay ns of the same threads.
    pub run_delay_ns: u64,
    /// Context switches of the same threads.
    pub ctx: CtxSwitches,
    /// io of the processes alive at the second snapshot (exited threads included).
    pub io: Io,
    /// Processes whose io the kernel refused.
    pub io_unreadable: usize,
    /// CPU of the processes alive at the second snapshot from `stat` utime + stime, which
    /// includes threads that exited in between, at clock-tick resolution, in ns.
    pub process_cpu_ns_ticks: u64,
    /// CPU of the processes the tree started and reaped inside the window (a short-lived
    /// child: a client run, a script's command), from the reapers' cutime + cstime growth,
    /// less what the reaped ones had already used at the first snapshot; clock-tick
    /// resolution, in ns.
    pub reaped_cpu_ns_ticks: u64,
    /// Threads seen at the first snapshot and gone at the second (their CPU since the first
    /// snapshot is missing from `cpu_ns`).
    pub tasks_exited: usize,
    /// Threads that appeared after the first snapshot.
    pub tasks_started: usize,
    /// Processes seen at the first snapshot and gone at the second.
    pub processes_exited: usize,
    /// Processes that appeared after the first snapshot.
    pub processes_started: usize,
    /// PSI cpu `some` stall, µs.
    pub psi_cpu_some_us: Option<u64>,
    /// PSI io `some` stall, µs.
    pub psi_io_some_us: Option<u64>,
    /// PSI io `full` stall, µs.
    pub psi_io_full_us: Option<u64>,
    /// Steal, clock ticks.
    pub steal_ticks: Option<u64>,
    /// All CPU time of the system (every field of the `cpu` line), clock ticks.
    pub system_ticks: Option<u64>,
    /// Busy time of the whole machine (`/proc/stat` user + nice + system; interrupts left
    /// out: the tree's own loopback traffic is served there), clock ticks.
    pub machine_busy_ticks: Option<u64>,
    /// Storage bytes (read + written) of every process outside the tree that could be read,
    /// both snapshots' survivors and those started in between.
    pub foreign_storage_bytes: u64,
    /// Processes outside the tree whose `/proc/<pid>/io` could not be read.
    pub foreign_unreadable: usize,
    /// CPU of every process outside the tree seen in the second snapshot (those started in
    /// between from zero), clock ticks; processes that started and exited in between are
    /// not in it.
    pub foreign_process_ticks: u64,
    /// CPU of the kernel threads seen in the second snapshot, clock ticks: taken out of the
    /// machine's busy time before it bounds the foreign CPU (`OtherSample::kernel_thread`).
    pub kernel_thread_ticks: u64,
}

impl Delta {
    /// The tree's growth from `a` to `b` (`a` taken first).
    pub fn between(a: &Snapshot, b: &Snapshot) -> Self {
        let tick_ns = 1_000_000_000 / clock_ticks_per_second();
        let mut d = Delta {
            window_ns: u64::try_from(b.taken.saturating_duration_since(a.taken).as_nanos())
                .unwrap_or(u64::MAX),
            ..Delta::default()
        };
        let (mut reaped, mut already) = (0u64, 0u64);
        for (pid, pb) in &b.processes {
            let pa = a
                .processes
                .get(pid)
                .filter(|pa| pa.starttime_ticks == pb.starttime_ticks);
            if pa.is_none() {
                d.processes_started += 1;
            }
            d.process_cpu_ns_ticks +=
                pb.cpu_ticks.saturating_sub(pa.map_or(0, |p| p.cpu_ticks)) * tick_ns;
            reaped += pb
                .reaped_children_ticks
                .saturating_sub(pa.map_or(0, |p| p.reaped_children_ticks));
            match (pb.io, pa.map(|p| p.io)) {
                (Some(ib), Some(Some(ia))) => d.io = d.io + ib.saturating_sub(ia),
                (Some(ib), None) => d.io = d.io + ib,
                _ => d.io_unreadable += 1,
            }
            for (tid, tb) in &pb.tasks {
                let ta = pa
                    .and_then(|p| p.tasks.get(tid))
                    .filter(|ta| ta.starttime_ticks == tb.starttime_ticks);
                if ta.is_none() {
                    d.tasks_started += 1;
                }
                let base_sched = ta.map(|t| t.sched).unwrap_or_default();
                let cpu = tb.sched.cpu_ns.saturating_sub(base_sched.cpu_ns);
                d.cpu_ns += cpu;
                *d.cpu_ns_by_name.entry(tb.comm.clone()).or_default() += cpu;
                d.run_delay_ns += tb
                    .sched
                    .run_delay_ns
                    .saturating_sub(base_sched.run_delay_ns);
                d.ctx = d.ctx + tb.ctx.saturating_sub(ta.map(|t| t.ctx).unwrap_or_default());
            }
        }
        for (pid, pa) in &a.processes {
            let pb = b
                .processes
                .get(pid)
                .filter(|pb| pb.starttime_ticks == pa.starttime_ticks);
            match pb {
                None => {
                    // Its CPU up to the first snapshot was not inside the window: if its parent
                    // reaped it, that part is in the parent's growth above.
                    already += pa.cpu_ticks + pa.reaped_children_ticks;
                    d.processes_exited += 1;
                    d.tasks_exited += pa.tasks.len();
                }
                Some(pb) => {
                    d.tasks_exited += pa
                        .tasks
                        .iter()
                        .filter(|(tid, ta)| {
                            pb.tasks
                                .get(tid)
                                .is_none_or(|tb| tb.starttime_ticks != ta.starttime_ticks)
                        })
                        .count();
                }
            }
        }
        d.reaped_cpu_ns_ticks = reaped.saturating_sub(already) * tick_ns;
        let (sa, sb) = (a.system, b.system);
        let diff = |x: Option<u64>, y: Option<u64>| Some(y?.saturating_sub(x?));
        d.psi_cpu_some_us = diff(
            sa.psi_cpu.map(|p| p.some_total_us),
            sb.psi_cpu.map(|p| p.some_total_us),
        );
        d.psi_io_some_us = diff(
            sa.psi_io.map(|p| p.some_total_us),
            sb.psi_io.map(|p| p.some_total_us),
        );
        d.psi_io_full_us = diff(
            sa.psi_io.and_then(|p| p.full_total_us),
            sb.psi_io.and_then(|p| p.full_total_us),
        );
        d.steal_ticks = diff(sa.cpu.and_then(|c| c.steal), sb.cpu.and_then(|c| c.steal));
        d.system_ticks = diff(sa.cpu.map(|c| c.total()), sb.cpu.map(|c| c.total()));
        d.machine_busy_ticks = diff(
            sa.cpu.map(|c| c.user + c.nice + c.system),
            sb.cpu.map(|c| c.user + c.nice + c.system),
        );
        for (pid, ob) in &b.others {
            let oa = a
                .others
                .get(pid)
                .filter(|oa| oa.starttime_ticks == ob.starttime_ticks);
            let grown = ob.cpu_ticks.saturating_sub(oa.map_or(0, |o| o.cpu_ticks));
            if ob.kernel_thread {
                d.kernel_thread_ticks += grown;
                continue;
            }
            d.foreign_process_ticks += grown;
            match (ob.storage_bytes, oa.map(|o| o.storage_bytes)) {
                (Some(vb), Some(Some(va))) => d.foreign_storage_bytes += vb.saturating_sub(va),
                // Started inside the window (or first seen): all its bytes are inside it.
                (Some(vb), None) => d.foreign_storage_bytes += vb,
                _ => d.foreign_unreadable += 1,
            }
        }
        d
    }

    /// CPU used outside the tree as a share of all CPU time of the machine (0.5 on two cores
    /// = one core's worth of somebody else): the larger of two lower bounds. One is the
    /// machine's busy time minus the tree's own CPU time (`/proc/stat` samples by tick and,
    /// without `CONFIG_IRQ_TIME_ACCOUNTING`, charges softirq work done in a task to softirq
    /// while the task's exact time includes it, so the difference can only fall short); the
    /// other is the CPU of every other process seen (short-lived ones that exited in between
    /// are missed). Kernel threads' CPU is taken out of both (`OtherSample::kernel_thread`).
    /// The tree's own time is the larger of its live threads' exact time and its processes'
    /// `stat` time, which also holds the threads that exited in the window: a server that
    /// answers each request in a thread of its own (Python's threaded servers) would otherwise
    /// have its work counted as somebody else's. The processes the tree started and reaped in
    /// the window (a client run of the sample) are its own too.
    pub fn foreign_cpu_share(&self) -> Option<f64> {
        let total = self.system_ticks?;
        let busy = self.machine_busy_ticks?;
        let tick_ns = 1_000_000_000 / clock_ticks_per_second();
        let own = (self.cpu_ns.max(self.process_cpu_ns_ticks) + self.reaped_cpu_ns_ticks) / tick_ns;
        let foreign = busy
            .saturating_sub(own)
            .saturating_sub(self.kernel_thread_ticks)
            .max(self.foreign_process_ticks);
        (total > 0).then(|| foreign as f64 / total as f64)
    }

    /// Storage bytes of processes outside the tree per second of the window, MiB/s.
    pub fn foreign_io_mib_s(&self) -> Option<f64> {
        (self.window_ns > 0).then(|| {
            self.foreign_storage_bytes as f64 / (1024.0 * 1024.0) / (self.window_ns as f64 / 1e9)
        })
    }

    /// Run-queue delay as a share of CPU time (0.1 = the tree waited for a CPU a tenth as
    /// long as it ran); `None` when it used no CPU.
    pub fn run_delay_share(&self) -> Option<f64> {
        (self.cpu_ns > 0).then(|| self.run_delay_ns as f64 / self.cpu_ns as f64)
    }

    /// PSI cpu `some` stall as a share of the window.
    pub fn psi_cpu_some_share(&self) -> Option<f64> {
        self.share_of_window(self.psi_cpu_some_us?)
    }

    /// PSI io `some` stall as a share of the window.
    pub fn psi_io_some_share(&self) -> Option<f64> {
        self.share_of_window(self.psi_io_some_us?)
    }

    /// Steal as a share of all CPU time of the system.
    pub fn steal_share(&self) -> Option<f64> {
        let total = self.system_ticks?;
        (total > 0)
            .then(|| self.steal_ticks.unwrap_or(0) as f64 / total as f64)
            .filter(|_| self.steal_ticks.is_some())
    }

    fn share_of_window(&self, us: u64) -> Option<f64> {
        (self.window_ns > 0).then(|| us as f64 * 1000.0 / self.window_ns as f64)
    }
}

/// The kernel's clock tick rate (`sysconf(_SC_CLK_TCK)`), 100 on the usual builds.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions and only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // POSIX guarantees a positive value; 100 is the Linux userspace ABI value (USER_HZ).
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// Reads a whole file into `buf`; `Ok(None)` when the task is gone (or the file does not
/// exist on this kernel).
pub(crate) fn read_opt(path: &str, buf: &mut String) -> Result<Option<()>, Error> {
    buf.clear();
    let res = File::open(path).and_then(|mut f| f.read_to_string(buf));
    match res {
        Ok(_) => Ok(Some(())),
        Err(e) if gone(&e) => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_string(),
            source,
        }),
    }
}

/// A read error that means the task exited (or the file is not offered): not an error for a
/// tree whose members come and go.
fn gone(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound
        || e.raw_os_error() == Some(libc::ESRCH)
        || e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// Every process outside `tree`: start time and storage bytes.
fn read_others(
    tree: &BTreeMap<u32, ProcessSample>,
    buf: &mut String,
) -> Result<BTreeMap<u32, OtherSample>, Error> {
    let mut out = BTreeMap::new();
    for pid in list_numeric("/proc")? {
        if tree.contains_key(&pid) {
            continue;
        }
        let path = format!("/proc/{pid}/stat");
        if read_opt(&path, buf)?.is_none() {
            continue;
        }
        let Ok(st) = parse::stat(buf, &path) else {
            continue;
        };
        let io_path = format!("/proc/{pid}/io");
        let storage_bytes = match File::open(&io_path).and_then(|mut f| {
            buf.clear();
            f.read_to_string(buf)
        }) {
            Ok(_) => parse::io(buf, &io_path)
                .ok()
                .map(|io| io.read_bytes + io.write_bytes),
            Err(_) => None,
        };
        out.insert(
            pid,
            OtherSample {
                starttime_ticks: st.starttime_ticks,
                cpu_ticks: st.utime_ticks + st.stime_ticks,
                kernel_thread: pid == 2 || st.ppid == 2,
                storage_bytes,
            },
        );
    }
    Ok(out)
}

/// The pids of `root` and all its descendants.
///
/// Uses `/proc/<pid>/task/<tid>/children` where the kernel has it (`CONFIG_PROC_CHILDREN`, on
/// in a 2-vCPU cloud VM kernel): a few small reads. The kernel documents that file as exact
/// only while the children do not change, so a child forked during the read may be missed
/// until the next snapshot. Without it, every process's parent is read from `/proc/*/stat`.
fn tree_pids(root: u32, buf: &mut String) -> Result<Vec<u32>, Error> {
    if Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        tree_pids_by_children(root, buf)
    } else {
        tree_pids_by_scan(root, buf)
    }
}

fn tree_pids_by_children(root: u32, buf: &mut String) -> Result<Vec<u32>, Error> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let pid = out[i];
        i += 1;
        for tid in list_numeric(&format!("/proc/{pid}/task"))? {
            if read_opt(&format!("/proc/{pid}/task/{tid}/children"), buf)?.is_some() {
                out.extend(
                    buf.split_ascii_whitespace()
                        .filter_map(|t| t.parse::<u32>().ok()),
                );
            }
        }
    }
    Ok(out)
}

/// The fallback: a parent map of every process on the machine, then a walk down from the root.
fn tree_pids_by_scan(root: u32, buf: &mut String) -> Result<Vec<u32>, Error> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for pid in list_numeric("/proc")? {
        let path = format!("/proc/{pid}/stat");
        if read_opt(&path, buf)?.is_none() {
            continue;
        }
        let st = parse::stat(buf, &path)?;
        children.entry(st.ppid).or_default().push(pid);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids.iter().copied());
        }
        i += 1;
    }
    Ok(out)
}

fn list_numeric(dir: &str) -> Result<Vec<u32>, Error> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if gone(&e) => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_string(),
                source,
            });
        }
    };
    Ok(rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

fn read_process(pid: u32, buf: &mut String) -> Result<Option<ProcessSample>, Error> {
    let path = format!("/proc/{pid}/stat");
    if read_opt(&path, buf)?.is_none() {
        return Ok(None);
    }
    let st = parse::stat(buf, &path)?;
    let io_path = format!("/proc/{pid}/io");
    let io = match File::open(&io_path).and_then(|mut f| {
        buf.clear();
        f.read_to_string(buf)
    }) {
        Ok(_) => Some(parse::io(buf, &io_path)?),
        // Gone, refused (EACCES for another user's process) or not compiled in: no io.
        Err(_) => None,
    };
    let mut tasks = BTreeMap::new();
    for tid in list_numeric(&format!("/proc/{pid}/task"))? {
        if let Some(t) = read_task(pid, tid, buf)? {
            tasks.insert(tid, t);
        }
    }
    Ok(Some(ProcessSample {
        comm: st.comm,
        ppid: st.ppid,
        starttime_ticks: st.starttime_ticks,
        cpu_ticks: st.utime_ticks + st.stime_ticks,
        reaped_children_ticks: st.reaped_children_ticks,
        io,
        tasks,
    }))
}

fn read_task(pid: u32, tid: u32, buf: &mut String) -> Result<Option<TaskSample>, Error> {
    let base = format!("/proc/{pid}/task/{tid}");
    let stat_path = format!("{base}/stat");
    if read_opt(&stat_path, buf)?.is_none() {
        return Ok(None);
    }
    let st = parse::stat(buf, &stat_path)?;
    let sched_path = format!("{base}/schedstat");
    if read_opt(&sched_path, buf)?.is_none() {
        return Ok(None);
    }
    let sched = parse::schedstat(buf, &sched_path)?;
    let status_path = format!("{base}/status");
    if read_opt(&status_path, buf)?.is_none() {
        return Ok(None);
    }
    let ctx = parse::status_ctx_switches(buf, &status_path)?;
    Ok(Some(TaskSample {
        comm: st.comm,
        starttime_ticks: st.starttime_ticks,
        sched,
        ctx,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of finding the tree agree on a real one: this test process, a `sh` child
    /// and the `sleep` grandchildren it starts.
    #[test]
    fn foreign_figures_take_the_larger_cpu_bound_and_count_new_processes_whole() {
        let snap = |at: Instant, others: &[(u32, u64, u64, Option<u64>)], busy: u64, total: u64| {
            let system = SystemSample {
                cpu: Some(CpuTimes {
                    user: busy,
                    idle: total - busy,
                    ..CpuTimes::default()
                }),
                ..SystemSample::default()
            };
            Snapshot {
                taken: at,
                root: 1,
                processes: BTreeMap::new(),
                system,
                others: others
                    .iter()
                    .map(|&(pid, start, cpu_ticks, storage_bytes)| {
                        (
                            pid,
                            OtherSample {
                                starttime_ticks: start,
                                cpu_ticks,
                                // pids from 900 play kernel threads.
                                kernel_thread: pid >= 900,
                                storage_bytes,
                            },
                        )
                    })
                    .collect(),
            }
        };
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(2);
        // pid 10 grows by 30 ticks and 2 MiB; pid 11 is new (all of it counts); pid 12 was
        // reused (another start time: counted from zero); pid 13 is unreadable.
        let a = snap(
            t0,
            &[
                (10, 5, 100, Some(0)),
                (12, 5, 50, Some(0)),
                (13, 5, 0, None),
                (900, 1, 0, Some(0)),
            ],
            1000,
            2000,
        );
        let b = snap(
            t1,
            &[
                (10, 5, 130, Some(2 << 20)),
                (11, 9, 20, Some(1 << 20)),
                (12, 8, 10, Some(0)),
                (13, 5, 0, None),
                (900, 1, 40, Some(5 << 20)),
            ],
            1140,
            2400,
        );
        let d = Delta::between(&a, &b);
        assert_eq!(d.foreign_process_ticks, 60);
        assert_eq!(d.foreign_storage_bytes, 3 << 20);
        assert_eq!(d.foreign_unreadable, 1);
        assert!((d.foreign_io_mib_s().unwrap() - 1.5).abs() < 0.01);
        // The kernel thread's 40 ticks and 5 MiB (a loop device's worker writing the tree's
        // fsyncs to its backing file) are not foreign.
        assert_eq!(d.kernel_thread_ticks, 40);
        // busy - own - kernel threads = 100 ticks (the tree used nothing) beats the
        // per-process 60.
        assert!((d.foreign_cpu_share().unwrap() - 100.0 / 400.0).abs() < 1e-9);
    }

    #[test]
    fn threads_that_exited_in_the_window_are_the_trees_own_cpu() {
        // 300 busy ticks of 400; the live threads account for 100 ticks, the processes'
        // `stat` (exited threads included) for 250: only 50 are somebody else's.
        let tick_ns = 1_000_000_000 / clock_ticks_per_second();
        let d = Delta {
            system_ticks: Some(400),
            machine_busy_ticks: Some(300),
            cpu_ns: 100 * tick_ns,
            process_cpu_ns_ticks: 250 * tick_ns,
            ..Delta::default()
        };
        assert!((d.foreign_cpu_share().unwrap() - 50.0 / 400.0).abs() < 1e-9);
        let live = Delta {
            process_cpu_ns_ticks: 0,
            ..d.clone()
        };
        assert!((live.foreign_cpu_share().unwrap() - 200.0 / 400.0).abs() < 1e-9);
        // A child the tree started and reaped inside the window (30 ticks) is its own too.
        let reaped = Delta {
            reaped_cpu_ns_ticks: 30 * tick_ns,
            ..d
        };
        assert!((reaped.foreign_cpu_share().unwrap() - 20.0 / 400.0).abs() < 1e-9);
    }

    #[test]
    fn children_files_and_scan_find_the_same_tree() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 20 & sleep 20 & wait"])
            .spawn()
            .expect("spawn sh");
        let me = std::process::id();
        let mut buf = String::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let (mut a, mut b);
        loop {
            a = tree_pids_by_scan(me, &mut buf).unwrap();
            a.sort_unstable();
            b = if Path::new(&format!("/proc/{me}/task/{me}/children")).exists() {
                tree_pids_by_children(me, &mut buf).unwrap()
            } else {
                a.clone()
            };
            b.sort_unstable();
            if (a.len() >= 4 && a == b) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The sleeps are sh's children: kill them first (init reaps them), then kill and reap sh.
        for &pid in a.iter().filter(|&&p| p != me && p != sh.id()) {
            if let Ok(pid) = libc::pid_t::try_from(pid) {
                // SAFETY: kill has no memory preconditions; these pids are this test's grandchildren.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(a.contains(&sh.id()), "{a:?}");
        assert!(a.len() >= 4, "self, sh and two sleeps: {a:?}");
        assert_eq!(a, b);
    }
}

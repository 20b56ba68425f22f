//! One-file readers for callers that want a figure now rather than a tree `Snapshot`
//! (crate::Snapshot): a process's `stat`, its threads' `stat`s, `io`, a `status` memory line,
//! the live pids, the system's `cpu` line (and the one write: resetting this process's
//! peak-RSS mark). A process that has gone gives `Ok(None)` (or an
//! empty list), never an error: callers read processes that come and go.

use crate::Error;
use crate::parse::{self, CpuTimes, Io, Stat};
use crate::snapshot::read_opt;

/// Which process: this one (`/proc/self`) or a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// The calling process.
    Current,
    /// Another process.
    Of(u32),
}

impl Pid {
    fn dir(self) -> String {
        match self {
            Pid::Current => "/proc/self".to_owned(),
            Pid::Of(pid) => format!("/proc/{pid}"),
        }
    }
}

/// `/proc/<pid>/stat`.
pub fn process_stat(pid: Pid) -> Result<Option<Stat>, Error> {
    let path = format!("{}/stat", pid.dir());
    let mut buf = String::new();
    match read_opt(&path, &mut buf)? {
        Some(()) => parse::stat(&buf, &path).map(Some),
        None => Ok(None),
    }
}

/// `/proc/<pid>/task/<tid>/stat` of every thread still there, by tid (ascending).
pub fn task_stats(pid: Pid) -> Result<Vec<(u32, Stat)>, Error> {
    let dir = format!("{}/task", pid.dir());
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut tids: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut out = Vec::with_capacity(tids.len());
    let mut buf = String::new();
    for tid in tids {
        let path = format!("{dir}/{tid}/stat");
        if read_opt(&path, &mut buf)?.is_some() {
            out.push((tid, parse::stat(&buf, &path)?));
        }
    }
    Ok(out)
}

/// CPU ns of every thread of `pid` still there, summed from each thread's `schedstat`
/// (nanosecond resolution, unlike `stat`'s clock ticks): a cheap reading for a caller that
/// samples one process often. A thread that exited takes its CPU with it.
pub fn threads_cpu_ns(pid: Pid) -> Result<u64, Error> {
    let dir = format!("{}/task", pid.dir());
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut sum = 0u64;
    let mut buf = String::new();
    for e in rd.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let path = format!("{dir}/{tid}/schedstat");
        if read_opt(&path, &mut buf)?.is_some() {
            sum = sum.saturating_add(parse::schedstat(&buf, &path)?.cpu_ns);
        }
    }
    Ok(sum)
}

/// `/proc/<pid>/io` (needs the same user, or `CAP_SYS_PTRACE`).
pub fn io(pid: Pid) -> Result<Option<Io>, Error> {
    let path = format!("{}/io", pid.dir());
    let mut buf = String::new();
    match read_opt(&path, &mut buf)? {
        Some(()) => parse::io(&buf, &path).map(Some),
        None => Ok(None),
    }
}

/// One `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, ...): `None` when the process is
/// gone or has no such line.
pub fn status_kib(pid: Pid, key: &str) -> Result<Option<u64>, Error> {
    let path = format!("{}/status", pid.dir());
    let mut buf = String::new();
    match read_opt(&path, &mut buf)? {
        Some(()) => parse::status_kib(&buf, &path, key),
        None => Ok(None),
    }
}

/// Peak resident set size (`VmHWM`) in KiB.
pub fn peak_rss_kib(pid: Pid) -> Result<Option<u64>, Error> {
    status_kib(pid, "VmHWM")
}

/// Resets the kernel's peak-RSS mark (`VmHWM`) of this process to its current RSS (writing
/// `5` to `/proc/self/clear_refs`, Linux 4.0 and later); false when not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Resident set size (`VmRSS`) in KiB.
pub fn rss_kib(pid: Pid) -> Result<Option<u64>, Error> {
    status_kib(pid, "VmRSS")
}

/// The file name of a process's executable, whole (its `comm` is cut at 15 bytes); a replaced
/// executable, which the kernel shows as `name (deleted)`, keeps its name.
pub fn exe_name(pid: Pid) -> Option<String> {
    let exe = std::fs::read_link(format!("{}/exe", pid.dir())).ok()?;
    let name = exe.file_name()?.to_string_lossy();
    Some(name.trim_end_matches(" (deleted)").to_owned())
}

/// Every live pid (the numeric entries of `/proc`), ascending.
pub fn pids() -> Result<Vec<u32>, Error> {
    let rd = std::fs::read_dir("/proc").map_err(|source| Error::Read {
        path: "/proc".to_owned(),
        source,
    })?;
    let mut out: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// The live processes whose process group is `pgid`, ascending.
pub fn group_pids(pgid: u32) -> Result<Vec<u32>, Error> {
    let mut out = Vec::new();
    for pid in pids()? {
        if let Some(st) = process_stat(Pid::Of(pid))?
            && st.pgrp == pgid
        {
            out.push(pid);
        }
    }
    Ok(out)
}

/// The aggregate `cpu` line of `/proc/stat`.
pub fn system_cpu() -> Result<CpuTimes, Error> {
    let mut buf = String::new();
    match read_opt("/proc/stat", &mut buf)? {
        Some(()) => parse::proc_stat_cpu(&buf, "/proc/stat"),
        None => Err(Error::parse("/proc/stat", "missing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_back() {
        let me = std::process::id();
        let st = process_stat(Pid::Current).unwrap().unwrap();
        let by_pid = process_stat(Pid::Of(me)).unwrap().unwrap();
        assert_eq!(st.starttime_ticks, by_pid.starttime_ticks);
        // SAFETY: getpgrp has no preconditions.
        let pgrp = unsafe { libc::getpgrp() } as u32;
        assert_eq!(st.pgrp, pgrp);
        assert!(group_pids(pgrp).unwrap().contains(&me));
        let tasks = task_stats(Pid::Current).unwrap();
        assert!(tasks.iter().any(|(tid, _)| *tid == me), "{tasks:?}");
        assert!(
            peak_rss_kib(Pid::Current).unwrap().unwrap()
                >= rss_kib(Pid::Current).unwrap().unwrap() / 2
        );
        assert!(io(Pid::Current).unwrap().is_some());
        assert!(exe_name(Pid::Current).is_some());
        let cpu = system_cpu().unwrap();
        assert!(cpu.busy() <= cpu.total());
    }

    #[test]
    fn a_process_that_is_gone_is_none_not_an_error() {
        // Above the kernel's pid_max limit (2^22), so never a live pid.
        let gone = Pid::Of(5_000_000);
        assert_eq!(process_stat(gone).unwrap(), None);
        assert_eq!(io(gone).unwrap(), None);
        assert_eq!(peak_rss_kib(gone).unwrap(), None);
        assert!(task_stats(gone).unwrap().is_empty());
        assert_eq!(exe_name(gone), None);
    }
}

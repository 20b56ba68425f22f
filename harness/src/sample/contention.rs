//! In-sample contention: one `procstat` snapshot of the sample's process tree (the generator
//! and, below it, the server's whole tree) before the measured phases and one after, turned into
//! the shares the gate judges; CPU pinning of the server and the generator to disjoint sets; the
//! settle step (`syncfs`) before a calibration reading; the generator's thread count.

use std::path::Path;

use contract::schema::Contention;
use procstat::{Delta, Snapshot};

/// The first snapshot of a measured window.
pub struct Window {
    first: Option<Snapshot>,
    error: Option<String>,
}

impl Window {
    /// Snapshots this process's tree (the generator and the server under it).
    pub fn start() -> Window {
        match Snapshot::capture(std::process::id()) {
            Ok(s) => Window {
                first: Some(s),
                error: None,
            },
            Err(e) => Window {
                first: None,
                error: Some(e.to_string()),
            },
        }
    }

    /// The second snapshot, and the window's contention: the server's tree is `server_pid` and
    /// its descendants, the generator every other process of this tree (this process's threads).
    pub fn finish(self, server_pid: u32) -> Result<Contention, String> {
        let a = self.first.ok_or_else(|| {
            format!(
                "in-sample snapshot before: {}",
                self.error.unwrap_or_default()
            )
        })?;
        let b = Snapshot::capture(std::process::id())
            .map_err(|e| format!("in-sample snapshot after: {e}"))?;
        Ok(contention(&a, &b, server_pid))
    }
}

/// A look at the machine before a run's first sample: two snapshots of this process's tree,
/// `over` apart, while it waits. Nothing of the run is running yet, so the window's foreign
/// channels and steal are everybody else's load. Returns early with
/// [`crate::interrupt::Interrupted`] on Ctrl-C.
pub fn look(over: std::time::Duration) -> anyhow::Result<Contention> {
    Ok(look_with_busiest(over)?.0)
}

/// [`look`], and the processes outside vaultbench that used the most CPU over it: by name
/// (`/proc/<pid>/comm`, read at the end of the look; processes of one name summed), each as a
/// share of all CPU time of the machine (the unit of `foreign_cpu`), largest first. Kernel
/// threads are left out, as the foreign channel leaves them out.
pub fn look_with_busiest(
    over: std::time::Duration,
) -> anyhow::Result<(Contention, Vec<(String, f64)>)> {
    let a = Snapshot::capture(std::process::id())
        .map_err(|e| anyhow::anyhow!("pre-check snapshot before: {e}"))?;
    let until = std::time::Instant::now() + over;
    while std::time::Instant::now() < until {
        if crate::interrupt::requested() {
            return Err(crate::interrupt::Interrupted.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50).min(over));
    }
    let b = Snapshot::capture(std::process::id())
        .map_err(|e| anyhow::anyhow!("pre-check snapshot after: {e}"))?;
    // No server runs yet: its subtree (pid 0) is empty.
    Ok((contention(&a, &b, 0), busiest(&a, &b)))
}

/// The foreign processes' CPU over `a`..`b` by name, as shares of the machine's CPU time.
fn busiest(a: &Snapshot, b: &Snapshot) -> Vec<(String, f64)> {
    let total = Delta::between(a, b).system_ticks.unwrap_or(0);
    if total == 0 {
        return Vec::new();
    }
    let mut by_name: std::collections::BTreeMap<String, u64> = Default::default();
    for (pid, ob) in &b.others {
        if ob.kernel_thread {
            continue;
        }
        let before = a
            .others
            .get(pid)
            .filter(|oa| oa.starttime_ticks == ob.starttime_ticks)
            .map_or(0, |o| o.cpu_ticks);
        let grown = ob.cpu_ticks.saturating_sub(before);
        if grown == 0 {
            continue;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|n| n.trim().to_owned())
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("pid {pid}"));
        *by_name.entry(name).or_default() += grown;
    }
    let mut out: Vec<(String, f64)> = by_name
        .into_iter()
        .map(|(n, t)| (n, t as f64 / total as f64))
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    out
}

/// The shares of one window from two snapshots of the sample's tree.
pub fn contention(a: &Snapshot, b: &Snapshot, server_pid: u32) -> Contention {
    let all = Delta::between(a, b);
    let server = Delta::between(&subtree(a, server_pid), &subtree(b, server_pid));
    let generator = Delta::between(&only(a, a.root), &only(b, b.root));
    let mut unavailable: Vec<String> = b
        .system
        .unavailable()
        .into_iter()
        .map(str::to_owned)
        .collect();
    if b.task_count() == 0 {
        unavailable.push(
            "run-queue delay (/proc/<pid>/task/<tid>/schedstat: kernel without CONFIG_SCHED_INFO)"
                .to_owned(),
        );
    }
    Contention {
        window_ms: all.window_ns as f64 / 1e6,
        server_cpu_ms: server.cpu_ns as f64 / 1e6,
        generator_cpu_ms: generator.cpu_ns as f64 / 1e6,
        server_run_delay: server.run_delay_share(),
        generator_run_delay: generator.run_delay_share(),
        psi_cpu_some: all.psi_cpu_some_share(),
        psi_io_some: all.psi_io_some_share(),
        steal: all.steal_share(),
        foreign_cpu: all.foreign_cpu_share(),
        foreign_io_mib_s: all.foreign_io_mib_s(),
        foreign_unreadable: all.foreign_unreadable as u64,
        unavailable,
        server_cpus: Vec::new(),
        generator_cpus: Vec::new(),
    }
}

/// The part of a snapshot at and below `root`.
fn subtree(s: &Snapshot, root: u32) -> Snapshot {
    let mut keep = std::collections::BTreeSet::from([root]);
    // Parents precede children in no guaranteed order: repeat until no pid is added.
    loop {
        let before = keep.len();
        for (pid, p) in &s.processes {
            if keep.contains(&p.ppid) {
                keep.insert(*pid);
            }
        }
        if keep.len() == before {
            break;
        }
    }
    let mut out = s.clone();
    out.root = root;
    out.processes.retain(|pid, _| keep.contains(pid));
    out
}

/// Only the process `pid` of a snapshot.
fn only(s: &Snapshot, pid: u32) -> Snapshot {
    let mut out = s.clone();
    out.processes.retain(|p, _| *p == pid);
    out
}

/// Flushes the file system holding `dir` (`syncfs`), so a calibration reading does not pay
/// for writeback another sample (or this one) left behind.
pub fn settle(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir)?;
    // SAFETY: syncfs takes an open fd, which `f` keeps alive for the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size passed is the set's own.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// Restricts the calling thread to `cpus`; threads and processes it starts afterwards inherit
/// the set.
pub fn pin_this_thread(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET ignores nothing: callers pass ids from `allowed_cpus`, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the size passed is the set's own.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Splits the allowed CPUs into the server's set and the generator's set, disjoint; `None`
/// with fewer than 2 CPUs. The generator gets a quarter (at least one), the server the rest:
/// on a 2-core cloud VM the reference server's work per request (fsync, HMAC check,
/// journal) costs more CPU than the generator's (sign and send), see `load bench-peer`.
pub fn split_cpus(allowed: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    if allowed.len() < 2 {
        return None;
    }
    let generator = allowed.len().div_ceil(4);
    let (server, gen_cpus) = allowed.split_at(allowed.len() - generator);
    Some((server.to_vec(), gen_cpus.to_vec()))
}

/// The most connections the scenario's generator holds at once: its devices (each holds one
/// long poll or transfer) or the widest cold-push or route-load level, whichever is more.
pub fn connections(s: &scenarios::scenario::Scenario) -> usize {
    use scenarios::scenario::Phase;
    s.phases
        .iter()
        .map(|p| match p {
            Phase::ColdPush { in_flight, .. } => *in_flight,
            Phase::RouteLoad { in_flight, .. } => in_flight.iter().copied().max().unwrap_or(1),
            Phase::LongPollFanout {
                waiters, pushers, ..
            } => waiters + pushers,
            Phase::ConcurrentPush {
                waiters, pushers, ..
            } => waiters + pushers.iter().copied().max().unwrap_or(1),
            Phase::McpCalls { in_flight, .. } => in_flight.iter().copied().max().unwrap_or(1),
            _ => 1,
        })
        .chain([s.devices])
        .max()
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_disjoint_and_cover_the_allowed_cpus() {
        assert_eq!(split_cpus(&[3]), None);
        assert_eq!(split_cpus(&[0, 1]), Some((vec![0], vec![1])));
        let (s, g) = split_cpus(&(0..16).collect::<Vec<_>>()).unwrap();
        assert_eq!((s.len(), g.len()), (12, 4));
        assert!(s.iter().all(|c| !g.contains(c)));
        let (s, g) = split_cpus(&[0, 2, 5]).unwrap();
        assert_eq!((s, g), (vec![0, 2], vec![5]));
    }

    #[test]
    fn a_window_over_a_busy_child_sees_its_cpu_and_names_what_is_missing() {
        // A busy child stands in for the server; it runs until killed, so its CPU stays in
        // the tree at the second snapshot.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let w = Window::start();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let c = w.finish(child.id());
        let _ = child.kill();
        let _ = child.wait();
        let c = c.unwrap();
        assert!(c.window_ms >= 300.0, "{c:?}");
        assert!(c.server_cpu_ms > 0.0, "{c:?}");
        let sys = procstat::SystemSample::read();
        assert_eq!(c.psi_cpu_some.is_some(), sys.psi_cpu.is_some(), "{c:?}");
        assert_eq!(c.unavailable.len(), sys.unavailable().len(), "{c:?}");
        assert!(c.server_run_delay.is_some(), "{c:?}");
    }
}

//! The no-cgroup fallback's reach past the process group: this (sample) process as the child
//! subreaper of its targets' trees, and a tracker that lists every process of a tree the group
//! cannot reach, for the guard to kill if the sample dies (`sample::guard` says why and where
//! this stops).
//!
//! Every child this process starts is registered here as its own (`spawn_own`), with the
//! tracker held off while it is spawned: a child the sample did not register is one it
//! inherited, and only those are reaped here. A registered child is reaped by its owner
//! (`Server`, `GroupGuard`, the vgdb runner), never here, so its exit status and rusage stay
//! its owner's.

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sample::escapee_wire::{MAX_ESCAPEES, encode_add, encode_remove};

/// How often the tracker looks: the window in which a process that left the group, or was
/// orphaned, can be missed by a `kill -9` of the harness. Each look reads a `children` file
/// per thread of each of the target's processes; at 50 ms that cost 1.2 % of a core against
/// Apache (its workers' threads; debug build), at 100 ms 0.6 % (docs/src/measured.md,
/// "Hostile targets and teardown"), so 100 ms it is.
pub const POLL: Duration = Duration::from_millis(100);

/// The most processes one look visits, a bound on a fork bomb's cost to the tracker.
const MAX_VISITS: usize = 65_536;

/// How long a SIGKILLed target may take to be reaped: a task inside an fsync dies only when
/// the flush returns. A polite teardown waits as long for the tree's last processes and the
/// orphans they leave.
pub const REAP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a registered child is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// A target's direct child, leader of the tree's process group (its pid is the group id).
    Tree,
    /// Anything else this process starts (a guard, vgdb): not walked, never reaped here.
    Helper,
}

struct Registry {
    /// The subreaper is on and the tracker runs.
    tracking: bool,
    /// This process's own children: pid to (start time, what it is). A pid whose start time
    /// differs is another process that got the number after the owner reaped it.
    own: BTreeMap<u32, (u64, Own)>,
    /// Each live guard's pid and the write end of its pipe.
    guards: Vec<(u32, libc::c_int)>,
    /// The escapees the guards have been sent: pid to start time.
    listed: BTreeMap<u32, u64>,
    /// The over-the-cap line was printed.
    warned: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    tracking: false,
    own: BTreeMap::new(),
    guards: Vec::new(),
    listed: BTreeMap::new(),
    warned: false,
});

fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process a child subreaper and starts the tracker, once; false when the kernel
/// refused (the process group is then all there is). Call it before pinning any thread: the
/// tracker keeps the CPU set of the thread that starts it.
pub(crate) fn enable() -> bool {
    let mut reg = lock();
    if reg.tracking {
        return true;
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return false;
    }
    reg.tracking = std::thread::Builder::new()
        .name("vb-subreaper".into())
        .spawn(track)
        .is_ok();
    reg.tracking
}

/// Runs `spawn` (which starts one child) with the tracker held off, and registers the child
/// (`pid_of` its pid) as this process's own. Every child a sample process starts goes through
/// here: an unregistered child would count as an inherited orphan, be listed as an escapee,
/// and be reaped by the tracker behind its owner's back.
pub(crate) fn spawn_own<T, E>(
    kind: Own,
    spawn: impl FnOnce() -> Result<T, E>,
    pid_of: impl FnOnce(&T) -> u32,
) -> Result<T, E> {
    let mut reg = lock();
    let out = spawn()?;
    let pid = pid_of(&out);
    // The child is unreaped, so its stat is its own; 0 if it cannot be read (it matches no
    // process, so a pid reused later is not mistaken for it).
    let start = start_of(pid).unwrap_or(0);
    reg.own.insert(pid, (start, kind));
    Ok(out)
}

/// [`spawn_own`] for a `Command`.
pub(crate) fn spawn_command(kind: Own, cmd: &mut std::process::Command) -> std::io::Result<Child> {
    spawn_own(kind, || cmd.spawn(), Child::id)
}

/// A guard's pipe: sent every escapee listed now, and each one listed or gone from now on.
pub(crate) fn attach_guard(pid: u32, fd: libc::c_int) {
    let mut reg = lock();
    for (&p, &s) in &reg.listed {
        send(fd, &encode_add(p, s));
    }
    reg.guards.push((pid, fd));
}

/// The guard is being disarmed or dropped: no more messages to its pipe.
pub(crate) fn detach_guard(pid: u32) {
    lock().guards.retain(|&(g, _)| g != pid);
}

/// The tree whose direct child was `root` is stopped: its root reaped, its group killed. When
/// it was the last of this process's trees, every process it inherited is killed and reaped,
/// looking again until none is left and the tree's group is empty (its dying members may
/// orphan more), bounded by [`REAP_TIMEOUT`]. While another tree runs (the other arm of a
/// paired sample), the escapees stay listed with its guard until that tree stops too.
pub(crate) fn tree_gone(root: u32) {
    let mut reg = lock();
    reg.own.remove(&root);
    let others = reg.own.values().any(|&(_, k)| k == Own::Tree);
    if !reg.tracking || others {
        return;
    }
    drop(reg);
    let deadline = Instant::now() + REAP_TIMEOUT;
    loop {
        let mut reg = lock();
        let orphans = scan(&mut reg);
        drop(reg);
        let group_left = !procstat::read::group_pids(root)
            .unwrap_or_default()
            .is_empty();
        if orphans.is_empty() && !group_left {
            return;
        }
        for &o in &orphans {
            // SAFETY: kill(2) on our own child, not reaped yet (the next look reaps it), so
            // its pid is still its own.
            unsafe { libc::kill(o as libc::pid_t, libc::SIGKILL) };
        }
        if Instant::now() > deadline {
            eprintln!(
                "vaultbench: {} processes the target left behind were still alive {} s after its stop",
                orphans.len(),
                REAP_TIMEOUT.as_secs()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The tracker: one look every [`POLL`], for the life of the process.
fn track() {
    loop {
        std::thread::sleep(POLL);
        let mut reg = lock();
        scan(&mut reg);
    }
}

/// One look at this process's children and down each tree: reaps every inherited orphan that
/// exited, lists the escapees afresh (telling the guards what changed), and returns the live
/// inherited orphans.
fn scan(reg: &mut Registry) -> Vec<u32> {
    let me = std::process::id();
    // Children reaped by their owners are no longer ours (their pid is gone, or another
    // process's).
    reg.own.retain(|&pid, &mut (start, _)| {
        stat_of(pid).is_some_and(|st| st.starttime_ticks == start && st.ppid == me)
    });
    let mut found = BTreeMap::new();
    let mut visits = MAX_VISITS;
    for (&root, &(_, kind)) in &reg.own {
        if kind == Own::Tree {
            walk(root, &mut found, &mut visits);
        }
    }
    // The kernel hands an orphan to the subreaper's first live thread, its main thread here
    // (which outlives the others), so the orphans are all in that thread's `children` file:
    // the other threads' files, one per tokio worker, need not be read.
    let mut orphans = Vec::new();
    for c in thread_children(me, me) {
        let Some(st) = stat_of(c) else { continue };
        match reg.own.get(&c) {
            Some(&(start, _)) if start == st.starttime_ticks => {}
            _ if matches!(st.state, 'Z' | 'X') => {
                let mut status = 0;
                // SAFETY: waitpid on an exited child this process inherited and nobody else
                // waits for (every child this process started is registered).
                unsafe { libc::waitpid(c as libc::pid_t, &mut status, libc::WNOHANG) };
            }
            _ => {
                orphans.push(c);
                found.insert(c, st.starttime_ticks);
            }
        }
    }
    relist(reg, &found);
    orphans
}

/// Adds to `found` each process under `root` outside `root`'s process group whose parent is
/// in it (a `setsid` or `setpgid` away from the group's kill), without looking under it: the
/// guard stops and kills what is under an escapee itself.
fn walk(root: u32, found: &mut BTreeMap<u32, u64>, visits: &mut usize) {
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for d in children_of(p) {
            if *visits == 0 {
                return;
            }
            *visits -= 1;
            let Some(st) = stat_of(d) else { continue };
            if matches!(st.state, 'Z' | 'X') {
                // Its parent reaps it.
                continue;
            }
            if st.pgrp == root {
                stack.push(d);
            } else {
                found.insert(d, st.starttime_ticks);
            }
        }
    }
}

/// Sends the guards what changed between the listed escapees and those `found`, and keeps
/// the new list.
fn relist(reg: &mut Registry, found: &BTreeMap<u32, u64>) {
    let (adds, removes, over) = plan_relist(&reg.listed, found, MAX_ESCAPEES);
    for p in removes {
        reg.listed.remove(&p);
        let msg = encode_remove(p);
        for &(_, fd) in &reg.guards {
            send(fd, &msg);
        }
    }
    for (p, s) in adds {
        reg.listed.insert(p, s);
        let msg = encode_add(p, s);
        for &(_, fd) in &reg.guards {
            send(fd, &msg);
        }
    }
    if over > 0 && !reg.warned {
        reg.warned = true;
        eprintln!(
            "vaultbench: the target has more than {MAX_ESCAPEES} processes outside its process \
             group; {over} are not handed to the guard, and a kill -9 of the harness would leave them"
        );
    }
}

/// What to tell the guards so that their list, `listed`, becomes `found` within `cap`
/// entries: `(adds, removes, left over)`. An add for a listed pid with another start time
/// replaces it; a listed entry still found is kept before any new one is added.
fn plan_relist(
    listed: &BTreeMap<u32, u64>,
    found: &BTreeMap<u32, u64>,
    cap: usize,
) -> (Vec<(u32, u64)>, Vec<u32>, usize) {
    let removes: Vec<u32> = listed
        .keys()
        .copied()
        .filter(|p| !found.contains_key(p))
        .collect();
    let mut len = listed.len() - removes.len();
    let mut adds = Vec::new();
    let mut over = 0;
    for (&p, &s) in found {
        match listed.get(&p) {
            Some(&old) if old == s => {}
            Some(_) => adds.push((p, s)),
            None if len < cap => {
                adds.push((p, s));
                len += 1;
            }
            None => over += 1,
        }
    }
    (adds, removes, over)
}

/// One message to a guard's pipe (non-blocking; lost if the guard stopped reading).
fn send(fd: libc::c_int, msg: &str) {
    // SAFETY: write(2) of a borrowed buffer to a pipe a live `GroupGuard` owns (guards are
    // detached under the registry's lock before their descriptor is closed).
    unsafe { libc::write(fd, msg.as_ptr().cast(), msg.len()) };
}

fn stat_of(pid: u32) -> Option<procstat::parse::Stat> {
    procstat::read::process_stat(procstat::Pid::Of(pid))
        .ok()
        .flatten()
}

fn start_of(pid: u32) -> Option<u64> {
    stat_of(pid).map(|s| s.starttime_ticks)
}

/// The children of `pid`: every thread's `/proc/<pid>/task/<tid>/children` (a child is listed
/// under the thread that forked it, or that inherited it).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in rd.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|w| w.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// The children of thread `tid` of process `pid`: those it forked or inherited.
fn thread_children(pid: u32, tid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
        .map(|t| {
            t.split_whitespace()
                .filter_map(|w| w.parse::<u32>().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        v.iter().copied().collect()
    }

    #[test]
    fn a_relist_adds_the_new_removes_the_gone_and_keeps_the_rest() {
        let listed = map(&[(10, 1), (11, 1), (12, 5)]);
        // 11 is gone; 12 is another process now (its pid reused); 13 is new.
        let found = map(&[(10, 1), (12, 9), (13, 2)]);
        let (adds, removes, over) = plan_relist(&listed, &found, 8);
        assert_eq!(adds, [(12, 9), (13, 2)]);
        assert_eq!(removes, [11]);
        assert_eq!(over, 0);
        // Nothing changed: nothing sent.
        assert_eq!(plan_relist(&found, &found, 8), (vec![], vec![], 0));
    }

    #[test]
    fn a_relist_stops_at_the_cap_and_keeps_what_is_listed() {
        let listed = map(&[(20, 1), (21, 1)]);
        let found = map(&[(5, 1), (6, 1), (7, 1), (20, 1), (21, 1)]);
        let (adds, removes, over) = plan_relist(&listed, &found, 3);
        assert_eq!(adds, [(5, 1)], "one free place, filled in pid order");
        assert!(removes.is_empty());
        assert_eq!(over, 2);
        // A removal frees a place in the same relist.
        let found = map(&[(5, 1), (6, 1), (20, 1)]);
        let (adds, removes, over) = plan_relist(&listed, &found, 2);
        assert_eq!((adds, removes, over), (vec![(5, 1)], vec![21], 1));
    }

    #[test]
    fn the_children_of_this_process_include_a_fresh_child_until_it_is_reaped() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(children_of(std::process::id()).contains(&c.id()));
        let st = stat_of(c.id()).unwrap();
        assert_eq!(st.ppid, std::process::id());
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(!children_of(std::process::id()).contains(&c.id()));
    }
}

//! The tree guard: a forked watcher that kills a target's whole process tree when the sample
//! process dies without stopping it (SIGKILL of the sample or of `record`/`ab` above it, the
//! OOM killer, a panic that aborts), and the cgroup that names the tree.
//!
//! # Design
//!
//! `PR_SET_PDEATHSIG` reaches only the target's direct child; a server's workers (Apache's
//! children, which ignore SIGTERM; a script's background jobs) do not inherit it and outlive
//! their master, reparented to init. Whatever kills them must therefore (a) know every
//! process of the tree, wherever it was reparented, and (b) outlive the sample process.
//!
//! - **Naming the tree.** Where a cgroup v2 leaf can be made (root, or a delegated subtree:
//!   the sample's own cgroup is writable), the target is born into a cgroup of its own
//!   ([`Cgroup`]: the child writes itself into `cgroup.procs` between fork and exec), so every
//!   descendant is in it whatever its parent, process group or session, and `cgroup.kill`
//!   kills them all at once. Elsewhere (no cgroup2 mount, no permission: an unprivileged CI)
//!   the tree is the target's process group, which every target is started in: Apache's and
//!   nginx's workers stay in it; only a process that calls `setsid`/`setpgid` itself escapes.
//! - **Outliving the sample.** The guard is forked from the sample process when the target is
//!   spawned: it moves to a process group of its own (so a signal to the sample's group spares
//!   it), ignores SIGINT, SIGTERM and SIGHUP, closes every descriptor but the read end of a
//!   pipe whose write end only the sample process holds (close-on-exec, so no target inherits
//!   it), and blocks in `read`. A byte on the pipe disarms it (the server was stopped, reaped
//!   and its cgroup removed: its group id may be reused); end of file without that byte means
//!   the sample process is gone, and the guard kills the cgroup and the group with SIGKILL,
//!   waits (bounded) until the cgroup is empty, removes it and exits. `kill -9` of `record`
//!   reaches the sample through its parent-death signal, and so the guard through the pipe.
//! - **The OOM killer.** An OOM kill is a SIGKILL; it must take the harness, never the guard.
//!   The guard sets its `oom_score_adj` to -1000 (never chosen) where permitted
//!   (CAP_SYS_RESOURCE), else back to the value the sample started with; the sample process
//!   raises its own to [`SAMPLE_OOM_SCORE_ADJ`] ([`prefer_this_process_as_oom_victim`]), and
//!   the target is put back to the original value before exec, so the measured server is not
//!   made a likelier victim than it would be on its own.
//! - **Why not a subreaper.** `PR_SET_CHILD_SUBREAPER` catches orphans only for a living
//!   ancestor. The process that must outlive the sample is the guard, which is not the
//!   target's ancestor; making it one would take the target's `wait4` rusage, its exit status
//!   and its stderr pipe away from the sample. The cgroup reaches what a subreaper would, and
//!   more (a process whose every ancestor up to init has died).
//!
//! A guard that is itself killed (by hand) leaves its cgroup behind; the next sample on the
//! machine removes cgroups whose owner is gone ([`Cgroup::create`] sweeps its siblings).
//! Between fork and exit the guard calls only async-signal-safe functions.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The prefix of every cgroup this module makes: `vaultbench-<pid>-<starttime>-<n>`, owned by
/// the sample process `<pid>` with kernel start time `<starttime>`.
const CGROUP_PREFIX: &str = "vaultbench-";

/// How long the killer waits for a killed cgroup to empty before it gives up on removing it:
/// a task inside an fsync dies only when the flush returns (the same bound as reaping a
/// killed target, `target::REAP_TIMEOUT`).
const EMPTY_POLLS: u32 = 3000;
/// The pause between two looks at a killed cgroup (`EMPTY_POLLS` of them make 30 s).
const EMPTY_POLL_NS: libc::c_long = 10_000_000;

/// A cgroup v2 leaf holding one target's tree, removed when dropped (its processes killed).
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    paths: RawPaths,
}

/// The cgroup's files as C strings, made before any fork (the forked code cannot allocate).
#[derive(Debug, Clone)]
struct RawPaths {
    dir: CString,
    procs: CString,
    kill: CString,
}

impl RawPaths {
    fn new(dir: &Path) -> Option<RawPaths> {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        Some(RawPaths {
            dir: c(dir)?,
            procs: c(&dir.join("cgroup.procs"))?,
            kill: c(&dir.join("cgroup.kill"))?,
        })
    }
}

static NEXT_CGROUP: AtomicU32 = AtomicU32::new(0);

impl Cgroup {
    /// A fresh leaf under this process's own cgroup v2, after removing the leaves a dead owner
    /// left there; `None` where there is no cgroup2 mount or no permission to make one (the
    /// caller goes on with the process group alone).
    pub fn create() -> Option<Cgroup> {
        let parent = own_cgroup_dir()?;
        sweep_stale(&parent);
        let (pid, start) = owner()?;
        let n = NEXT_CGROUP.fetch_add(1, Ordering::SeqCst);
        let dir = parent.join(format!("{CGROUP_PREFIX}{pid}-{start}-{n}"));
        std::fs::create_dir(&dir).ok()?;
        match RawPaths::new(&dir) {
            Some(paths) => Some(Cgroup { dir, paths }),
            None => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A `pre_exec` hook that moves the forked child into this cgroup before it execs, so the
    /// target and all it forks are born inside. Best effort: a child that cannot join execs
    /// anyway, and [`Cgroup::holds`] tells the caller afterwards.
    pub fn join_hook(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let procs = self.paths.procs.clone();
        move || {
            // SAFETY: open, write and close are async-signal-safe; the path was made before
            // the fork.
            unsafe {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            Ok(())
        }
    }

    /// Whether `pid` is in this cgroup (it joined).
    pub fn holds(&self, pid: u32) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .is_ok_and(|t| t.lines().any(|l| l.trim().parse() == Ok(pid)))
    }

    /// SIGKILL to every process in the cgroup, then waits (bounded) for it to empty and
    /// removes it; true when it is gone.
    pub fn kill_and_remove(&self) -> bool {
        // SAFETY: the raw killer reads and writes this cgroup's own files and signals the
        // pids listed in it.
        unsafe { kill_cgroup_raw(&self.paths) }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_and_remove();
    }
}

/// Kills every process in the cgroup (`cgroup.kill` where the kernel has it, 5.14 on, and
/// each listed pid in any case), polls until `rmdir` succeeds or [`EMPTY_POLLS`] pass.
///
/// # Safety
/// Async-signal-safe (open, read, write, close, kill, rmdir, nanosleep, no allocation): may
/// run in a forked child of a multi-threaded process.
unsafe fn kill_cgroup_raw(p: &RawPaths) -> bool {
    // SAFETY: as the function's contract says; every pointer is a live C string or a local.
    unsafe {
        let fd = libc::open(p.kill.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"1".as_ptr().cast(), 1);
            libc::close(fd);
        }
        for _ in 0..EMPTY_POLLS {
            if libc::rmdir(p.dir.as_ptr()) == 0 || *libc::__errno_location() == libc::ENOENT {
                return true;
            }
            kill_listed_raw(p);
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: EMPTY_POLL_NS,
            };
            libc::nanosleep(&ts, std::ptr::null_mut());
        }
        false
    }
}

/// SIGKILL to each pid in `cgroup.procs` (for kernels without `cgroup.kill`).
///
/// # Safety
/// Async-signal-safe, as [`kill_cgroup_raw`].
unsafe fn kill_listed_raw(p: &RawPaths) {
    // SAFETY: as the function's contract says.
    unsafe {
        let fd = libc::open(p.procs.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &b in &buf[..n as usize] {
                if b.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add((b - b'0') as libc::pid_t);
                } else {
                    if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(fd);
    }
}

/// This process's cgroup v2 directory, when it is a writable directory of a cgroup2 mount.
fn own_cgroup_dir() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let dir = cgroup_dir(&mountinfo, &cgroup)?;
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: access(2) on a C string we own.
    (unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0).then_some(dir)
}

/// The directory of the cgroup named by `/proc/self/cgroup`'s v2 line (`0::PATH`) under the
/// first cgroup2 mount whose root is the hierarchy's root (a mount of a subtree, as in some
/// containers, cannot be mapped and is not used).
fn cgroup_dir(mountinfo: &str, cgroup: &str) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut f = left.split_whitespace();
        let (root, point) = (f.nth(3)?, f.next()?);
        // Octal escapes (a space in the mount point) are not worth decoding here.
        (root == "/" && !point.contains('\\')).then(|| PathBuf::from(point))
    })?;
    let rel = path.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") || path.contains("(deleted)") {
        return None;
    }
    Some(if rel.is_empty() {
        mount
    } else {
        mount.join(rel)
    })
}

/// This process's pid and kernel start time (the owner named in its cgroups' names).
fn owner() -> Option<(u32, u64)> {
    let pid = std::process::id();
    let st = procstat::read::process_stat(procstat::Pid::Of(pid)).ok()??;
    Some((pid, st.starttime_ticks))
}

/// The owner `(pid, starttime)` in a cgroup name this module made.
fn parse_owner(name: &str) -> Option<(u32, u64)> {
    let mut it = name.strip_prefix(CGROUP_PREFIX)?.split('-');
    let pid = it.next()?.parse().ok()?;
    let start = it.next()?.parse().ok()?;
    it.next()?.parse::<u32>().ok()?;
    it.next().is_none().then_some((pid, start))
}

/// Kills and removes the cgroups under `parent` that this module made for an owner that is
/// gone (no such pid, or the pid reused by a process with another start time): leftovers of a
/// guard that was itself killed. A live owner's, or one not named by this module, is left.
fn sweep_stale(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let Some((pid, start)) = e.file_name().to_str().and_then(parse_owner) else {
            continue;
        };
        let alive = match procstat::read::process_stat(procstat::Pid::Of(pid)) {
            Ok(Some(st)) => st.starttime_ticks == start,
            Ok(None) => false,
            Err(_) => true,
        };
        if !alive && let Some(paths) = RawPaths::new(&e.path()) {
            // SAFETY: a cgroup this module made; its owner is gone.
            unsafe { kill_cgroup_raw(&paths) };
        }
    }
}

/// The `oom_score_adj` of a sample process: the OOM killer takes it before any process not
/// so marked (the scale is -1000 to 1000, in thousandths of memory), so an OOM during a
/// sample kills the harness, whose death the guard turns into the target's teardown.
pub const SAMPLE_OOM_SCORE_ADJ: i32 = 500;

/// `oom_score_adj` as this process found it, before [`prefer_this_process_as_oom_victim`];
/// `i32::MIN` until then.
static ORIGINAL_OOM_SCORE_ADJ: AtomicI32 = AtomicI32::new(i32::MIN);

const OOM_SCORE_ADJ: &std::ffi::CStr = c"/proc/self/oom_score_adj";

/// Raises this (sample) process's `oom_score_adj` to [`SAMPLE_OOM_SCORE_ADJ`], once; the
/// guard and the target put theirs back ([`restore_oom_score_adj_hook`]). Raising is always
/// permitted; a failure leaves the value as it was.
pub fn prefer_this_process_as_oom_victim() {
    if ORIGINAL_OOM_SCORE_ADJ.load(Ordering::SeqCst) != i32::MIN {
        return;
    }
    let Some(orig) = std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    else {
        return;
    };
    if orig >= SAMPLE_OOM_SCORE_ADJ {
        return;
    }
    if std::fs::write("/proc/self/oom_score_adj", SAMPLE_OOM_SCORE_ADJ.to_string()).is_ok() {
        ORIGINAL_OOM_SCORE_ADJ.store(orig, Ordering::SeqCst);
    }
}

/// The original `oom_score_adj` as decimal bytes, when this process raised its own.
fn original_oom_text() -> Option<([u8; 12], usize)> {
    let v = ORIGINAL_OOM_SCORE_ADJ.load(Ordering::SeqCst);
    if v == i32::MIN {
        return None;
    }
    let s = v.to_string();
    let mut buf = [0u8; 12];
    let n = s.len().min(buf.len());
    buf[..n].copy_from_slice(&s.as_bytes()[..n]);
    Some((buf, n))
}

/// Writes `text` to `/proc/self/oom_score_adj`; true on success.
///
/// # Safety
/// Async-signal-safe.
unsafe fn write_oom_raw(text: &[u8]) -> bool {
    // SAFETY: open/write/close on a static path and a borrowed buffer.
    unsafe {
        let fd = libc::open(OOM_SCORE_ADJ.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, text.as_ptr().cast(), text.len()) == text.len() as isize;
        libc::close(fd);
        ok
    }
}

/// A `pre_exec` hook that puts the child's `oom_score_adj` back to the value this process
/// started with (lowering down to it needs no privilege), when it was raised.
pub fn restore_oom_score_adj_hook() -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let text = original_oom_text();
    move || {
        if let Some((buf, n)) = text {
            // SAFETY: async-signal-safe write of bytes made before the fork.
            unsafe { write_oom_raw(&buf[..n]) };
        }
        Ok(())
    }
}

/// A live guard over one target tree: its process group and, where one was made, its cgroup.
#[derive(Debug)]
pub struct GroupGuard {
    write_fd: libc::c_int,
    pid: libc::pid_t,
}

impl GroupGuard {
    /// Forks a guard over process group `pgid` and `cgroup`; `None` when the pipe or the fork
    /// fails (the caller goes on without one: the direct child still has its parent-death
    /// signal).
    pub fn spawn(pgid: u32, cgroup: Option<&Cgroup>) -> Option<GroupGuard> {
        let pgid = pgid as libc::pid_t;
        // Everything the forked child needs is made here, before the fork.
        let paths = cgroup.map(|c| c.paths.clone());
        let restore = original_oom_text();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let (r, w) = (fds[0], fds[1]);
        // SAFETY: fork in a multi-threaded process; the child below calls only
        // async-signal-safe functions (setpgid, signal, open, close, read, write, kill, rmdir,
        // nanosleep, _exit) and never returns into Rust code that allocates.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            // SAFETY: closing descriptors this function opened.
            unsafe {
                libc::close(r);
                libc::close(w);
            }
            return None;
        }
        if pid == 0 {
            // SAFETY: the forked child: async-signal-safe calls only, ending in _exit.
            unsafe {
                libc::setpgid(0, 0);
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                for fd in 0..4096 {
                    if fd != r {
                        libc::close(fd);
                    }
                }
                // Never the OOM killer's choice where permitted; else no likelier a victim
                // than the sample process was before it raised its own score.
                if !write_oom_raw(b"-1000")
                    && let Some((buf, n)) = restore
                {
                    write_oom_raw(&buf[..n]);
                }
                let mut b = 0u8;
                loop {
                    let n = libc::read(r, (&mut b as *mut u8).cast(), 1);
                    if n == 1 {
                        // Disarmed: the server was stopped and reaped.
                        libc::_exit(0);
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                // The group first: it is one syscall, and it stops Apache's master from
                // forking replacements while the cgroup is emptied.
                libc::kill(-pgid, libc::SIGKILL);
                if let Some(p) = &paths {
                    kill_cgroup_raw(p);
                }
                libc::kill(-pgid, libc::SIGKILL);
                libc::_exit(0);
            }
        }
        // SAFETY: the parent's copy of the read end is not needed.
        unsafe { libc::close(r) };
        Some(GroupGuard { write_fd: w, pid })
    }

    /// The guard's pid (tests look for it).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Tells the guard the tree is gone (stopped and reaped, its cgroup removed by the
    /// caller), and reaps it.
    pub fn disarm(self) {
        // SAFETY: writing one byte to, then closing, the pipe this guard owns.
        unsafe {
            libc::write(self.write_fd, b"d".as_ptr().cast(), 1);
        }
        // Drop closes the descriptor and reaps the guard.
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this guard owns, then reaping our own child, which
        // exits as soon as it reads the byte, or kills the tree on end of file and exits.
        unsafe {
            libc::close(self.write_fd);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn alive(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    #[test]
    fn an_unarmed_guard_kills_the_group_and_a_disarmed_one_does_not() {
        // A group of two sleepers that ignore SIGTERM (a master and its worker).
        let spawn = || {
            std::process::Command::new("sh")
                .args(["-c", "trap '' TERM; sleep 60 & sleep 60; wait"])
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut a = spawn();
        let g = GroupGuard::spawn(a.id(), None).unwrap();
        // Dropping without disarming is what the sample process's death does (end of file).
        drop(g);
        let t0 = Instant::now();
        while a.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            a.try_wait().unwrap().is_some(),
            "the guard killed the group"
        );
        let mut b = spawn();
        let g = GroupGuard::spawn(b.id(), None).unwrap();
        let guard_pid = g.pid();
        g.disarm();
        assert!(
            !alive(guard_pid),
            "the disarmed guard exited and was reaped"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            b.try_wait().unwrap().is_none(),
            "a disarmed guard leaves the group alone"
        );
        // SAFETY: our own child's group.
        unsafe { libc::kill(-(b.id() as libc::pid_t), libc::SIGKILL) };
        let _ = b.wait();
    }

    #[test]
    fn the_cgroup_dir_is_the_v2_line_under_the_cgroup2_mount() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n\
                  32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                  40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup_dir(mi, "4:memory:/x\n0::/\n"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup_dir(mi, "0::/user.slice/term.scope\n"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/user.slice/term.scope"
            ))
        );
        // No v2 line (a pure v1 machine), no cgroup2 mount, a subtree mount, a climb out.
        assert_eq!(cgroup_dir(mi, "4:memory:/x\n"), None);
        assert_eq!(
            cgroup_dir("31 23 0:28 / /c rw - tmpfs tmpfs rw\n", "0::/\n"),
            None
        );
        assert_eq!(
            cgroup_dir("40 31 0:37 /sub /c rw - cgroup2 cgroup2 rw\n", "0::/\n"),
            None
        );
        assert_eq!(cgroup_dir(mi, "0::/../x\n"), None);
    }

    #[test]
    fn only_names_this_module_makes_have_an_owner() {
        assert_eq!(parse_owner("vaultbench-12-345-0"), Some((12, 345)));
        assert_eq!(parse_owner("vaultbench-12-345"), None);
        assert_eq!(parse_owner("vaultbench-12-345-0-1"), None);
        assert_eq!(parse_owner("user.slice"), None);
        assert_eq!(parse_owner("vaultbench-a-345-0"), None);
    }

    /// A tree whose worker leaves the process group (`setsid`) and whose master dies: the
    /// process group alone cannot reach the worker; the cgroup does.
    #[test]
    #[ignore = "slow: needs a writable cgroup v2 hierarchy (root or delegated), as on CI"]
    fn a_guard_kills_a_worker_that_left_the_group_through_the_cgroup() {
        let cg = Cgroup::create().expect("a cgroup v2 leaf can be made here");
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("escapee");
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "setsid sh -c 'trap \"\" TERM; echo $$ > {}; exec sleep 60' & sleep 60",
                pidfile.display()
            ))
            .process_group(0);
        // SAFETY: the hook only opens, writes and closes a file.
        unsafe { cmd.pre_exec(cg.join_hook()) };
        let mut master = cmd.spawn().unwrap();
        assert!(
            cg.holds(master.id()),
            "the child joined {}",
            cg.dir().display()
        );
        let t0 = Instant::now();
        let escapee = loop {
            if let Ok(t) = std::fs::read_to_string(&pidfile)
                && let Ok(p) = t.trim().parse::<u32>()
            {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no escapee");
            std::thread::sleep(Duration::from_millis(10));
        };
        let g = GroupGuard::spawn(master.id(), Some(&cg)).unwrap();
        // The master dies first, as Apache's parent does under its parent-death signal.
        // SAFETY: our own child.
        unsafe { libc::kill(master.id() as libc::pid_t, libc::SIGKILL) };
        let _ = master.wait();
        assert!(alive(escapee), "the escapee outlived its master");
        drop(g);
        let t0 = Instant::now();
        while alive(escapee) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(escapee), "the cgroup's worker was killed");
        assert!(!cg.dir().exists(), "the guard removed the cgroup");
        // Dropping a removed cgroup is a no-op.
        drop(cg);
    }

    /// A cgroup whose guard was itself killed (its owner gone) is killed and removed by the
    /// next [`Cgroup::create`] beside it; a live owner's is left alone.
    #[test]
    #[ignore = "slow: needs a writable cgroup v2 hierarchy (root or delegated), as on CI"]
    fn the_next_cgroup_removes_the_cgroups_of_dead_owners() {
        let parent = own_cgroup_dir().expect("a writable cgroup v2 hierarchy");
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let stale = parent.join(format!("{CGROUP_PREFIX}{dead}-1-0"));
        std::fs::create_dir(&stale).unwrap();
        let mut sleeper = std::process::Command::new("sleep");
        sleeper.arg("60");
        let hook = Cgroup {
            dir: stale.clone(),
            paths: RawPaths::new(&stale).unwrap(),
        };
        // SAFETY: the hook only opens, writes and closes a file.
        unsafe { sleeper.pre_exec(hook.join_hook()) };
        let mut sleeper = sleeper.spawn().unwrap();
        // Not dropped: that would remove it now, as a live owner does.
        std::mem::forget(hook);
        assert!(
            std::fs::read_to_string(stale.join("cgroup.procs"))
                .unwrap()
                .contains(&sleeper.id().to_string())
        );
        let live = Cgroup::create().unwrap();
        assert!(!stale.exists(), "the dead owner's cgroup was removed");
        let t0 = Instant::now();
        while sleeper.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            sleeper.try_wait().unwrap().is_some(),
            "its process was killed"
        );
        // Our own (live) cgroup survives another sweep.
        let other = Cgroup::create().unwrap();
        assert!(live.dir().exists());
        drop(other);
        drop(live);
    }
}

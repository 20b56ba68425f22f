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
//!   kills them all at once. This remains the first choice. Elsewhere (no cgroup2 mount, no
//!   permission: an unprivileged CI) the tree is the target's process group, which every
//!   target is started in (Apache's and nginx's workers stay in it), plus the processes the
//!   sample's subreaper lists (below): those that left the group (`setsid`, `setpgid`, a
//!   double fork into a new session). `VAULTBENCH_TEST_NO_CGROUP=1` ([`NO_CGROUP_ENV`]) is a
//!   testing knob, not a setting: it forces this fallback where a cgroup could be made, so
//!   the fallback is tested on machines that have cgroups too.
//! - **Outliving the sample.** The guard is forked from the sample process when the target is
//!   spawned: it moves to a process group of its own (so a signal to the sample's group spares
//!   it), ignores SIGINT, SIGTERM and SIGHUP, closes every descriptor but the read end of a
//!   pipe whose write end only the sample process holds (close-on-exec, so no target inherits
//!   it), and blocks in `read`. A byte `d` on the pipe disarms it (the server was stopped,
//!   reaped and its cgroup removed: its group id may be reused); end of file without that byte
//!   means the sample process is gone, and the guard kills the cgroup, the group and the listed
//!   escapees with SIGKILL, waits (bounded) until the cgroup is empty, removes it and exits.
//!   `kill -9` of `record` reaches the sample through its parent-death signal, and so the
//!   guard through the pipe.
//! - **The fallback: a subreaper and a list of escapees.** Without a cgroup the sample process
//!   makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`) before it starts the target, so
//!   an orphan of the tree is reparented to it rather than to init, and a tracker thread
//!   (`sample::subreaper`) looks every 100 ms at its own children and down each target's tree.
//!   An escapee is a child the sample did not start (an orphan it inherited), or a process of
//!   a target's tree outside the target's process group whose parent is in it. Each is sent to
//!   every guard as `+PID STARTTIME` (the kernel start time, `/proc/PID/stat` field 22), and
//!   `-PID` once it is gone. The guard, when the sample dies, kills the group and then every
//!   listed process whose start time still matches, so a pid the kernel has given to another
//!   process since is never signalled (a pidfd, where the kernel has them, 5.3 on, pins the
//!   process between the check and the signal). It stops each escapee before reading its
//!   children, and stops each child before reading its own, then kills them all: a stopped
//!   process forks nothing past the kill. In a polite stop the sample kills what it inherited
//!   itself and reaps it; during the run the tracker reaps every inherited orphan that exits,
//!   so the subreaper leaves no zombies.
//!
//!   Its limits, stated: a process that escapes within the last poll interval before the
//!   harness is killed (a `setsid` or an orphaning less than 100 ms before a `kill -9` or an OOM
//!   kill) is on no list yet and is missed; a polite stop misses nothing, since it looks again
//!   after the tree's root is reaped. A guard holds at most [`MAX_ESCAPEES`] (1,024) live
//!   escapees and stops and kills at most [`MAX_WALK`] (4,096) processes under them; past
//!   either, the rest are missed by a `kill -9` (past the first, the sample says so on stderr
//!   once). A target
//!   that makes itself a subreaper keeps its own orphans as children: they stay in its tree,
//!   where the walk finds those outside its group as it finds any other's. Neither the cgroup
//!   nor the subreaper reaches a process the target has an unrelated process start for it
//!   (`systemd-run`, a container runtime): it is not a descendant.
//! - **The OOM killer.** An OOM kill is a SIGKILL; it must take the harness, never the guard.
//!   The guard sets its `oom_score_adj` to -1000 (never chosen) where permitted
//!   (CAP_SYS_RESOURCE), else back to the value the sample started with; the sample process
//!   raises its own to [`SAMPLE_OOM_SCORE_ADJ`] ([`prefer_this_process_as_oom_victim`]), and
//!   the target is put back to the original value before exec, so the measured server is not
//!   made a likelier victim than it would be on its own.
//! - **Why the guard is not the subreaper.** `PR_SET_CHILD_SUBREAPER` catches orphans only for
//!   a living ancestor. The process that must outlive the sample is the guard, which is not
//!   the target's ancestor; making it one would take the target's `wait4` rusage, its exit
//!   status and its stderr pipe away from the sample. So the sample is the subreaper, and hands
//!   what it learns to the guard.
//!
//! A guard that is itself killed (by hand) leaves its cgroup behind; the next sample on the
//! machine removes cgroups whose owner is gone ([`Cgroup::create`] sweeps its siblings).
//! Between fork and exit the guard calls only async-signal-safe functions.

use crate::sample::escapee_wire::{MAX_ESCAPEES, Msg, Wire};
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

/// The testing knob that forces the no-cgroup fallback (`=1`): [`Cgroup::create`] makes no
/// cgroup, so the process group and the subreaper's list are all a guard has, as on a machine
/// without cgroup2 or without permission. For tests of that fallback; not a setting.
pub const NO_CGROUP_ENV: &str = "VAULTBENCH_TEST_NO_CGROUP";

/// Whether [`NO_CGROUP_ENV`] is set to `1`.
pub fn no_cgroup_forced() -> bool {
    std::env::var_os(NO_CGROUP_ENV).is_some_and(|v| v == "1")
}

/// Whether [`Cgroup::create`] may succeed here: the knob is not set and this process's cgroup
/// v2 directory is writable. A sample process that learns it cannot starts its subreaper
/// before it pins any thread (`sample::subreaper`).
pub fn cgroup_possible() -> bool {
    !no_cgroup_forced() && own_cgroup_dir().is_some()
}

/// The most processes a guard stops and kills under its listed escapees (their descendants
/// included), a bound on its stack (16 KiB of pids).
pub const MAX_WALK: usize = 4096;

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
    /// left there; `None` where there is no cgroup2 mount or no permission to make one, or
    /// where [`NO_CGROUP_ENV`] forces the fallback (the caller goes on with the process group
    /// and the subreaper).
    pub fn create() -> Option<Cgroup> {
        if no_cgroup_forced() {
            return None;
        }
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

/// The guard's list of live escapees: at most [`MAX_ESCAPEES`], by pid (a second `+` for a
/// pid replaces its start time), no allocation.
struct Escapees {
    list: [(libc::pid_t, u64); MAX_ESCAPEES],
    len: usize,
}

impl Escapees {
    fn new() -> Escapees {
        Escapees {
            list: [(0, 0); MAX_ESCAPEES],
            len: 0,
        }
    }

    /// Lists `pid`; false when the list is full.
    fn add(&mut self, pid: libc::pid_t, start: u64) -> bool {
        if let Some(e) = self.list[..self.len].iter_mut().find(|e| e.0 == pid) {
            e.1 = start;
            return true;
        }
        if self.len == MAX_ESCAPEES {
            return false;
        }
        self.list[self.len] = (pid, start);
        self.len += 1;
        true
    }

    fn remove(&mut self, pid: libc::pid_t) {
        if let Some(i) = self.list[..self.len].iter().position(|e| e.0 == pid) {
            self.list[i] = self.list[self.len - 1];
            self.len -= 1;
        }
    }

    fn as_slice(&self) -> &[(libc::pid_t, u64)] {
        &self.list[..self.len]
    }

    fn apply(&mut self, m: Msg) {
        match m {
            Msg::Add(p, s) => {
                self.add(p, s);
            }
            Msg::Remove(p) => self.remove(p),
            Msg::Disarm => {}
        }
    }
}

/// Field 22 of a `/proc/PID/stat` line, the process's start time in clock ticks since boot:
/// with the pid, it names one process for the life of the machine. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted from the last `)`.
fn stat_starttime(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    // After the `)`: field 3 (the state) is the first, so field 22 is the 20th.
    let field = stat[close + 1..]
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty())
        .nth(19)?;
    let mut v: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// `/proc/<pid>[/task[/<tid>/children]]` as a C string in `buf` (no allocation).
fn proc_path<'a>(
    buf: &'a mut [u8; 64],
    pid: libc::pid_t,
    tail: &[u8],
    tid: Option<libc::pid_t>,
    tail2: &[u8],
) -> &'a [u8] {
    let mut n = 0;
    let mut put = |bytes: &[u8], n: &mut usize| {
        for &b in bytes {
            if *n < buf.len() - 1 {
                buf[*n] = b;
                *n += 1;
            }
        }
    };
    put(b"/proc/", &mut n);
    let mut digits = [0u8; 12];
    put(decimal(pid, &mut digits), &mut n);
    put(tail, &mut n);
    if let Some(t) = tid {
        let mut d = [0u8; 12];
        put(decimal(t, &mut d), &mut n);
        put(tail2, &mut n);
    }
    buf[n] = 0;
    &buf[..=n]
}

/// `v` in decimal, in `buf`.
fn decimal(v: libc::pid_t, buf: &mut [u8; 12]) -> &[u8] {
    let mut v = v.max(0) as u32;
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// The start time of `pid`, read from `/proc/<pid>/stat`; `None` when it is gone.
///
/// # Safety
/// Async-signal-safe (open, read, close; no allocation).
unsafe fn starttime_raw(pid: libc::pid_t) -> Option<u64> {
    let mut path = [0u8; 64];
    let p = proc_path(&mut path, pid, b"/stat", None, b"");
    let mut buf = [0u8; 2048];
    // SAFETY: as the function's contract says; `p` is NUL-terminated.
    unsafe {
        let fd = libc::open(p.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut n = 0usize;
        while n < buf.len() {
            let r = libc::read(fd, buf[n..].as_mut_ptr().cast(), buf.len() - n);
            if r <= 0 {
                break;
            }
            n += r as usize;
        }
        libc::close(fd);
        stat_starttime(&buf[..n])
    }
}

/// Calls `f` with each child of `pid` (every thread's `children` file; `getdents64` over
/// `/proc/<pid>/task`).
///
/// # Safety
/// Async-signal-safe (open, getdents64, read, close; no allocation).
unsafe fn for_each_child_raw(pid: libc::pid_t, mut f: impl FnMut(libc::pid_t)) {
    let mut path = [0u8; 64];
    let dir = proc_path(&mut path, pid, b"/task", None, b"");
    // SAFETY: as the function's contract says; every path is NUL-terminated, every buffer a
    // local of the length passed.
    unsafe {
        let dfd = libc::open(
            dir.as_ptr().cast(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dfd < 0 {
            return;
        }
        let mut ents = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dfd, ents.as_mut_ptr(), ents.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off + 19 < n as usize {
                // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
                let reclen = u16::from_ne_bytes([ents[off + 16], ents[off + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let mut tid: libc::pid_t = 0;
                let mut ok = false;
                for &b in &ents[off + 19..(off + reclen).min(n as usize)] {
                    if b == 0 {
                        break;
                    }
                    if !b.is_ascii_digit() {
                        ok = false;
                        break;
                    }
                    tid = tid
                        .saturating_mul(10)
                        .saturating_add((b - b'0') as libc::pid_t);
                    ok = true;
                }
                off += reclen;
                if !ok {
                    continue;
                }
                let mut cpath = [0u8; 64];
                let c = proc_path(&mut cpath, pid, b"/task/", Some(tid), b"/children");
                let fd = libc::open(c.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    continue;
                }
                let mut buf = [0u8; 1024];
                let mut child: libc::pid_t = 0;
                loop {
                    let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    if r <= 0 {
                        break;
                    }
                    for &b in &buf[..r as usize] {
                        if b.is_ascii_digit() {
                            child = child
                                .saturating_mul(10)
                                .saturating_add((b - b'0') as libc::pid_t);
                        } else {
                            if child > 0 {
                                f(child);
                            }
                            child = 0;
                        }
                    }
                }
                if child > 0 {
                    f(child);
                }
                libc::close(fd);
            }
        }
        libc::close(dfd);
    }
}

/// Kills the escapee `pid` and every process under it, when `pid` still has start time
/// `start` (else it is gone, and its pid may be another process's: nothing is signalled).
/// Top down, each process is stopped before its children are read, so none forks past the
/// walk; then all are killed. At most [`MAX_WALK`] processes, in `walk`.
///
/// # Safety
/// Async-signal-safe (pidfd_open, pidfd_send_signal, kill, open, read, getdents64, close).
unsafe fn kill_escapee_raw(pid: libc::pid_t, start: u64, walk: &mut [libc::pid_t; MAX_WALK]) {
    // SAFETY: as the function's contract says.
    unsafe {
        // The pidfd names this process even if it dies and its pid is reused after the check.
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as libc::c_int;
        if pidfd < 0 && *libc::__errno_location() == libc::ESRCH {
            return;
        }
        let signal = |sig: libc::c_int| {
            if pidfd >= 0 {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd,
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            } else {
                libc::kill(pid, sig);
            }
        };
        if starttime_raw(pid) == Some(start) {
            signal(libc::SIGSTOP);
            let mut n = 0;
            let mut i = 0;
            for_each_child_raw(pid, |c| {
                if n < MAX_WALK {
                    libc::kill(c, libc::SIGSTOP);
                    walk[n] = c;
                    n += 1;
                }
            });
            // Each child was stopped before its own children are read: its pid stays its own
            // (a stopped parent reaps nothing).
            while i < n {
                let p = walk[i];
                i += 1;
                for_each_child_raw(p, |c| {
                    if n < MAX_WALK {
                        libc::kill(c, libc::SIGSTOP);
                        walk[n] = c;
                        n += 1;
                    }
                });
            }
            signal(libc::SIGKILL);
            for &c in &walk[..n] {
                libc::kill(c, libc::SIGKILL);
            }
        }
        if pidfd >= 0 {
            libc::close(pidfd);
        }
    }
}

/// A live guard over one target tree: its process group, its cgroup where one was made, and
/// the escapees the subreaper lists.
#[derive(Debug)]
pub struct GroupGuard {
    write_fd: libc::c_int,
    pid: libc::pid_t,
}

impl GroupGuard {
    /// Forks a guard over process group `pgid` and `cgroup`; `None` when the pipe or the fork
    /// fails (the caller goes on without one: the direct child still has its parent-death
    /// signal). The guard is this process's own child for the subreaper's tracker, and is
    /// sent every escapee listed now and from now on.
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
        // The tracker's writes must never block it (it holds the registry's lock): a guard
        // that stopped reading loses messages rather than stalling the sample.
        // SAFETY: fcntl on the write end this function just made.
        unsafe {
            let fl = libc::fcntl(w, libc::F_GETFL);
            libc::fcntl(w, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let forked = crate::sample::subreaper::spawn_own(
            crate::sample::subreaper::Own::Helper,
            || {
                // SAFETY: fork in a multi-threaded process; the child runs `guard_main`, which
                // calls only async-signal-safe functions and ends in _exit, never returning
                // here.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // SAFETY: the forked child, as above.
                    unsafe { guard_main(r, pgid, paths.as_ref(), restore) }
                }
                if pid < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(pid)
                }
            },
            |&pid| pid as u32,
        );
        // SAFETY: the parent's copy of the read end is not needed.
        unsafe { libc::close(r) };
        let Ok(pid) = forked else {
            // SAFETY: closing the descriptor this function opened.
            unsafe { libc::close(w) };
            return None;
        };
        crate::sample::subreaper::attach_guard(pid as u32, w);
        Some(GroupGuard { write_fd: w, pid })
    }

    /// The guard's pid (tests look for it).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Writes one message to the guard (tests list escapees by hand with it).
    #[cfg(test)]
    fn send(&self, msg: &[u8]) {
        // SAFETY: writing a borrowed buffer to the pipe this guard owns.
        unsafe { libc::write(self.write_fd, msg.as_ptr().cast(), msg.len()) };
    }

    /// Tells the guard the tree is gone (stopped and reaped, its cgroup removed and its
    /// escapees killed by the caller), and reaps it.
    pub fn disarm(self) {
        crate::sample::subreaper::detach_guard(self.pid as u32);
        // SAFETY: writing one byte to, then closing, the pipe this guard owns.
        unsafe {
            libc::write(self.write_fd, b"d".as_ptr().cast(), 1);
        }
        // Drop closes the descriptor and reaps the guard.
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        crate::sample::subreaper::detach_guard(self.pid as u32);
        // SAFETY: closing the descriptor this guard owns, then reaping our own child, which
        // exits as soon as it reads the byte, or kills the tree on end of file and exits.
        unsafe {
            libc::close(self.write_fd);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// The forked guard: reads messages until `d` (exit) or end of file (the sample is gone: kill
/// the group, the cgroup and the listed escapees, then exit).
///
/// # Safety
/// Call only in a freshly forked child. Async-signal-safe throughout (setpgid, signal, open,
/// close, read, write, kill, pidfd calls, getdents64, rmdir, nanosleep, _exit); no allocation.
unsafe fn guard_main(
    r: libc::c_int,
    pgid: libc::pid_t,
    paths: Option<&RawPaths>,
    restore: Option<([u8; 12], usize)>,
) -> ! {
    // SAFETY: as the function's contract says.
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
        // Never the OOM killer's choice where permitted; else no likelier a victim than the
        // sample process was before it raised its own score.
        if !write_oom_raw(b"-1000")
            && let Some((buf, n)) = restore
        {
            write_oom_raw(&buf[..n]);
        }
        let mut wire = Wire::default();
        let mut listed = Escapees::new();
        let mut buf = [0u8; 512];
        loop {
            let n = libc::read(r, buf.as_mut_ptr().cast(), buf.len());
            if n > 0 {
                for &b in &buf[..n as usize] {
                    match wire.feed(b) {
                        // Disarmed: the server was stopped and reaped.
                        Some(Msg::Disarm) => libc::_exit(0),
                        Some(m) => listed.apply(m),
                        None => {}
                    }
                }
                continue;
            }
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        // The group first: it is one syscall, and it stops Apache's master from forking
        // replacements while the cgroup is emptied.
        libc::kill(-pgid, libc::SIGKILL);
        if let Some(p) = paths {
            kill_cgroup_raw(p);
        }
        let mut walk = [0 as libc::pid_t; MAX_WALK];
        for &(pid, start) in listed.as_slice() {
            kill_escapee_raw(pid, start, &mut walk);
        }
        libc::kill(-pgid, libc::SIGKILL);
        libc::_exit(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::escapee_wire::{encode_add, encode_remove};
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
    fn the_escapee_list_replaces_by_pid_removes_and_stops_at_its_cap() {
        let mut l = Escapees::new();
        assert!(l.add(5, 1));
        assert!(l.add(6, 1));
        assert!(l.add(5, 2), "a reused pid replaces its start time");
        assert_eq!(l.as_slice(), [(5, 2), (6, 1)]);
        l.remove(5);
        l.remove(99);
        assert_eq!(l.as_slice(), [(6, 1)]);
        for p in 0..MAX_ESCAPEES as libc::pid_t {
            l.add(100 + p, 1);
        }
        assert_eq!(l.as_slice().len(), MAX_ESCAPEES);
        assert!(!l.add(1, 1), "full");
        assert!(l.add(6, 3), "a listed pid is still replaced when full");
    }

    #[test]
    fn the_start_time_is_field_22_counted_from_the_last_parenthesis() {
        let line = b"42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 \
                     10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(stat_starttime(line), Some(987_654));
        assert_eq!(stat_starttime(b"42 (x) S 1 2 3"), None);
        assert_eq!(stat_starttime(b"no parenthesis"), None);
        // The raw reader, which the forked guard uses, agrees with procstat's.
        let me = std::process::id();
        let want = procstat::read::process_stat(procstat::Pid::Of(me))
            .unwrap()
            .unwrap()
            .starttime_ticks;
        // SAFETY: reads this process's own stat file.
        assert_eq!(unsafe { starttime_raw(me as libc::pid_t) }, Some(want));
        // SAFETY: as above; pid 0 has no /proc entry.
        assert_eq!(unsafe { starttime_raw(0) }, None);
    }

    /// A listed escapee (a session of its own, so the group kill misses it) is killed with the
    /// child it forked when the guard reads end of file; one listed with another start time
    /// (its pid taken, as far as the guard can tell, by another process) is left alone.
    #[test]
    fn an_unarmed_guard_kills_the_listed_escapees_whose_start_time_matches() {
        let dir = tempfile::tempdir().unwrap();
        let kid = dir.path().join("kid");
        let session = |script: String| {
            std::process::Command::new("setsid")
                .args(["sh", "-c", &script])
                .spawn()
                .unwrap()
        };
        let mut escapee = session(format!("sleep 60 & echo $! > {}; wait", kid.display()));
        let mut stranger = session("sleep 60".into());
        let mut group = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let grandchild = loop {
            if let Ok(t) = std::fs::read_to_string(&kid)
                && let Ok(p) = t.trim().parse::<u32>()
            {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no grandchild");
            std::thread::sleep(Duration::from_millis(10));
        };
        let start = |p: u32| {
            procstat::read::process_stat(procstat::Pid::Of(p))
                .unwrap()
                .unwrap()
                .starttime_ticks
        };
        let g = GroupGuard::spawn(group.id(), None).unwrap();
        g.send(encode_add(escapee.id(), start(escapee.id())).as_bytes());
        g.send(encode_add(stranger.id(), start(stranger.id()) + 1).as_bytes());
        // Listed, then gone: not killed (it is not listed any more).
        let mut gone = session("sleep 60".into());
        g.send(encode_add(gone.id(), start(gone.id())).as_bytes());
        g.send(encode_remove(gone.id()).as_bytes());
        drop(g);
        // The kills land in any order and a killed process dies a moment later: wait for all
        // three (at most 5 s) before judging.
        let t0 = Instant::now();
        let mut group_done = false;
        while (alive(escapee.id()) || alive(grandchild) || !group_done)
            && t0.elapsed() < Duration::from_secs(5)
        {
            group_done = group_done || group.try_wait().unwrap().is_some();
            std::thread::sleep(Duration::from_millis(10));
        }
        group_done = group_done || group.try_wait().unwrap().is_some();
        assert!(!alive(escapee.id()), "the listed escapee was killed");
        assert!(!alive(grandchild), "so was the child it forked");
        assert!(group_done, "and the group");
        assert!(
            alive(stranger.id()),
            "a pid whose start time differs is spared"
        );
        assert!(alive(gone.id()), "an escapee taken off the list is spared");
        for c in [&mut escapee, &mut stranger, &mut gone, &mut group] {
            let _ = c.kill();
            let _ = c.wait();
        }
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

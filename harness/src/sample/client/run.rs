//! One run of a client command line: a child of the sample process in a process group of its
//! own, under a deadline, its own resource use read from `wait4` when it is reaped.
//!
//! The run belongs to the sample's process tree as a target does: registered with the
//! subreaper (so an orphan it leaves is listed and reaped), a parent-death signal on its
//! direct child, and a tree guard over its process group, so a sample that dies mid-run takes
//! the client with it. Whatever is left in its group when its first process exits is killed,
//! and the run fails naming it: a client that leaves a process behind would go on working
//! while the next phase is measured.
//!
//! CPU and peak RSS are `wait4`'s: the client process and every descendant it waited for (a
//! shell and the tool it ran). A descendant the client did not wait for is not in them.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::sample::subreaper::{self, Own};

/// What one run cost the client's own process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Spawn to exit.
    pub wall: Duration,
    /// User + system CPU of the client and the descendants it waited for.
    pub cpu: Duration,
    /// The largest resident set of one of those processes, KiB.
    pub peak_rss_kib: u64,
}

/// How much of each output stream is kept (its tail), for the error line.
const TAIL_BYTES: usize = 8192;

/// How long the output readers may take to finish once the run's group is gone: a pipe still
/// held open by a process that left the group must not hold the sample.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// Runs `argv` in `cwd` until it exits or `deadline` passes; `what` names the run in errors
/// (`cold_push: device A's client`). A failure is one line: the exit status and the last line
/// the client wrote on stderr, or the deadline, or what it left running.
pub fn run(argv: &[String], cwd: &Path, deadline: Duration, what: &str) -> anyhow::Result<Usage> {
    let Some((program, args)) = argv.split_first() else {
        bail!("{what}: the command line is empty");
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    crate::subprocess::set_parent_death_signal(&mut cmd);
    // SAFETY: the hook only opens, writes and closes a file named before the fork.
    unsafe {
        cmd.pre_exec(crate::sample::guard::restore_oom_score_adj_hook());
    }
    let t0 = Instant::now();
    let mut child = match subreaper::spawn_command(Own::Tree, &mut cmd) {
        Ok(c) => c,
        Err(e) => bail!(
            "{what}: cannot start {}: {e}",
            contract::quote::quote(program)
        ),
    };
    let pid = child.id();
    let guard = crate::sample::guard::GroupGuard::spawn(pid, None);
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let waited = wait_until(pid, t0 + deadline);
    let wall = t0.elapsed();
    let kill_group = || {
        // SAFETY: kill(2) on the process group made for this run; ESRCH when it is empty.
        unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
    };
    let outcome = match waited {
        Ok(Some(done)) => {
            let left = procstat::read::group_pids(pid).unwrap_or_default();
            kill_group();
            Ok((done, left.len()))
        }
        Ok(None) => {
            kill_group();
            let _ = reap_killed(pid);
            Err(format!(
                "did not finish within {} (killed with its process group; bound: the client's timeout)",
                contract::quote::duration(deadline)
            ))
        }
        Err(e) => {
            kill_group();
            let _ = reap_killed(pid);
            Err(format!("waiting for it: {e}"))
        }
    };
    // Reaped above: this returns at once and satisfies the rule that every child is waited on.
    let _ = child.wait();
    subreaper::tree_gone(pid);
    if let Some(g) = guard {
        g.disarm();
    }
    let err_tail = err.recv_timeout(DRAIN_WAIT).unwrap_or_default();
    let _ = out.recv_timeout(DRAIN_WAIT);
    let (done, left) = match outcome {
        Ok(x) => x,
        Err(why) => bail!("{what} {why}"),
    };
    if done.code != 0 {
        bail!(
            "{what} exited with {}: {}",
            done.describe(),
            last_line(&err_tail)
        );
    }
    if left > 0 {
        bail!(
            "{what} exited but left {left} process{} running in its process group (killed): a client must finish its work before it exits",
            if left == 1 { "" } else { "es" }
        );
    }
    Ok(Usage {
        wall,
        cpu: done.cpu,
        peak_rss_kib: done.peak_rss_kib,
    })
}

/// The last non-empty line of `tail`, quoted for a message; `(no stderr)` when there is none.
pub fn last_line(tail: &[u8]) -> String {
    String::from_utf8_lossy(tail)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(
            || "(no stderr)".to_owned(),
            |l| contract::quote::quote(l.trim()),
        )
}

/// A reaped run: its exit code (128 + the signal when killed by one) and its rusage.
struct Done {
    code: i32,
    signal: Option<i32>,
    cpu: Duration,
    peak_rss_kib: u64,
}

impl Done {
    fn describe(&self) -> String {
        match self.signal {
            Some(s) => format!("signal {s}"),
            None => format!("status {}", self.code),
        }
    }
}

/// Reads a pipe to its end on a thread of its own, keeping the last [`TAIL_BYTES`]; the tail
/// comes through the channel.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let Some(mut pipe) = pipe else {
        let _ = tx.send(Vec::new());
        return rx;
    };
    let spawned = std::thread::Builder::new()
        .name("vb-client-out".into())
        .spawn(move || {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tail.extend_from_slice(&buf[..n]);
                        if tail.len() > TAIL_BYTES {
                            tail.drain(..tail.len() - TAIL_BYTES);
                        }
                    }
                }
            }
            let _ = tx.send(tail);
        });
    if spawned.is_err() {
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(Vec::new());
        return rx;
    }
    rx
}

/// Waits for `pid` to exit, by `until`; `Ok(None)` past it (the child still runs). Sleeps in
/// `poll(2)` on a pidfd where the kernel has them (5.3 on), so the exit is seen when it
/// happens; else looks every millisecond.
fn wait_until(pid: u32, until: Instant) -> std::io::Result<Option<Done>> {
    // SAFETY: pidfd_open with a pid of our own unreaped child and no flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
    let result = loop {
        if let Some(done) = try_reap(pid)? {
            break Ok(Some(done));
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Ok(None);
        }
        if fd >= 0 {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, 100) as libc::c_int;
            // SAFETY: one pollfd on the stack, for the duration of the call.
            unsafe { libc::poll(&mut p, 1, ms) };
        } else {
            std::thread::sleep(left.min(Duration::from_millis(1)));
        }
    };
    if fd >= 0 {
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(fd) };
    }
    result
}

/// `wait4(pid, WNOHANG)`: the reaped run, or `None` while it runs.
fn try_reap(pid: u32) -> std::io::Result<Option<Done>> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to locals; pid is our own unreaped child.
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r == 0 {
        return Ok(None);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    let (code, signal) = if libc::WIFEXITED(status) {
        (libc::WEXITSTATUS(status), None)
    } else {
        let s = libc::WTERMSIG(status);
        (128 + s, Some(s))
    };
    Ok(Some(Done {
        code,
        signal,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        peak_rss_kib: ru.ru_maxrss.max(0) as u64,
    }))
}

/// Reaps a run killed with its group, bounded by the subreaper's reap timeout (a task inside
/// an fsync dies only when the flush returns).
fn reap_killed(pid: u32) -> std::io::Result<()> {
    let until = Instant::now() + subreaper::REAP_TIMEOUT;
    while Instant::now() < until {
        if try_reap(pid)?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    /// The one-line error of a run that must fail.
    fn fails(argv: &[String], dir: &Path, deadline: Duration, what: &str) -> String {
        run(argv, dir, deadline, what).unwrap_err().to_string()
    }

    /// The pid a test script wrote into `dir/child`.
    fn child_pid(dir: &Path) -> u32 {
        std::fs::read_to_string(dir.join("child"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_run_reports_its_own_cpu_and_wall() {
        let dir = tempfile::tempdir().unwrap();
        let u = run(
            &sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done > here"),
            dir.path(),
            Duration::from_secs(60),
            "cold_push: device A's client",
        )
        .unwrap();
        assert!(u.cpu > Duration::ZERO, "{u:?}");
        assert!(u.wall >= u.cpu / 2, "{u:?}");
        assert!(u.peak_rss_kib > 0, "{u:?}");
        // The working directory is the one given.
        assert!(dir.path().join("here").is_file());
    }

    #[test]
    fn a_failed_run_names_its_status_and_last_stderr_line() {
        let dir = tempfile::tempdir().unwrap();
        let e = fails(
            &sh("echo first >&2; printf 'bad \\033[31mthing\\n\\n' >&2; exit 3"),
            dir.path(),
            Duration::from_secs(60),
            "cold_pull: device B's client",
        );
        assert_eq!(
            e,
            "cold_pull: device B's client exited with status 3: \"bad \\x1b[31mthing\""
        );
        let e = fails(
            &["/nonexistent/client".to_owned()],
            dir.path(),
            Duration::from_secs(60),
            "x",
        );
        assert!(
            e.starts_with("x: cannot start \"/nonexistent/client\""),
            "{e}"
        );
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = Instant::now();
        let e = fails(
            &sh("sleep 60 & echo $! > child; wait"),
            dir.path(),
            Duration::from_millis(400),
            "edit: device A's client",
        );
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(
            e.starts_with("edit: device A's client did not finish within 400ms"),
            "{e}"
        );
        testkit::wait_gone(child_pid(dir.path()));
    }

    #[test]
    fn a_process_left_behind_fails_the_run_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let e = fails(
            &sh("sleep 60 >/dev/null 2>&1 & echo $! > child"),
            dir.path(),
            Duration::from_secs(30),
            "idle_resync: device A's client",
        );
        assert!(e.contains("left 1 process running"), "{e}");
        testkit::wait_gone(child_pid(dir.path()));
    }
}

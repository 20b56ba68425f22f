//! The group guard: a forked watcher that kills a target's whole process group when the
//! sample process dies without stopping it (SIGKILL, the OOM killer, a panic that aborts).
//!
//! `PR_SET_PDEATHSIG` reaches only the target's direct child; a server's workers (Apache's
//! children, a script's background jobs) do not inherit it and outlive their master,
//! reparented to init. The guard is forked from the sample process before anything else
//! runs in the child: it moves to a process group of its own (so a signal to the sample's
//! group spares it), ignores SIGINT, SIGTERM and SIGHUP, closes every descriptor but the read
//! end of a pipe whose write end only the sample process holds (close-on-exec, so no target
//! inherits it), and blocks in `read`. A byte on the pipe disarms it (the server was stopped
//! and reaped: its group id may be reused); end of file without that byte means the sample
//! process is gone, and the guard sends SIGKILL to the group and exits. Between fork and exit
//! the guard calls only async-signal-safe functions.

/// A live guard over one process group.
#[derive(Debug)]
pub struct GroupGuard {
    write_fd: libc::c_int,
    pid: libc::pid_t,
}

impl GroupGuard {
    /// Forks a guard over process group `pgid`; `None` when the pipe or the fork fails (the
    /// caller goes on without one: the direct child still has its parent-death signal).
    pub fn spawn(pgid: u32) -> Option<GroupGuard> {
        let pgid = pgid as libc::pid_t;
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let (r, w) = (fds[0], fds[1]);
        // SAFETY: fork in a multi-threaded process; the child below calls only
        // async-signal-safe functions (setpgid, signal, close, read, kill, _exit) and never
        // returns into Rust code.
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

    /// Tells the guard the group is gone (stopped and reaped by the caller), and reaps it.
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
        // exits as soon as it reads the byte or the end of file.
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
        let g = GroupGuard::spawn(a.id()).unwrap();
        // Dropping without disarming is what the sample process's death does (end of file).
        drop(g);
        let t0 = std::time::Instant::now();
        while a.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            a.try_wait().unwrap().is_some(),
            "the guard killed the group"
        );
        let mut b = spawn();
        let g = GroupGuard::spawn(b.id()).unwrap();
        let guard_pid = g.pid();
        g.disarm();
        assert!(
            !alive(guard_pid),
            "the disarmed guard exited and was reaped"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            b.try_wait().unwrap().is_none(),
            "a disarmed guard leaves the group alone"
        );
        // SAFETY: our own child's group.
        unsafe { libc::kill(-(b.id() as libc::pid_t), libc::SIGKILL) };
        let _ = b.wait();
    }
}

//! The one child-process JSON runner: re-executing this binary (`SelfExec`), running a
//! child to completion in its own process group under a deadline and parsing the one JSON
//! document it prints (`run_json_child`), and reaping children a caller gives up on
//! (`Reaper`). Samples (`sample --plan`), calibration readings (`calibrate --one-reading`)
//! and gate-trial samples all go through it.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

use crate::interrupt;

/// How to re-execute this program for one sample, reading or trial sample: the running
/// executable with the binary's own subcommand words (e.g. `["calibrate"]`) before the
/// child's flags; tests substitute their own binary.
#[derive(Debug, Clone)]
pub struct SelfExec {
    pub program: PathBuf,
    /// Arguments placed before the flag, e.g. `["calibrate"]`.
    pub prefix: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

impl SelfExec {
    /// This executable, re-run with `subcommand` (e.g. `["calibrate"]`) before the flag.
    pub fn current(subcommand: &[&str]) -> anyhow::Result<SelfExec> {
        Ok(SelfExec {
            program: std::env::current_exe().context("cannot find this executable to re-run it")?,
            prefix: subcommand.iter().map(OsString::from).collect(),
            env: Vec::new(),
        })
    }

    /// The command line `program prefix.. tail..` with the extra environment.
    pub fn command(&self, tail: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix).args(tail);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// Kills and reaps its children when dropped (contenders of the gate trial).
pub struct Reaper(pub Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Asks the kernel to SIGKILL the child when this process dies, so no child outlives us.
///
/// The signal follows the *thread* that spawns the child (the kernel's rule): spawn from a
/// thread that outlives the child. Between `fork` and the `prctl` the parent may already have
/// died, and the child, reparented, would then never get the signal: so the child compares
/// `getppid` with the pid its parent had before the fork and kills itself on a mismatch.
pub fn set_parent_death_signal(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and raise are async-signal-safe; nothing else runs between fork
    // and exec here.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The parent died before the prctl took effect: go as it would have made us.
                libc::raise(libc::SIGKILL);
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// What a child answered: its exit status and the JSON document it printed.
#[derive(Debug)]
pub struct Answer<T> {
    pub status: ExitStatus,
    pub doc: T,
}

impl<T> Answer<T> {
    /// The document of a child that exited successfully; otherwise an error naming `what`.
    pub fn success(self, what: &str) -> anyhow::Result<T> {
        if !self.status.success() {
            bail!("{what}: exited with {}", self.status);
        }
        Ok(self.doc)
    }
}

/// How often the runner looks at the child and the interrupt flag: fine enough that a quiet
/// calibration reading (~0.1 s on a 2-vCPU cloud VM) is not stretched noticeably.
const POLL: Duration = Duration::from_millis(5);

/// Runs `cmd` to completion in its own process group (a terminal's Ctrl-C reaches only us;
/// the group, with any server the child started, is killed and reaped by us) and parses the
/// last line of its stdout that starts with `{` as `T` (earlier lines are ignored, so a
/// wrapper that prints a banner does not break the protocol). Past `timeout`, or once
/// SIGINT/SIGTERM arrived ([`interrupt::Interrupted`]), the group is killed and reaped and
/// an error returned. A child that printed no document fails with its exit status and the
/// last line of its stderr; one that printed a document is returned with its status, for
/// the caller to judge ([`Answer::success`]).
pub fn run_json_child<T: DeserializeOwned>(
    mut cmd: Command,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<Answer<T>> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    set_parent_death_signal(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("{what}: cannot start"))?;
    let group = child.id() as libc::pid_t;
    let kill_group = || {
        // SAFETY: kill(2) on the process group created for this child; ESRCH when it is
        // already empty is fine.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    };
    // Readers on their own threads: a child that writes more than a pipe holds must not
    // block while we wait for it to exit.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_reader = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_reader = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill_group();
                let _ = child.wait();
                return Err(e).with_context(|| format!("{what}: wait"));
            }
        }
        let timed_out = Instant::now() >= deadline;
        if interrupt::requested() || timed_out {
            kill_group();
            let _ = child.wait();
            if interrupt::requested() {
                return Err(interrupt::Interrupted.into());
            }
            bail!(
                "{what}: did not finish within {} s (killed with its process group)",
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(POLL);
    };
    // The group may still hold a server if the child died abnormally: make sure it is gone.
    kill_group();
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let err_line = String::from_utf8_lossy(&err)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned();
    let out = String::from_utf8_lossy(&out);
    let line = out.lines().rev().find(|l| l.trim_start().starts_with('{'));
    let parsed = match line {
        Some(line) => serde_json::from_str::<T>(line)
            .map_err(|e| format!("bad JSON ({e}) {:?}", truncate(line, 200))),
        None => Err("printed no JSON".to_owned()),
    };
    match parsed {
        Ok(doc) => Ok(Answer { status, doc }),
        Err(_) if !status.success() => bail!("{what}: exited with {status}: {err_line}"),
        Err(why) => bail!("{what}: {why}: {err_line}"),
    }
}

/// At most `n` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Doc {
        n: u32,
    }

    #[test]
    fn the_last_json_line_is_the_answer_and_banners_are_ignored() {
        let a: Answer<Doc> = run_json_child(
            sh("echo banner; echo '{\"n\":1}'; echo '{\"n\":2}'"),
            "child",
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(a.status.success());
        assert_eq!(a.doc, Doc { n: 2 });
    }

    #[test]
    fn a_failed_child_without_a_document_names_its_status_and_stderr() {
        let e = run_json_child::<Doc>(
            sh("echo 'disk on fire' >&2; exit 7"),
            "reading 3",
            Duration::from_secs(10),
        )
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("reading 3: exited with exit status: 7"),
            "{e}"
        );
        assert!(e.ends_with("disk on fire"), "{e}");
    }

    #[test]
    fn a_failed_child_with_a_document_is_returned_for_the_caller_to_judge() {
        let a: Answer<Doc> = run_json_child(
            sh("echo '{\"n\":5}'; exit 2"),
            "sample 1",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(a.doc, Doc { n: 5 });
        assert!(!a.status.success());
        let e = a.success("sample 1").unwrap_err().to_string();
        assert_eq!(e, "sample 1: exited with exit status: 2");
    }

    #[test]
    fn a_child_past_its_deadline_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        // The grandchild shares the group; it must die with it.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let t0 = Instant::now();
        let e = run_json_child::<Doc>(sh(&script), "slow", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert_eq!(
            e,
            "slow: did not finish within 0.3 s (killed with its process group)"
        );
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed: gone, or a zombie waiting for whoever inherited it to reap it.
        testkit::wait_gone(pid);
    }

    #[test]
    fn a_bad_document_is_named() {
        let e = run_json_child::<Doc>(sh("echo '{\"m\":1}'"), "child", Duration::from_secs(10))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("child: bad JSON (missing field `n`"), "{e}");
    }
}

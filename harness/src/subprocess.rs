//! Child processes that answer with one JSON document: re-executing this binary
//! ([`SelfExec`]), running a child to completion under a deadline and parsing its answer
//! ([`run_json_child`]), and reaping what is left when a caller gives up ([`Reaper`]).

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;

/// How to re-execute this program for one reading or one trial sample: the running
/// executable with the binary's own subcommand words before `<flag> DIR` (the binary says
/// which); tests substitute their own binary.
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

    pub(crate) fn command(&self, tail: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix).args(tail);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// Kills and reaps its children when dropped (contenders, stuck readings).
pub(crate) struct Reaper(pub(crate) Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs one child to completion (killing it after `timeout`) and parses the last line of its
/// stdout that starts with `{` as `T`. Earlier lines are ignored, so a wrapper that prints a
/// banner does not break the protocol.
pub fn run_json_child<T: for<'de> Deserialize<'de>>(
    mut cmd: Command,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<T> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .with_context(|| format!("{what}: cannot start"))?;
    let mut reaper = Reaper(vec![child]);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = reaper.0[0]
            .try_wait()
            .with_context(|| format!("{what}: wait"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            bail!("{what}: no answer within {} s, killed", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let child = &mut reaper.0[0];
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out)
            .with_context(|| format!("{what}: stdout"))?;
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!("{what}: exited with {status}: {last}");
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{what}: printed no JSON"))?;
    serde_json::from_str(line).with_context(|| format!("{what}: bad JSON {line:?}"))
}

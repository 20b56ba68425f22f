//! Running one sample in a fresh subprocess: vaultbench re-executes itself with a sample plan,
//! the child prints one JSON result. Bounded in time; killed with its server on interrupt.

use anyhow::{Context, bail};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reports::schema::{KIND_SAMPLE, SampleResult};

use crate::interrupt;
use crate::sample::plan::SamplePlan;

/// Runs `plan` in a fresh `vaultbench sample` process and returns its result. A child that
/// fails, times out or prints no result gives an `Err` with the cause named.
pub fn run_sample(
    plan: &SamplePlan,
    work: &Path,
    timeout: Duration,
) -> anyhow::Result<SampleResult> {
    let plan_path = work.join(format!("plan-{}.json", plan.index));
    std::fs::write(&plan_path, serde_json::to_vec(plan)?)
        .with_context(|| format!("writing {}", plan_path.display()))?;
    let exe = std::env::current_exe().context("cannot find the vaultbench executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("sample")
        .arg("--plan")
        .arg(&plan_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a terminal's Ctrl-C reaches only us, and we kill the group
        // (the sample and its server) ourselves, then reap.
        cmd.process_group(0);
    }
    crate::sample::target::set_parent_death_signal(&mut cmd);
    let mut child = cmd.spawn().context("spawning the sample subprocess")?;
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .context("waiting for the sample subprocess")?
        {
            break st;
        }
        let timed_out = t0.elapsed() > timeout;
        if interrupt::requested() || timed_out {
            // SAFETY: kill(2) on the process group we created for this child.
            unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            if timed_out && !interrupt::requested() {
                bail!(
                    "sample {} did not finish within {}s (killed with its server)",
                    plan.index,
                    timeout.as_secs()
                );
            }
            return Err(interrupt::Interrupted.into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The group may still hold a server if the sample died abnormally: make sure it is gone.
    // SAFETY: as above; ESRCH when the group is already empty is fine.
    unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let _ = std::fs::remove_file(&plan_path);
    let err_line = String::from_utf8_lossy(&err)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned();
    let result: SampleResult = match serde_json::from_slice(&out) {
        Ok(r) => r,
        Err(_) if !status.success() => bail!(
            "sample {} subprocess failed ({status}): {err_line}",
            plan.index
        ),
        Err(e) => bail!("sample {} printed no result ({e}): {err_line}", plan.index),
    };
    if result.kind != KIND_SAMPLE
        || contract::format::check_version(result.format_version.into()).is_err()
    {
        bail!(
            "sample {} printed a {} v{} document, not a sample",
            plan.index,
            result.kind,
            result.format_version
        );
    }
    if !result.errors.is_empty() {
        bail!("sample {} failed: {}", plan.index, result.errors.join("; "));
    }
    Ok(result)
}

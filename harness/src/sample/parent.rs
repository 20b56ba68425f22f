//! Running one sample in a fresh subprocess: vaultbench re-executes itself with a sample plan,
//! the child prints one JSON result. Bounded in time; killed with its server on interrupt
//! (both by `subprocess::run_json_child`, the one child runner).

use anyhow::{Context, bail};
use std::path::Path;
use std::time::Duration;

use contract::format::decode;
use reports::schema::{KIND_SAMPLE, SampleResult};

use crate::sample::plan::SamplePlan;
use crate::subprocess::{SelfExec, run_json_child};

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
    let exec = SelfExec::current(&["sample"])?;
    let cmd = exec.command(&["--plan".into(), plan_path.clone().into_os_string()]);
    let answer =
        run_json_child::<serde_json::Value>(cmd, &format!("sample {}", plan.index), timeout);
    let _ = std::fs::remove_file(&plan_path);
    // A sample that failed still prints its document, with the errors named in it. Kind and
    // version are checked before the schema, so a sample from a newer build says "upgrade
    // vaultbench" rather than failing as a document that does not fit.
    let answer = answer?;
    let result: SampleResult = match decode(answer.doc, KIND_SAMPLE) {
        Ok(r) => r,
        Err(e) if !answer.status.success() => {
            bail!(
                "sample {}: exited with {}: its document {e}",
                plan.index,
                answer.status
            )
        }
        Err(e) => bail!("sample {}: its document {e}", plan.index),
    };
    if !result.errors.is_empty() {
        bail!("sample {} failed: {}", plan.index, result.errors.join("; "));
    }
    Ok(result)
}

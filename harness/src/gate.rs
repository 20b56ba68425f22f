//! The calibration gate applied to samples: judging their channel readings against the
//! thresholds and the machine's reference, and the A/B loop's retried, gated sample.

use std::time::Duration;

use anyhow::bail;

use reports::schema::{AbSample, ChannelReading, SampleResult, SampleVerdict};

use crate::prepare::Prepared;
use crate::sample::runner::SampleRunner;
use crate::sample::target::TargetSpec;

/// Judges the calibration readings of these samples.
pub fn judge(prep: &Prepared, samples: &[&SampleResult]) -> calibration::GateVerdict {
    let cpu: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.calibration.iter().map(|r| r.cpu_ms))
        .collect();
    let io: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.calibration.iter().map(|r| r.io_ms))
        .collect();
    let rtt: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.calibration.iter().filter_map(|r| r.rtt_ms))
        .collect();
    let contention: Vec<_> = samples.iter().map(|s| s.contention.as_ref()).collect();
    let mut v = calibration::gate::judge_with_contention(
        &cpu,
        &io,
        &contention,
        prep.reference.as_ref(),
        &prep.gate_cfg,
    );
    calibration::gate::judge_rtt(&mut v, &rtt, prep.reference.as_ref(), &prep.gate_cfg);
    v
}

/// The per-sample gate: one sample's in-sample channels against their bounds, and its kernel
/// readings against `pool` (the run's readings so far) and this machine's reference. `record`
/// and `ab` judge every counted sample with it.
pub fn judge_one(prep: &Prepared, s: &SampleResult, pool: &[ChannelReading]) -> SampleVerdict {
    calibration::gate::judge_sample(
        &s.calibration,
        s.contention.as_ref(),
        pool,
        prep.reference.as_ref(),
        &prep.gate_cfg,
    )
}

/// The pre-check before a run's first sample: a look at the machine over `prep.pre_check`
/// (nothing when zero), judged by the foreign channels and steal
/// ([`calibration::gate::judge_pre_check`]). `Ok(figures)` when it passed (empty when skipped),
/// for the recording's verdict; `Err` with the refusal when the machine was already busy, so a
/// run that the in-sample channels would refuse after its warm-up and three attempts is
/// refused in seconds instead. With `--wait-quiet` (`prep.wait_quiet`) a busy look is followed
/// by another until one passes or the wait's deadline comes, which refuses.
pub fn pre_check(
    prep: &Prepared,
) -> anyhow::Result<Result<std::collections::BTreeMap<String, f64>, crate::refusal::PreCheckRefusal>>
{
    if prep.pre_check.is_zero() {
        return Ok(Ok(Default::default()));
    }
    let started = std::time::Instant::now();
    let secs = prep.pre_check.as_secs_f64();
    loop {
        let (c, busiest) = crate::sample::contention::look_with_busiest(prep.pre_check)?;
        let (failures, figures) = calibration::gate::judge_pre_check(&c, &prep.gate_cfg);
        let shown: Vec<String> = figures.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
        if failures.is_empty() {
            crate::prepare::progress(&format!(
                "pre-check over {secs:.1} s: within the bounds ({})",
                shown.join(", ")
            ));
            return Ok(Ok(figures));
        }
        let waited = started.elapsed();
        // Another look must fit before the deadline; otherwise this busy look is the answer.
        if let Some(limit) = prep.wait_quiet
            && waited + prep.pre_check <= limit
        {
            let left = limit.saturating_sub(waited);
            crate::prepare::progress(&format!(
                "machine busy ({}; {}); --wait-quiet: looking again, {} left",
                failures.join("; "),
                crate::refusal::busiest_line(&busiest),
                contract::parse::format_duration(Duration::from_secs(left.as_secs()))
            ));
            // Not a busy loop: each look itself lasts `pre_check`; a short pause between
            // looks keeps the progress lines few.
            let pause = Duration::from_secs(5).min(limit.saturating_sub(waited + prep.pre_check));
            let until = std::time::Instant::now() + pause;
            while std::time::Instant::now() < until {
                if crate::interrupt::requested() {
                    return Err(crate::interrupt::Interrupted.into());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            continue;
        }
        return Ok(Err(crate::refusal::PreCheckRefusal {
            verdict: calibration::GateVerdict {
                accepted: false,
                drift_checked: prep.reference.is_some(),
                reference_id: prep.reference.as_ref().map(|r| r.fingerprint_id.clone()),
                channels: Default::default(),
                in_sample: Default::default(),
                unavailable: c.unavailable,
                failures: failures
                    .into_iter()
                    .map(|f| format!("{f} before the first sample (a {secs:.1} s pre-check)"))
                    .collect(),
                reported: Default::default(),
                warnings: Vec::new(),
                pre_check: figures,
            },
            busiest,
            waited: prep.wait_quiet,
        }));
    }
}

/// Why a refused attempt was run again, as the sidecar and the A/B result keep it.
pub fn refusal_of(v: &SampleVerdict) -> String {
    format!("refused by the gate: {}", v.failures.join("; "))
}

/// One sample, retried while it fails or the per-sample gate refuses it: its in-sample
/// contention channels against their bounds, and its kernel readings against `pool` (the run's
/// readings so far, warm-ups included) and this machine's reference
/// ([`calibration::gate::judge_sample`]). A kept sample's readings join the pool.
pub fn gated_sample(
    prep: &Prepared,
    runner: &dyn SampleRunner,
    spec: &TargetSpec,
    index: u32,
    attempts: u32,
    pool: &mut Vec<ChannelReading>,
) -> anyhow::Result<(SampleResult, AbSample)> {
    gated_plan(prep, runner, &prep.plan(spec, index, false), attempts, pool)
}

/// [`gated_sample`] for a plan made by the caller (a paired sample's).
pub fn gated_plan(
    prep: &Prepared,
    runner: &dyn SampleRunner,
    plan: &crate::sample::plan::SamplePlan,
    attempts: u32,
    pool: &mut Vec<ChannelReading>,
) -> anyhow::Result<(SampleResult, AbSample)> {
    let mut why = Vec::new();
    for attempt in 1..=attempts {
        prep.pause_before(attempt)?;
        match runner.run(plan) {
            Ok(s) => {
                let v = judge_one(prep, &s, pool);
                if v.accepted {
                    pool.extend(s.calibration.iter().copied());
                    let meta = AbSample {
                        pid: s.pid,
                        server_pid: s.server_pid,
                        attempts: attempt,
                        calibration: s.calibration.clone(),
                        contention: s.contention.clone(),
                        verdict: Some(v),
                        retried_because: why,
                    };
                    return Ok((s, meta));
                }
                why.push(refusal_of(&v));
            }
            Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => return Err(e),
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    bail!("{} attempts: {}", attempts, why.join(" | "))
}

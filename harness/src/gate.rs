//! The calibration gate applied to samples: judging their channel readings against the
//! thresholds and the machine's reference, and the A/B loop's retried, gated sample.

use anyhow::bail;

use reports::schema::{AbSample, SampleResult};

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
    calibration::judge(&cpu, &io, prep.reference.as_ref(), &prep.gate_cfg)
}

/// One sample, retried while it fails or its own two calibration readings are refused.
pub fn gated_sample(
    prep: &Prepared,
    runner: &dyn SampleRunner,
    spec: &TargetSpec,
    index: u32,
    attempts: u32,
) -> anyhow::Result<(SampleResult, AbSample)> {
    let mut why = Vec::new();
    for attempt in 1..=attempts {
        match runner.run(&prep.plan(spec, index, false)) {
            Ok(s) => {
                let v = judge(prep, &[&s]);
                if v.accepted {
                    let meta = AbSample {
                        pid: s.pid,
                        server_pid: s.server_pid,
                        attempts: attempt,
                        calibration: s.calibration.clone(),
                        retried_because: why,
                    };
                    return Ok((s, meta));
                }
                why.push(format!("refused by the gate: {}", v.failures.join("; ")));
            }
            Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => return Err(e),
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    bail!("{} attempts: {}", attempts, why.join(" | "))
}

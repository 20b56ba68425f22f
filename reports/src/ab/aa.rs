//! A/A support: the same build in both arms, so every claimed difference is a false positive;
//! the intervals seen give the noise floor tau for this machine and scenario.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::analysis::{ALPHA, MetricAnalysis, Verdict};

/// Noise floor per metric, as a fraction: the largest |interval endpoint| in percent / 100
/// over the given A/A runs. With tau at least this large, each of these A/A runs would have
/// read "no change" for that metric, which is what a practical threshold should guarantee.
/// Metrics without a percent interval in any run are left out.
pub fn tau_from_aa(runs: &[BTreeMap<String, MetricAnalysis>]) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for run in runs {
        for (name, m) in run {
            if let Some(ci) = m.ci_pct {
                let half = ci.lo.abs().max(ci.hi.abs()) / 100.0;
                let e = out.entry(name.clone()).or_insert(0.0);
                *e = e.max(half);
            }
        }
    }
    out
}

/// Verdict counts of one metric over A/A runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricFalsePositives {
    pub runs: usize,
    pub better: usize,
    pub worse: usize,
    pub no_change: usize,
    pub inconclusive: usize,
    /// Runs whose Wilcoxon p was below [`ALPHA`] (unadjusted).
    pub p_below_alpha: usize,
}

/// False positives over A/A runs: a Better or Worse verdict claims a difference that cannot
/// exist; an inconclusive verdict is counted too ("anything but no change").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FalsePositives {
    pub runs: usize,
    /// Runs where at least one metric was Better or Worse.
    pub runs_with_claimed_difference: usize,
    /// Runs where at least one metric was anything but NoChange.
    pub runs_not_all_no_change: usize,
    pub per_metric: BTreeMap<String, MetricFalsePositives>,
}

/// Count verdicts over A/A runs (each run a map metric → analysis).
pub fn count_false_positives(runs: &[BTreeMap<String, MetricAnalysis>]) -> FalsePositives {
    let mut fp = FalsePositives {
        runs: runs.len(),
        ..FalsePositives::default()
    };
    for run in runs {
        let mut claimed = false;
        let mut not_nc = false;
        for (name, m) in run {
            let e = fp.per_metric.entry(name.clone()).or_default();
            e.runs += 1;
            match m.verdict {
                Verdict::Better => e.better += 1,
                Verdict::Worse => e.worse += 1,
                Verdict::NoChange => e.no_change += 1,
                Verdict::Inconclusive => e.inconclusive += 1,
            }
            if m.wilcoxon.p_two_sided < ALPHA {
                e.p_below_alpha += 1;
            }
            claimed |= matches!(m.verdict, Verdict::Better | Verdict::Worse);
            not_nc |= m.verdict != Verdict::NoChange;
        }
        fp.runs_with_claimed_difference += usize::from(claimed);
        fp.runs_not_all_no_change += usize::from(not_nc);
    }
    fp
}

//! Per-metric A/B analysis: per-round ratios, Wilcoxon + Hodges–Lehmann in percent, the
//! permutation cross-check, the minimum detectable effect, the order effect and a verdict.

use super::error::AbError;
use super::plan::Order;
use crate::stats::{self, CiMethod, HodgesLehmann};
pub use contract::ab::{
    Better, ExactDiff, Interval, IntervalMethod, MetricAnalysis, Scale, Verdict,
};
use std::collections::BTreeMap;

/// Requested confidence level of the Hodges–Lehmann interval (a 95 % interval, as the A/B report prints).
pub const CONF_LEVEL: f64 = 0.95;
/// Significance level for the MDE and for `significant_after_bh`.
pub const ALPHA: f64 = 0.05;
/// Power for the minimum detectable effect (the conventional 0.8, Cohen 1988).
pub const POWER: f64 = 0.8;
/// Monte Carlo draws for permutation tests above their exact limits (n > 16 sign flips,
/// n > 20 relabellings): the standard error of p is at most sqrt(0.25 / 20000) = 0.0035.
pub const PERMUTATION_DRAWS: usize = 20_000;
/// Below this achieved interval level a Better/Worse/NoChange claim is not made
/// (Inconclusive). n = 4 pairs achieve 0.875 and stay usable (R = 6 with one failed round
/// balanced away); n = 3 achieve 0.75 and do not.
pub const MIN_VERDICT_CONF: f64 = 0.85;

/// A Student's t interval of a mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TInterval {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    /// Degrees of freedom (n − 1).
    pub df: usize,
}

/// The two-sided `level` t interval of the mean of `d`: mean ± t(1 − (1 − level)/2, n − 1) ·
/// s / √n. `None` for fewer than 2 values, a non-finite value or a level outside (0, 1).
pub fn t_interval(d: &[f64], level: f64) -> Option<TInterval> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let n = d.len();
    if n < 2 || !(level > 0.0 && level < 1.0) || d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - level) / 2.0);
    let half = t * (var / n as f64).sqrt();
    Some(TInterval {
        mean,
        lo: mean - half,
        hi: mean + half,
        df: n - 1,
    })
}

/// [`analyse_metric`] for a `cost` key: the same statistics are kept for the record, but the
/// estimate, the interval and the verdict come from the 95 % t interval on the per-round log
/// ratios ([`IntervalMethod::TLogRatio`]). Instruction counts of one build vary by a few
/// hundredths of a percent between runs, so with R = 3 rounds a t interval is already narrow;
/// a round that is off (an outlier run) widens it, which turns a verdict inconclusive rather
/// than wrong.
pub fn analyse_cost_metric(
    a: &[f64],
    b: &[f64],
    orders: &[Order],
    better: Better,
    tau: f64,
    seed: u64,
) -> Result<MetricAnalysis, AbError> {
    let mut m = analyse_metric(a, b, orders, better, tau, seed)?;
    m.interval_method = IntervalMethod::TLogRatio;
    if m.per_round.iter().all(|d| *d == 0.0) {
        return Ok(m); // identical rounds: already NoChange at 0 %
    }
    if m.scale != Scale::LogRatio {
        m.verdict = Verdict::Inconclusive;
        m.reason = "a value is not positive, so no log ratio is defined".into();
        return Ok(m);
    }
    let Some(ti) = t_interval(&m.per_round, CONF_LEVEL) else {
        m.verdict = Verdict::Inconclusive;
        m.reason = format!("{} round(s) give no t interval (need 2)", m.n_rounds);
        return Ok(m);
    };
    let ci = Interval {
        lo: 100.0 * ti.lo.exp_m1(),
        hi: 100.0 * ti.hi.exp_m1(),
    };
    m.estimate_pct = Some(100.0 * ti.mean.exp_m1());
    m.ci_pct = Some(ci);
    let span = format!(
        "{:.0} % t interval on log ratios ({} df) [{:+.3} %, {:+.3} %]",
        100.0 * CONF_LEVEL,
        ti.df,
        ci.lo,
        ci.hi
    );
    (m.verdict, m.reason) = ci_verdict(ci, better, tau, span);
    Ok(m)
}

/// The verdict of an interval in percent against ±`tau` (a fraction).
pub(crate) fn ci_verdict(
    ci: Interval,
    better: Better,
    tau: f64,
    span: String,
) -> (Verdict, String) {
    let t = 100.0 * tau;
    if ci.lo >= -t && ci.hi <= t {
        return (Verdict::NoChange, format!("{span} inside ±{t:.2} %"));
    }
    let (up, down) = match better {
        Better::Lower => (Verdict::Worse, Verdict::Better),
        Better::Higher => (Verdict::Better, Verdict::Worse),
    };
    if ci.lo > 0.0 {
        (up, format!("{span} entirely above 0"))
    } else if ci.hi < 0.0 {
        (down, format!("{span} entirely below 0"))
    } else {
        (
            Verdict::Inconclusive,
            format!("{span} includes 0 and reaches beyond ±{t:.2} %"),
        )
    }
}

/// `m.ci_pct` turned so that positive means worse (for higher-is-better metrics the sign
/// is flipped): the frame in which `all <= +3%` guards are read.
pub fn worsening_ci_pct(m: &MetricAnalysis) -> Option<Interval> {
    m.ci_pct.map(|c| match m.better {
        Better::Lower => c,
        Better::Higher => Interval {
            lo: -c.hi,
            hi: -c.lo,
        },
    })
}

fn check_values(what: &'static str, xs: &[f64]) -> Result<(), AbError> {
    match xs.iter().position(|x| !x.is_finite()) {
        Some(round) => Err(AbError::NonFinite { what, round }),
        None => Ok(()),
    }
}

/// Analyse one metric over the kept rounds: `a[i]`, `b[i]` and `orders[i]` belong to round i.
///
/// The verdict reads the Hodges–Lehmann interval in percent against ±100·`tau`:
/// every round identical → NoChange; achieved interval level below [`MIN_VERDICT_CONF`]
/// → Inconclusive; interval inside [−tau, +tau] → NoChange; interval entirely above 0 →
/// Worse for lower-is-better metrics (Better for higher-is-better), entirely below 0 → the
/// opposite; otherwise Inconclusive. The interval inverts the exact signed-rank test, so for
/// untied data without zeros "excludes 0" is the same event as "exact p <= 1 − achieved
/// level" (property-tested in `tests/it/stats_vectors.rs`).
///
/// Errors (not verdicts): lengths differ, no rounds, non-finite values, tau negative or not
/// finite.
pub fn analyse_metric(
    a: &[f64],
    b: &[f64],
    orders: &[Order],
    better: Better,
    tau: f64,
    seed: u64,
) -> Result<MetricAnalysis, AbError> {
    if a.len() != b.len() {
        return Err(AbError::LengthMismatch {
            what: "A and B values",
            left: a.len(),
            right: b.len(),
        });
    }
    if a.len() != orders.len() {
        return Err(AbError::LengthMismatch {
            what: "values and orders",
            left: a.len(),
            right: orders.len(),
        });
    }
    if a.is_empty() {
        return Err(AbError::NoRounds);
    }
    if !(tau.is_finite() && tau >= 0.0) {
        return Err(AbError::BadTau { tau });
    }
    check_values("A values", a)?;
    check_values("B values", b)?;
    // Both medians exist: non-empty, finite.
    let a_median = stats::median(a).unwrap_or(0.0);
    let b_median = stats::median(b).unwrap_or(0.0);

    let scale = if a.iter().chain(b).all(|v| *v > 0.0) {
        Scale::LogRatio
    } else if a_median != 0.0 {
        Scale::DifferenceOverMedianA {
            reference: a_median.abs(),
        }
    } else {
        Scale::Difference
    };
    let per_round: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| match scale {
            Scale::LogRatio => (y / x).ln(),
            _ => y - x,
        })
        .collect();
    let to_pct = |d: f64| match scale {
        Scale::LogRatio => Some(100.0 * d.exp_m1()),
        Scale::DifferenceOverMedianA { reference } => Some(100.0 * d / reference),
        Scale::Difference => None,
    };

    let hl = stats::hodges_lehmann(&per_round, CONF_LEVEL)?;
    let wilcoxon = stats::signed_rank_test(&per_round)?;
    let permutation = stats::sign_flip_test(&per_round, PERMUTATION_DRAWS, seed)?;
    let a_first: Vec<bool> = orders.iter().map(|o| *o == Order::AFirst).collect();
    // A different stream from the sign-flip draws, so the two tests do not share randomness.
    let order_effect = stats::order_effect(
        &per_round,
        &a_first,
        PERMUTATION_DRAWS,
        seed ^ 0x6f72_6465_7200_0000,
    )?;
    let mde_pct = stats::min_detectable_effect(&per_round, ALPHA, POWER).and_then(to_pct);
    let identical = per_round.iter().all(|d| *d == 0.0);
    // Identical rounds are a 0 % change on any scale, even when A's median is 0.
    let estimate_pct = if identical {
        Some(0.0)
    } else {
        to_pct(hl.estimate)
    };
    let ci_pct = if identical {
        Some(Interval { lo: 0.0, hi: 0.0 })
    } else {
        to_pct(hl.lo)
            .zip(to_pct(hl.hi))
            .map(|(lo, hi)| Interval { lo, hi })
    };

    let (verdict, reason) = verdict(&per_round, &hl, ci_pct, better, tau);
    Ok(MetricAnalysis {
        better,
        tau,
        seed,
        n_rounds: a.len(),
        a: a.to_vec(),
        b: b.to_vec(),
        orders: orders.to_vec(),
        a_median,
        b_median,
        scale,
        per_round,
        hodges_lehmann: hl,
        estimate_pct,
        ci_pct,
        wilcoxon,
        permutation,
        mde_pct,
        order_effect,
        p_bh: None,
        verdict,
        reason,
        interval_method: IntervalMethod::HodgesLehmann,
    })
}

fn verdict(
    d: &[f64],
    hl: &HodgesLehmann,
    ci_pct: Option<Interval>,
    better: Better,
    tau: f64,
) -> (Verdict, String) {
    if d.iter().all(|x| *x == 0.0) {
        return (
            Verdict::NoChange,
            "every round measured A and B identical".into(),
        );
    }
    let Some(ci) = ci_pct else {
        return (
            Verdict::Inconclusive,
            "A's median is 0, so no percent change is defined".into(),
        );
    };
    let level = hl.conf_level_achieved;
    if level < MIN_VERDICT_CONF {
        return (
            Verdict::Inconclusive,
            format!(
                "{} rounds give only a {:.1} % interval (need {:.0} %)",
                hl.n,
                100.0 * level,
                100.0 * MIN_VERDICT_CONF
            ),
        );
    }
    let method = match hl.method {
        CiMethod::Exact => "exact",
        CiMethod::Normal => "normal-approximation",
    };
    let span = format!(
        "{:.1} % {method} interval [{:+.2} %, {:+.2} %]",
        100.0 * level,
        ci.lo,
        ci.hi
    );
    ci_verdict(ci, better, tau, span)
}

/// Fill `p_bh` of every analysis with Benjamini–Hochberg-adjusted Wilcoxon p-values across
/// the map (meant for all timing/resource metrics of one run). Verdicts are not changed:
/// with R = 6 the smallest exact two-sided p is 1/32, so BH over k metrics cannot get below
/// 0.05 unless several metrics move together; the adjusted p is reported beside the verdict.
pub fn adjust_across_metrics(analyses: &mut BTreeMap<String, MetricAnalysis>) {
    let p: Vec<f64> = analyses.values().map(|m| m.wilcoxon.p_two_sided).collect();
    // Every p comes from signed_rank_test and is finite in [0, 1], so this cannot fail.
    if let Ok(adj) = stats::benjamini_hochberg(&p) {
        for (m, q) in analyses.values_mut().zip(adj) {
            m.p_bh = Some(q);
        }
    }
}

/// `Some` when an exact-class key differs between A and B, or when either arm's samples
/// disagree among themselves (an exact key that is not deterministic is itself a finding).
/// `None` when both arms agree on one value, or either arm has no samples.
pub fn exact_difference(a: &[f64], b: &[f64]) -> Option<ExactDiff> {
    let stable = |xs: &[f64]| xs.iter().all(|x| x.total_cmp(&xs[0]).is_eq());
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mid = |xs: &[f64]| {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a_stable, b_stable) = (stable(a), stable(b));
    let (av, bv) = if a_stable && b_stable {
        (a[0], b[0])
    } else {
        (
            stats::median(a).unwrap_or(mid(a)),
            stats::median(b).unwrap_or(mid(b)),
        )
    };
    if a_stable && b_stable && av.total_cmp(&bv).is_eq() {
        return None;
    }
    Some(ExactDiff {
        a: av,
        b: bv,
        a_stable,
        b_stable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_difference_reports_values() {
        let d = exact_difference(&[4.9, 4.9, 4.9], &[5.9, 5.9, 5.9]).unwrap();
        assert_eq!(d.to_string(), "4.9 -> 5.9");
        assert_eq!(exact_difference(&[3.0, 3.0], &[3.0, 3.0]), None);
        assert_eq!(exact_difference(&[], &[1.0]), None);
        let v = exact_difference(&[3.0, 4.0, 3.0], &[3.0, 3.0, 3.0]).unwrap();
        assert_eq!(v.to_string(), "3 -> 3 (A varies between samples)");
    }
}

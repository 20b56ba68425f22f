//! Minimum detectable effect for a paired design, from the spread of this run's differences.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::signrank::psignrank;
use super::{describe, wilcoxon};

/// Smallest true mean shift (in the units of `d`, e.g. log ratio) that a two-sided test at
/// level `alpha` would detect with probability `power`, given n paired differences with
/// sample SD s:
///
/// MDE = (t(1 - alpha/2, n - 1) + t(power, n - 1)) * s / sqrt(n)
///
/// the usual approximation for the one-sample t-test (e.g. Chow, Shao & Wang, *Sample Size
/// Calculations in Clinical Research*, 3rd ed., §3.1; it drops the non-central t's small
/// correction). The Wilcoxon test's efficiency relative to t is 3/π ≈ 0.955 for normal data,
/// so the figure is slightly optimistic for Wilcoxon; it is a guide to "could this run have
/// seen a change of that size", not a guarantee.
///
/// `None` when n < 2, the input is not finite, or the exact Wilcoxon test cannot reach `alpha`
/// at all with n pairs (its smallest two-sided p is 2/2^n: n <= 5 at alpha = 0.05): then no
/// effect is detectable, however large.
pub fn min_detectable_effect(d: &[f64], alpha: f64, power: f64) -> Option<f64> {
    let n = d.len();
    if n < 2 || d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    if !(alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0) {
        return None;
    }
    if n <= wilcoxon::EXACT_MAX_N && 2.0 * psignrank(0.0, n) > alpha {
        return None;
    }
    let s = describe::sd(d)?;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some((t.inverse_cdf(1.0 - alpha / 2.0) + t.inverse_cdf(power)) * s / (n as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_scipy_t_quantiles() {
        // d = [0.01, 0.03, -0.02, 0.05, 0.00, 0.02]; s = numpy.std(d, ddof=1) = 0.0242899
        // scipy.stats.t.ppf(0.975, 5) = 2.5705818, scipy.stats.t.ppf(0.8, 5) = 0.9195438
        // MDE = (t975 + t80) * s / math.sqrt(6) = 0.0346092 (scipy 1.x, Python 3.11)
        let d = [0.01, 0.03, -0.02, 0.05, 0.00, 0.02];
        let m = min_detectable_effect(&d, 0.05, 0.8).unwrap();
        assert!((m - 0.034_609_19).abs() < 1e-7, "{m}");
    }

    #[test]
    fn too_few_pairs_detect_nothing() {
        assert_eq!(
            min_detectable_effect(&[0.1, 0.2, 0.3, 0.1, 0.2], 0.05, 0.8),
            None
        );
        assert_eq!(min_detectable_effect(&[0.1], 0.05, 0.8), None);
        assert_eq!(min_detectable_effect(&[0.0; 6], 0.05, 0.8), Some(0.0));
    }
}

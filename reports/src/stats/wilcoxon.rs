//! Wilcoxon signed-rank test and the Hodges–Lehmann estimate with its confidence interval,
//! following R's `wilcox.test(x, conf.int = TRUE)` (R 4.x, src/library/stats/R/wilcox.test.R).
//!
//! Where this deliberately differs from R, the doc comment of the function says so.

use super::common::{StatsError, check_finite, pnorm};
use super::signrank::{psignrank, qsignrank};
pub use contract::ab::{CiMethod, HodgesLehmann, PMethod, SignedRankTest};

/// R uses the exact null distribution when `n < 50` (`exact <- (n < 50)`); so do we.
pub const EXACT_MAX_N: usize = 49;

/// Largest n for the Hodges–Lehmann interval: n(n+1)/2 Walsh averages are materialised
/// (2,001,000 values, 16 MB at n = 2000); A/B round counts are far below this.
pub const MAX_HL_N: usize = 2000;

/// Midranks of |x| (ties share the mean of their positions), plus the sizes of tie groups.
fn abs_ranks(x: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&i, &j| x[i].abs().total_cmp(&x[j].abs()));
    let mut ranks = vec![0.0; x.len()];
    let mut groups = Vec::new();
    let mut start = 0;
    while start < idx.len() {
        let mut end = start + 1;
        while end < idx.len() && x[idx[end]].abs() == x[idx[start]].abs() {
            end += 1;
        }
        // Positions start+1 ..= end share rank (start+1+end)/2.
        let r = (start + 1 + end) as f64 / 2.0;
        for &i in &idx[start..end] {
            ranks[i] = r;
        }
        groups.push(end - start);
        start = end;
    }
    (ranks, groups)
}

/// Two-sided Wilcoxon signed-rank test of "the differences are symmetric about 0".
///
/// Matches R's `wilcox.test(d)` with defaults (`correct = TRUE`): zeros are dropped; the exact
/// distribution is used when n < 50 and there are neither ties nor zeros; otherwise the normal
/// approximation with the tie-corrected variance and a continuity correction of 0.5 toward
/// the mean. One deliberate difference: when every difference is zero R returns NaN; this
/// returns p = 1 (`PMethod::AllZero`), because identical measurements are no evidence of a shift.
pub fn signed_rank_test(d: &[f64]) -> Result<SignedRankTest, StatsError> {
    check_finite("paired differences", d)?;
    let x: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
    let n_zeros = d.len() - x.len();
    let n = x.len();
    if n == 0 {
        return Ok(SignedRankTest {
            n_used: 0,
            n_zeros,
            ties: false,
            v: 0.0,
            p_two_sided: 1.0,
            method: PMethod::AllZero,
        });
    }
    let (ranks, groups) = abs_ranks(&x);
    let v: f64 = x
        .iter()
        .zip(&ranks)
        .filter(|(xi, _)| **xi > 0.0)
        .map(|(_, r)| r)
        .sum();
    let ties = groups.iter().any(|&g| g > 1);
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    if n <= EXACT_MAX_N && !ties && n_zeros == 0 {
        // R: p <- if (V > n(n+1)/4) psignrank(V - 1, n, lower = FALSE) else psignrank(V, n)
        let p = if v > mean {
            1.0 - psignrank(v - 1.0, n)
        } else {
            psignrank(v, n)
        };
        return Ok(SignedRankTest {
            n_used: n,
            n_zeros,
            ties,
            v,
            p_two_sided: (2.0 * p).min(1.0),
            method: PMethod::Exact,
        });
    }
    let tie_term: f64 = groups
        .iter()
        .map(|&t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum::<f64>()
        / 48.0;
    let sigma = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term).sqrt();
    let dz = v - mean;
    // R: CORRECTION <- sign(z) * 0.5 for two-sided.
    let z = (dz - dz.signum() * 0.5 * f64::from(dz != 0.0)) / sigma;
    let p = 2.0 * pnorm(z).min(pnorm(-z));
    Ok(SignedRankTest {
        n_used: n,
        n_zeros,
        ties,
        v,
        p_two_sided: p.min(1.0),
        method: PMethod::Normal { z },
    })
}

/// Hodges–Lehmann estimate and confidence interval from the Walsh averages' order statistics.
///
/// For n <= [`EXACT_MAX_N`] this is R's exact computation: `qu <- qsignrank(alpha/2, n)`
/// (raised to 1 if 0), interval = [W(qu), W(M - qu + 1)] with M = n(n+1)/2, achieved level
/// `1 - 2 psignrank(qu - 1, n)`. Differences from R, on purpose:
/// - all n differences are used, zeros included (R drops zeros first, and then falls back to
///   its root-finding asymptotic interval); a zero difference is evidence for no shift and the
///   order-statistic interval stays valid, so identical data gives a zero-width interval at 0;
/// - ties do not switch to the asymptotic method (the order-statistic interval does not need
///   untied ranks);
/// - the achieved level is always reported, where R prints the requested level unless the
///   shortfall exceeds alpha/2;
/// - above [`EXACT_MAX_N`], the critical value is C = floor(n(n+1)/4 - z sqrt(n(n+1)(2n+1)/24))
///   (Hollander & Wolfe, *Nonparametric Statistical Methods*, 2nd ed., eq. 3.25) instead of
///   R's `uniroot` on the asymptotic statistic.
pub fn hodges_lehmann(d: &[f64], conf_level: f64) -> Result<HodgesLehmann, StatsError> {
    check_finite("paired differences", d)?;
    if !(conf_level > 0.0 && conf_level < 1.0) {
        return Err(StatsError::OutOfRange {
            what: "confidence level",
            range: "(0, 1)",
            value: conf_level,
        });
    }
    let n = d.len();
    if n > MAX_HL_N {
        return Err(StatsError::TooLong {
            what: "paired differences",
            len: n,
            max: MAX_HL_N,
        });
    }
    let m = n * (n + 1) / 2;
    let mut w = Vec::with_capacity(m);
    for i in 0..n {
        for j in i..n {
            w.push((d[i] + d[j]) / 2.0);
        }
    }
    w.sort_by(f64::total_cmp);
    let estimate = if m % 2 == 1 {
        w[m / 2]
    } else {
        (w[m / 2 - 1] + w[m / 2]) / 2.0
    };
    let alpha = 1.0 - conf_level;
    let (qu, achieved, method) = if n <= EXACT_MAX_N {
        let qu = qsignrank(alpha / 2.0, n).max(1);
        let achieved = 1.0 - 2.0 * psignrank(qu as f64 - 1.0, n);
        (qu, achieved, CiMethod::Exact)
    } else {
        let nf = n as f64;
        let mu = nf * (nf + 1.0) / 4.0;
        let sigma = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        let z = statrs_normal_quantile(1.0 - alpha / 2.0);
        let c = ((mu - z * sigma).floor().max(1.0)) as usize;
        // P(V <= c - 1) by the continuity-corrected normal approximation.
        let achieved = 1.0 - 2.0 * pnorm((c as f64 - 1.0 + 0.5 - mu) / sigma);
        (c.min(m.div_ceil(2)), achieved, CiMethod::Normal)
    };
    // 1-based W(qu) and W(m - qu + 1) -> 0-based qu - 1 and m - qu.
    Ok(HodgesLehmann {
        n,
        estimate,
        lo: w[qu - 1],
        hi: w[m - qu],
        conf_level_requested: conf_level,
        conf_level_achieved: achieved,
        method,
    })
}

/// Standard normal quantile (statrs' inverse CDF).
fn statrs_normal_quantile(p: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    // Normal::standard() cannot fail.
    Normal::standard().inverse_cdf(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_use_midranks_for_ties() {
        let (r, g) = abs_ranks(&[1.0, -2.0, 2.0, 3.0]);
        assert_eq!(r, vec![1.0, 2.5, 2.5, 4.0]);
        assert_eq!(g, vec![1, 2, 1]);
    }

    #[test]
    fn all_zero_is_p_one_and_zero_width_interval() {
        let t = signed_rank_test(&[0.0; 6]).unwrap();
        assert_eq!(t.p_two_sided, 1.0);
        assert_eq!(t.method, PMethod::AllZero);
        let hl = hodges_lehmann(&[0.0; 6], 0.95).unwrap();
        assert_eq!((hl.estimate, hl.lo, hl.hi), (0.0, 0.0, 0.0));
    }

    #[test]
    fn bad_input_names_itself() {
        assert_eq!(
            signed_rank_test(&[]).unwrap_err().to_string(),
            "paired differences is empty"
        );
        assert_eq!(
            signed_rank_test(&[1.0, f64::NAN]).unwrap_err().to_string(),
            "paired differences holds a non-finite value at index 1"
        );
        assert!(hodges_lehmann(&[1.0], 1.0).is_err());
    }
}

//! The size of a change point: the two-sample Hodges–Lehmann shift between the segments either
//! side of a step, with the distribution-free interval from the Mann–Whitney statistic (Moses'
//! method); and a
//! least-squares line with its slope's t interval for a drift. Also the two residual sums that
//! tell a step from a drift.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// An estimate with its 95 % interval, in the data's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The median of `ys − xs` over every pair, with its 95 % interval. `None` when a side is
/// empty.
pub fn shift(xs: &[f64], ys: &[f64]) -> Option<Estimate> {
    let (n, m) = (xs.len(), ys.len());
    if n == 0 || m == 0 {
        return None;
    }
    let mut d: Vec<f64> = xs
        .iter()
        .flat_map(|x| ys.iter().map(move |y| y - x))
        .collect();
    d.sort_by(f64::total_cmp);
    let nm = d.len();
    let value = if nm % 2 == 1 {
        d[nm / 2]
    } else {
        (d[nm / 2 - 1] + d[nm / 2]) / 2.0
    };
    // The interval's ends are order statistics of the pairwise differences: C = nm/2 − z·sd of
    // the Mann–Whitney statistic (the normal approximation; at least the first and last).
    let z = Normal::standard().inverse_cdf(0.975);
    let (nf, mf) = (n as f64, m as f64);
    let sd = (nf * mf * (nf + mf + 1.0) / 12.0).sqrt();
    let c = (nf * mf / 2.0 - z * sd).floor().max(0.0) as usize;
    let c = c.min((nm - 1) / 2);
    Some(Estimate {
        value,
        lo: d[c],
        hi: d[nm - 1 - c],
    })
}

/// A least-squares line over `ys` at positions `0, 1, …`: `(intercept, slope, slope's 95 %
/// half-width)`. `None` below three values.
pub fn line(ys: &[f64]) -> Option<(f64, f64, f64)> {
    let n = ys.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mx = (nf - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / nf;
    let sxx: f64 = (0..n).map(|i| (i as f64 - mx).powi(2)).sum();
    let sxy: f64 = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (i as f64 - mx) * (y - my))
        .sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let rss: f64 = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - intercept - slope * i as f64).powi(2))
        .sum();
    let se = (rss / (nf - 2.0) / sxx).sqrt();
    let t = StudentsT::new(0.0, 1.0, nf - 2.0)
        .map(|d| d.inverse_cdf(0.975))
        .unwrap_or(f64::NAN);
    Some((intercept, slope, t * se))
}

/// The residual sum of squares of a line through `ys`.
pub fn line_rss(ys: &[f64]) -> f64 {
    match line(ys) {
        Some((a, b, _)) => ys
            .iter()
            .enumerate()
            .map(|(i, y)| (y - a - b * i as f64).powi(2))
            .sum(),
        None => 0.0,
    }
}

/// The residual sum of squares of two levels, `ys[..at]` and `ys[at..]`, each at its mean.
pub fn step_rss(ys: &[f64], at: usize) -> f64 {
    let part = |v: &[f64]| -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        let m = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|y| (y - m).powi(2)).sum()
    };
    part(&ys[..at]) + part(&ys[at..])
}

/// The median of a slice (`None` when empty).
pub fn median(xs: &[f64]) -> Option<f64> {
    contract::schema::median(xs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: sides of five one unit apart give 25 differences from −2 to 6 with
    /// median 2; C = ⌊12.5 − 1.96 · 4.787⌋ = 3, so the interval runs from the 4th smallest
    /// difference to the 4th largest.
    #[test]
    fn the_shift_and_its_interval_are_order_statistics_of_the_differences() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let ys = [3.0, 4.0, 5.0, 6.0, 7.0];
        let e = shift(&xs, &ys).unwrap();
        assert_eq!(e.value, 2.0);
        assert_eq!((e.lo, e.hi), (0.0, 4.0));
        let same = shift(&[7.0; 4], &[7.5; 6]).unwrap();
        assert_eq!((same.value, same.lo, same.hi), (0.5, 0.5, 0.5));
    }

    #[test]
    fn a_line_recovers_its_slope_and_tells_a_ramp_from_a_step() {
        let ramp: Vec<f64> = (0..20).map(|i| 5.0 + 0.5 * i as f64).collect();
        let (a, b, hw) = line(&ramp).unwrap();
        assert!((a - 5.0).abs() < 1e-9 && (b - 0.5).abs() < 1e-9 && hw.abs() < 1e-9);
        assert!(line_rss(&ramp) < step_rss(&ramp, 10));
        let step: Vec<f64> = (0..20).map(|i| if i < 10 { 1.0 } else { 2.0 }).collect();
        assert!(step_rss(&step, 10) < line_rss(&step));
    }
}

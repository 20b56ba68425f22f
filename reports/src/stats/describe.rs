//! Descriptive helpers (median, MAD, mean, SD, CV) used by the A/B analysis and reports.

/// Median (mean of the two middle values for even n); `None` for empty input or any NaN.
/// The one median of the workspace's statistics is the contract's (baselines are medians).
pub use contract::schema::median;

/// Min and max of a series, ignoring NaN (the noise band every renderer and export uses);
/// `None` when no value is a number.
pub fn range(xs: &[f64]) -> Option<(f64, f64)> {
    let mut it = xs.iter().copied().filter(|x| !x.is_nan());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x))))
}

/// Raw median absolute deviation from the median (no 1.4826 consistency factor: multiply by it
/// to estimate a normal SD, as R's `mad()` does by default).
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// Arithmetic mean; `None` for empty input.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1 denominator); `None` below two values.
pub fn sd(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Coefficient of variation `sd / mean`; `None` below two values or when the mean is zero.
pub fn cv(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if m == 0.0 {
        return None;
    }
    Some(sd(xs)? / m.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn mad_sd_cv_match_hand_values() {
        // x = 1,2,3,4,100: median 3, |dev| = 2,1,0,1,97 -> MAD 1.
        assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0]), Some(1.0));
        // 2,4,4,4,5,5,7,9: mean 5, sum of squares 32, sd = sqrt(32/7).
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!((sd(&x).unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((cv(&x).unwrap() - (32.0f64 / 7.0).sqrt() / 5.0).abs() < 1e-12);
        assert_eq!(sd(&[1.0]), None);
        assert_eq!(cv(&[-1.0, 1.0]), None);
    }
}

//! Benjamini–Hochberg adjustment of p-values across metrics (false discovery rate control).

use super::common::StatsError;

/// BH-adjusted p-values in input order, as R's `p.adjust(p, "BH")`:
/// adj(i) = min over j >= i (in ascending order) of m/j * p(j), capped at 1.
/// (Benjamini & Hochberg 1995, J. R. Stat. Soc. B 57:289–300.)
pub fn benjamini_hochberg(p: &[f64]) -> Result<Vec<f64>, StatsError> {
    for (index, v) in p.iter().enumerate() {
        if !v.is_finite() {
            return Err(StatsError::NonFinite {
                what: "p-values",
                index,
            });
        }
        if !(0.0..=1.0).contains(v) {
            return Err(StatsError::OutOfRange {
                what: "p-value",
                range: "[0, 1]",
                value: *v,
            });
        }
    }
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running = 1.0f64;
    for rank in (0..m).rev() {
        let i = idx[rank];
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        out[i] = running.min(1.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_r_p_adjust() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.5), "BH")
        //    = 0.025 0.050 0.050 0.025 0.500
        // (scipy.stats.false_discovery_control([0.01,0.04,0.03,0.005,0.5]) gives the same.)
        let adj = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005, 0.5]).unwrap();
        let want = [0.025, 0.05, 0.05, 0.025, 0.5];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
        assert_eq!(benjamini_hochberg(&[]).unwrap(), Vec::<f64>::new());
        assert!(benjamini_hochberg(&[1.5]).is_err());
        assert!(benjamini_hochberg(&[f64::NAN]).is_err());
    }
}

//! The exact null distribution of the Wilcoxon signed-rank statistic V (R's `psignrank` /
//! `qsignrank`), by the standard counting recursion over ranks 1..n.

/// Number of sign assignments giving each V = 0 ..= n(n+1)/2. Counts are at most 2^n; the
/// callers cap n at [`super::EXACT_MAX_N`] (49) so u64 is exact.
fn counts(n: usize) -> Vec<u64> {
    let max = n * (n + 1) / 2;
    let mut c = vec![0u64; max + 1];
    c[0] = 1;
    for k in 1..=n {
        // Adding rank k with a positive sign shifts the distribution by k.
        for s in (k..=k * (k + 1) / 2).rev() {
            c[s] += c[s - k];
        }
    }
    c
}

/// P(V <= q) under H0 for n non-zero, untied differences (R's `psignrank(q, n)`).
/// `q` below zero gives 0. `n` above 62 is refused by returning NaN (u64 overflow).
pub fn psignrank(q: f64, n: usize) -> f64 {
    if n > 62 {
        return f64::NAN;
    }
    if q < 0.0 {
        return 0.0;
    }
    let c = counts(n);
    let upto = (q.floor() as usize).min(c.len() - 1);
    let cum: u64 = c[..=upto].iter().sum();
    cum as f64 / 2f64.powi(n as i32)
}

/// Smallest q with P(V <= q) >= p (R's `qsignrank(p, n)`, the usual discrete quantile).
/// A relative fuzz of 1e-12 keeps p = k/2^n from being missed by rounding.
pub fn qsignrank(p: f64, n: usize) -> usize {
    let c = counts(n);
    let total = 2f64.powi(n as i32);
    let target = p * (1.0 - 1e-12);
    let mut cum = 0u64;
    for (q, &k) in c.iter().enumerate() {
        cum += k;
        if cum as f64 / total >= target {
            return q;
        }
    }
    c.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_n_by_hand() {
        // n = 3: V in {0,1,2,3,3,4,5,6} over 8 sign patterns.
        assert_eq!(counts(3), vec![1, 1, 1, 2, 1, 1, 1]);
        assert_eq!(psignrank(0.0, 6), 1.0 / 64.0);
        assert_eq!(psignrank(1.0, 6), 2.0 / 64.0);
        assert_eq!(psignrank(-1.0, 6), 0.0);
        assert_eq!(psignrank(21.0, 6), 1.0);
        // The distribution sums to 2^n.
        assert_eq!(counts(20).iter().sum::<u64>(), 1 << 20);
    }

    #[test]
    fn quantiles_match_r() {
        // R: qsignrank(0.025, 6) = 1; qsignrank(0.025, 9) = 6; qsignrank(0.025, 20) = 53.
        // (scipy cross-check: the smallest q with sum(counts[:q+1])/2^n >= 0.025.)
        assert_eq!(qsignrank(0.025, 6), 1);
        assert_eq!(qsignrank(0.025, 9), 6);
        assert_eq!(qsignrank(0.025, 20), 53);
        // For n = 5 even V = 0 has probability 1/32 > 0.025.
        assert_eq!(qsignrank(0.025, 5), 0);
    }
}

//! Sign-flip permutation test on the mean of paired differences (e.g. mean log ratio): a
//! distribution-free cross-check of the Wilcoxon test that uses magnitudes, not just ranks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::common::{StatsError, check_finite};
pub use contract::ab::{PermutationMethod, PermutationTest};

/// Exact enumeration up to 2^16 = 65,536 sign patterns; above, Monte Carlo.
pub const EXACT_MAX_N: usize = 16;
/// Upper bound on Monte Carlo draws: keeps every call bounded in time.
pub const MAX_DRAWS: usize = 10_000_000;

/// Two-sided sign-flip test of "the differences are symmetric about 0" with the mean as the
/// statistic. Exact for n <= 16; otherwise `draws` seeded Monte Carlo patterns.
pub fn sign_flip_test(d: &[f64], draws: usize, seed: u64) -> Result<PermutationTest, StatsError> {
    check_finite("paired differences", d)?;
    let n = d.len();
    let obs_sum: f64 = d.iter().sum();
    let scale: f64 = d.iter().map(|x| x.abs()).sum();
    // Patterns that reach the observed |sum| up to rounding count as "as extreme".
    let threshold = obs_sum.abs() - 1e-12 * scale;
    let mean = obs_sum / n as f64;
    if n <= EXACT_MAX_N {
        let patterns = 1u64 << n;
        let mut hits = 0u64;
        for mask in 0..patterns {
            let s: f64 = d
                .iter()
                .enumerate()
                .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                .sum();
            if s.abs() >= threshold {
                hits += 1;
            }
        }
        return Ok(PermutationTest {
            mean,
            p_two_sided: hits as f64 / patterns as f64,
            method: PermutationMethod::Exact { patterns },
        });
    }
    if draws == 0 || draws > MAX_DRAWS {
        return Err(StatsError::OutOfRange {
            what: "permutation draws",
            range: "1 ..= 10000000",
            value: draws as f64,
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut hits = 0usize;
    let mut bits = 0u64;
    for _ in 0..draws {
        let mut s = 0.0;
        for (i, x) in d.iter().enumerate() {
            if i % 64 == 0 {
                bits = rng.next_u64();
            }
            s += if bits >> (i % 64) & 1 == 1 { -x } else { *x };
        }
        if s.abs() >= threshold {
            hits += 1;
        }
    }
    Ok(PermutationTest {
        mean,
        p_two_sided: (1 + hits) as f64 / (1 + draws) as f64,
        method: PermutationMethod::MonteCarlo { draws, seed },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_same_sign_gives_two_patterns() {
        // Only the identity and the all-flipped pattern reach |sum| = 21: p = 2/64.
        let t = sign_flip_test(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0, 0).unwrap();
        assert_eq!(t.p_two_sided, 2.0 / 64.0);
        assert_eq!(t.mean, 3.5);
    }

    #[test]
    fn monte_carlo_is_seeded_and_close_to_exact() {
        // 17 values: above the exact limit. The exact p by enumerating all 2^17 patterns in
        // numpy: d = [-i if i % 3 == 0 else i for i in range(1, 18)];
        // S = sum over i of where(bit i, -d[i], d[i]); mean(abs(S) >= abs(sum(d))) = 0.1454315.
        // With 20,000 draws the Monte Carlo SE is sqrt(p(1-p)/20000) = 0.0025: allow 4 SE.
        let d: Vec<f64> = (1..=17)
            .map(|i| if i % 3 == 0 { -(i as f64) } else { i as f64 })
            .collect();
        let a = sign_flip_test(&d, 20_000, 7).unwrap();
        let b = sign_flip_test(&d, 20_000, 7).unwrap();
        assert_eq!(a, b);
        assert!(
            (a.p_two_sided - 0.145_431_5).abs() < 0.01,
            "{}",
            a.p_two_sided
        );
        assert!(matches!(
            a.method,
            PermutationMethod::MonteCarlo {
                draws: 20_000,
                seed: 7
            }
        ));
        assert!(sign_flip_test(&d, 0, 7).is_err());
    }
}

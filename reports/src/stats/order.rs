//! Order-effect check: do rounds run A-first give a different log ratio from rounds run
//! B-first? A carry-over (e.g. the second sample of a round always meets a warmer page cache)
//! shifts the two groups in opposite directions; their difference is twice that effect.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::common::{StatsError, check_finite};
use super::permutation::{MAX_DRAWS, PermutationMethod};
pub use contract::ab::OrderEffect;

/// Exact enumeration when n <= 20 (at most C(20,10) = 184,756 relabellings).
pub const EXACT_MAX_N: usize = 20;

/// Two-sample permutation test of the difference of means between the rounds with
/// `a_first[i] == true` and the others. `None` if either group is empty.
pub fn order_effect(
    d: &[f64],
    a_first: &[bool],
    draws: usize,
    seed: u64,
) -> Result<Option<OrderEffect>, StatsError> {
    check_finite("paired differences", d)?;
    if d.len() != a_first.len() {
        return Err(StatsError::LengthMismatch {
            what: "differences and orders",
            left: d.len(),
            right: a_first.len(),
        });
    }
    let n = d.len();
    let k = a_first.iter().filter(|f| **f).count();
    if k == 0 || k == n {
        return Ok(None);
    }
    let total: f64 = d.iter().sum();
    let scale: f64 = d.iter().map(|x| x.abs()).sum();
    let stat = |sum_a: f64| {
        let ma = sum_a / k as f64;
        let mb = (total - sum_a) / (n - k) as f64;
        (ma - mb).abs()
    };
    let sum_a: f64 = d
        .iter()
        .zip(a_first)
        .filter(|(_, f)| **f)
        .map(|(x, _)| x)
        .sum();
    let observed = stat(sum_a);
    let threshold = observed - 1e-12 * scale;
    let (p, method) = if n <= EXACT_MAX_N {
        // Gosper's hack walks every n-bit mask with exactly k bits set.
        let mut hits = 0u64;
        let mut total_masks = 0u64;
        let mut mask: u64 = (1u64 << k) - 1;
        while mask < 1u64 << n {
            let s: f64 = (0..n).filter(|i| mask >> i & 1 == 1).map(|i| d[i]).sum();
            if stat(s) >= threshold {
                hits += 1;
            }
            total_masks += 1;
            let c = mask & mask.wrapping_neg();
            let r = mask + c;
            mask = (((r ^ mask) >> 2) / c) | r;
        }
        (
            hits as f64 / total_masks as f64,
            PermutationMethod::Exact {
                patterns: total_masks,
            },
        )
    } else {
        if draws == 0 || draws > MAX_DRAWS {
            return Err(StatsError::OutOfRange {
                what: "permutation draws",
                range: "1 ..= 10000000",
                value: draws as f64,
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut v = d.to_vec();
        let mut hits = 0usize;
        for _ in 0..draws {
            v.shuffle(&mut rng);
            if stat(v[..k].iter().sum()) >= threshold {
                hits += 1;
            }
        }
        (
            (1 + hits) as f64 / (1 + draws) as f64,
            PermutationMethod::MonteCarlo { draws, seed },
        )
    };
    let mean_a_first = sum_a / k as f64;
    let mean_b_first = (total - sum_a) / (n - k) as f64;
    Ok(Some(OrderEffect {
        n_a_first: k,
        n_b_first: n - k,
        mean_a_first,
        mean_b_first,
        difference: mean_a_first - mean_b_first,
        p_two_sided: p,
        method,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_separation_of_three_and_three() {
        // A-first rounds all higher: only the observed labelling and its mirror reach the
        // observed |difference| among C(6,3) = 20 labellings -> p = 2/20.
        let d = [0.10, 0.11, 0.12, 0.01, 0.02, 0.03];
        let f = [true, true, true, false, false, false];
        let e = order_effect(&d, &f, 0, 0).unwrap().unwrap();
        assert!((e.difference - 0.09).abs() < 1e-12);
        assert!((e.p_two_sided - 0.1).abs() < 1e-12);
        assert_eq!(e.method, PermutationMethod::Exact { patterns: 20 });
    }

    #[test]
    fn one_sided_groups_and_mismatch() {
        assert_eq!(
            order_effect(&[0.1, 0.2], &[true, true], 0, 0).unwrap(),
            None
        );
        assert!(order_effect(&[0.1, 0.2], &[true], 0, 0).is_err());
    }
}

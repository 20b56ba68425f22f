//! E-Divisive means (Matteson and James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", 2014), the method MongoDB's performance CI adopted (Daly et
//! al., "Change Point Detection in Software Performance Testing", ICPE 2020) and Apache Otava
//! (formerly Hunter) keeps.
//!
//! A series is split hierarchically: in every current segment, the split τ (with an end κ)
//! that maximises the divergence Q̂ between `x[s..τ]` and `x[τ..κ]` is a candidate, and the
//! best candidate over all segments is kept when a permutation test calls it significant:
//! the values are shuffled within each current segment, the best Q̂ of the shuffled series is
//! computed again, and the p-value is the share of shuffles whose Q̂ reaches the observed one.
//! The first candidate that is not significant ends the search.
//!
//! Q̂ with exponent α = 1 (the "means" variant, as Otava's default):
//!
//! ```text
//! Q̂(X, Y) = 2/(n+m) Σ|Xi − Yj| − 2m/((n+m)(n−1)) Σ_{i<k}|Xi − Xk| − 2n/((n+m)(m−1)) Σ_{j<k}|Yj − Yk|
//! ```
//!
//! Where this differs from Otava 0.8's `compute_change_points_orig` (the permutation
//! variant): the p-value counts the observed split itself, `(k + 1) / (R + 1)` as Matteson and
//! James define it (Otava's omits the `+ 1`); each side of a split holds at least
//! `min_segment` values (Otava's at least one), so one outlier is not a segment; and the
//! shuffles stop early once `k` exceeds what a significant p-value allows (the answer
//! "not significant" cannot change after that, so the draws are not needed). Pure: the
//! shuffles draw from a seeded ChaCha8.

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// How the search runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Shuffles per significance test.
    pub permutations: u32,
    /// A split is kept when its p-value is at most this.
    pub max_p: f64,
    /// The fewest values either side of a split.
    pub min_segment: usize,
}

/// A split the search kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The first index of the new segment (the split is between `index - 1` and `index`).
    pub index: usize,
    pub qhat: f64,
    pub p_value: f64,
}

/// Prefix sums over the distance matrix's columns: `col(c, a, b)` is `Σ_{i in a..b} |x_i − x_c|`.
struct Distances {
    n: usize,
    /// `pre[c * (n + 1) + r]` = `Σ_{i < r} |x_i − x_c|`.
    pre: Vec<f64>,
}

impl Distances {
    fn new(x: &[f64]) -> Distances {
        let n = x.len();
        let mut pre = vec![0.0; n * (n + 1)];
        for c in 0..n {
            let row = &mut pre[c * (n + 1)..(c + 1) * (n + 1)];
            for i in 0..n {
                row[i + 1] = row[i] + (x[i] - x[c]).abs();
            }
        }
        Distances { n, pre }
    }

    fn col(&self, c: usize, a: usize, b: usize) -> f64 {
        let base = c * (self.n + 1);
        self.pre[base + b] - self.pre[base + a]
    }
}

/// The best split of `x[s..e]`: `(τ, Q̂)` over `s + min ≤ τ`, `τ + min ≤ κ ≤ e`; `None` when
/// the segment is too short for two sides.
fn best_in(d: &Distances, s: usize, e: usize, min: usize) -> Option<(usize, f64)> {
    let min = min.max(1);
    if e < s + 2 * min {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    // Within-X sum of x[s..τ], grown as τ moves right.
    let mut wx = 0.0;
    for t in s + 1..s + min {
        wx += d.col(t, s, t);
    }
    for tau in s + min..=e - min {
        let n = (tau - s) as f64;
        let mut cross = 0.0;
        let mut wy = 0.0;
        for kappa in tau + 1..=e {
            // Y gains x[κ − 1].
            let c = kappa - 1;
            cross += d.col(c, s, tau);
            wy += d.col(c, tau, c);
            if kappa - tau < min {
                continue;
            }
            let m = (kappa - tau) as f64;
            let within_x = if n > 1.0 {
                2.0 * m / ((n + m) * (n - 1.0)) * wx
            } else {
                0.0
            };
            let within_y = if m > 1.0 {
                2.0 * n / ((n + m) * (m - 1.0)) * wy
            } else {
                0.0
            };
            let q = 2.0 / (n + m) * cross - within_x - within_y;
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((tau, q));
            }
        }
        // X gains x[τ] for the next τ.
        wx += d.col(tau, s, tau);
    }
    best
}

/// The segments the splits cut `0..n` into.
fn segments(n: usize, splits: &[usize]) -> Vec<(usize, usize)> {
    let mut cuts = vec![0];
    cuts.extend_from_slice(splits);
    cuts.push(n);
    cuts.windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|(a, b)| a < b)
        .collect()
}

/// The best split over every segment.
fn best_over(x: &[f64], segs: &[(usize, usize)], min: usize) -> Option<(usize, f64)> {
    let d = Distances::new(x);
    segs.iter()
        .filter_map(|&(s, e)| best_in(&d, s, e, min))
        .fold(None, |acc: Option<(usize, f64)>, c| match acc {
            Some(a) if a.1 >= c.1 => Some(a),
            _ => Some(c),
        })
}

/// The change points of `x`, in index order, each with the p-value it was kept at.
pub fn detect(x: &[f64], search: &Search, rng: &mut ChaCha8Rng) -> Vec<Split> {
    let mut kept: Vec<Split> = Vec::new();
    if x.len() < 2 * search.min_segment.max(1) || x.iter().any(|v| !v.is_finite()) {
        return kept;
    }
    let r = search.permutations.max(1) as usize;
    // More shuffles at or above the observed Q̂ than this, and p can no longer be ≤ max_p.
    let allowed = (search.max_p * (r as f64 + 1.0) - 1.0).floor().max(0.0) as usize;
    loop {
        let cuts: Vec<usize> = kept.iter().map(|s| s.index).collect();
        let segs = segments(x.len(), &cuts);
        let Some((tau, q)) = best_over(x, &segs, search.min_segment) else {
            break;
        };
        if q <= 0.0 {
            break;
        }
        let mut at_least = 0usize;
        let mut shuffled = x.to_vec();
        let mut drawn = 0usize;
        while drawn < r && at_least <= allowed {
            for &(s, e) in &segs {
                shuffled[s..e].shuffle(rng);
            }
            if best_over(&shuffled, &segs, search.min_segment).is_some_and(|(_, pq)| pq >= q) {
                at_least += 1;
            }
            drawn += 1;
        }
        let p = (at_least as f64 + 1.0) / (drawn as f64 + 1.0);
        if at_least > allowed || p > search.max_p {
            break;
        }
        kept.push(Split {
            index: tau,
            qhat: q,
            p_value: p,
        });
        kept.sort_by_key(|s| s.index);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Q̂ by its definition, for checking the incremental sums.
    fn qhat_direct(x: &[f64], s: usize, t: usize, k: usize) -> f64 {
        let (xs, ys) = (&x[s..t], &x[t..k]);
        let (n, m) = (xs.len() as f64, ys.len() as f64);
        let cross: f64 = xs
            .iter()
            .flat_map(|a| ys.iter().map(move |b| (a - b).abs()))
            .sum();
        let within = |v: &[f64]| -> f64 {
            let mut s = 0.0;
            for i in 0..v.len() {
                for j in i + 1..v.len() {
                    s += (v[i] - v[j]).abs();
                }
            }
            s
        };
        let wx = if n > 1.0 {
            2.0 * m / ((n + m) * (n - 1.0)) * within(xs)
        } else {
            0.0
        };
        let wy = if m > 1.0 {
            2.0 * n / ((n + m) * (m - 1.0)) * within(ys)
        } else {
            0.0
        };
        2.0 / (n + m) * cross - wx - wy
    }

    #[test]
    fn the_incremental_qhat_equals_the_definition() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0];
        let d = Distances::new(&x);
        for min in 1..4 {
            for s in 0..3 {
                let e = x.len();
                let mut best = None::<(usize, f64)>;
                for t in s + min..=e - min {
                    for k in t + min..=e {
                        let q = qhat_direct(&x, s, t, k);
                        if best.is_none_or(|(_, b)| q > b) {
                            best = Some((t, q));
                        }
                    }
                }
                let (bt, bq) = best.unwrap();
                let (t, q) = best_in(&d, s, e, min).unwrap();
                assert_eq!(t, bt, "s {s} min {min}");
                assert!((q - bq).abs() < 1e-9, "{q} {bq}");
            }
        }
    }

    fn search() -> Search {
        Search {
            permutations: 199,
            max_p: 0.01,
            min_segment: 3,
        }
    }

    #[test]
    fn a_clean_step_is_found_where_it_is_and_a_constant_has_none() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let noise = |i: usize| ((i * 7919) % 13) as f64 / 13.0 * 0.2;
        let x: Vec<f64> = (0..40)
            .map(|i| if i < 23 { 10.0 } else { 11.0 } + noise(i))
            .collect();
        let s = detect(&x, &search(), &mut rng);
        assert_eq!(s.iter().map(|s| s.index).collect::<Vec<_>>(), vec![23]);
        assert!(s[0].p_value <= 0.01);
        assert!(detect(&[5.0; 30], &search(), &mut rng).is_empty());
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let x: Vec<f64> = (0..45)
            .map(|i| {
                let base = if i < 15 {
                    1.0
                } else if i < 30 {
                    2.0
                } else {
                    0.5
                };
                base + ((i * 31) % 7) as f64 * 0.01
            })
            .collect();
        let idx: Vec<usize> = detect(&x, &search(), &mut rng)
            .iter()
            .map(|s| s.index)
            .collect();
        assert_eq!(idx, vec![15, 30]);
    }

    #[test]
    fn the_same_seed_gives_the_same_answer() {
        let x: Vec<f64> = (0..30).map(|i| ((i * 37) % 11) as f64).collect();
        let a = detect(&x, &search(), &mut ChaCha8Rng::seed_from_u64(9));
        let b = detect(&x, &search(), &mut ChaCha8Rng::seed_from_u64(9));
        assert_eq!(a, b);
    }
}

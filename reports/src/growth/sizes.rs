//! How a per-call cost grows with the vault across the sizes of a growth scenario: the same
//! workload run over vaults of n₁ < n₂ < … notes, each by a fresh server. The fit is the
//! import growth's ([`super::fit`]) on points instead of windows: the OLS slope of ln cost on
//! ln n with its t interval (floored at [`RESOLUTION`]), and a class chosen as Google
//! Benchmark's `Complexity()` chooses one, by least squares without an intercept
//! (c = Σ t·g / Σ g²) and the lowest RMS residual over the mean, refused under the same
//! rules ([`WIDE_INTERVAL`], [`TIE_RATIO`], [`MATERIAL_GROWTH`]).
//!
//! A series may hold many observations per size (each call's latency): the slope and its
//! interval are fitted over all of them, so a call's scatter widens the interval; the class is
//! fitted over each size's median, as Google Benchmark fits a mean per N. A series of one
//! figure per size (CPU per call over a level, peak RSS) has n − 2 degrees of freedom: over
//! three sizes its interval is wide unless the points lie on a line.

use serde::{Deserialize, Serialize};

use super::{GrowthError, LEVEL, MATERIAL_GROWTH, RESOLUTION, TIE_RATIO, WIDE_INTERVAL, ols_slope};

/// A per-call cost's class in the vault's size n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallClass {
    /// O(1): the call does not grow with the vault.
    Constant,
    /// O(log n).
    Log,
    /// O(n): the call walks the vault.
    Linear,
    /// O(n log n).
    NLogN,
    /// O(n²).
    Quadratic,
}

impl CallClass {
    pub const ALL: [CallClass; 5] = [
        CallClass::Constant,
        CallClass::Log,
        CallClass::Linear,
        CallClass::NLogN,
        CallClass::Quadratic,
    ];

    /// As Google Benchmark prints it.
    pub fn big_o(self) -> &'static str {
        match self {
            CallClass::Constant => "O(1)",
            CallClass::Log => "O(log n)",
            CallClass::Linear => "O(n)",
            CallClass::NLogN => "O(n log n)",
            CallClass::Quadratic => "O(n²)",
        }
    }

    /// In words: constant, logarithmic, linear, or superlinear.
    pub fn words(self) -> &'static str {
        match self {
            CallClass::Constant => "constant",
            CallClass::Log => "logarithmic",
            CallClass::Linear => "linear",
            CallClass::NLogN | CallClass::Quadratic => "superlinear",
        }
    }

    /// Whether a call grows faster than the vault.
    pub fn superlinear(self) -> bool {
        matches!(self, CallClass::NLogN | CallClass::Quadratic)
    }

    /// The key segment of the class (`linear`, `n_log_n`).
    pub fn name(self) -> &'static str {
        match self {
            CallClass::Constant => "constant",
            CallClass::Log => "log",
            CallClass::Linear => "linear",
            CallClass::NLogN => "n_log_n",
            CallClass::Quadratic => "quadratic",
        }
    }

    fn curve(self, n: f64) -> f64 {
        match self {
            CallClass::Constant => 1.0,
            CallClass::Log => n.log2(),
            CallClass::Linear => n,
            CallClass::NLogN => n * n.log2(),
            CallClass::Quadratic => n * n,
        }
    }
}

/// One candidate's least-squares fit over the sizes' medians.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CallClassFit {
    pub class: CallClass,
    pub coef: f64,
    /// RMS residual over the mean of the medians.
    pub rms: f64,
}

/// The fit of one series over the sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeGrowth {
    /// What the series is, in words ("search_files latency at 1 in flight").
    pub what: String,
    /// The distinct sizes and the observations fitted.
    pub sizes: usize,
    pub points: usize,
    /// Cost ∝ n^exponent, the OLS slope of ln cost on ln n.
    pub exponent: f64,
    pub lo: f64,
    pub hi: f64,
    /// Every candidate's fit, best first.
    pub fits: Vec<CallClassFit>,
    /// The class named, or `None` with `refusal` saying why.
    pub class: Option<CallClass>,
    pub refusal: Option<String>,
}

impl SizeGrowth {
    /// One line: "search_files latency grows as n^0.98 [0.93, 1.03] over n = 1000 to 10000:
    /// linear in the vault (O(n))".
    pub fn finding(&self, from: f64, to: f64) -> String {
        let head = format!(
            "{} grows as n^{:.2} [{:.2}, {:.2}] over n = {from:.0} to {to:.0}",
            self.what, self.exponent, self.lo, self.hi
        );
        match (self.class, &self.refusal) {
            (Some(c), _) => format!("{head}: {} in the vault ({})", c.words(), c.big_o()),
            (None, Some(why)) => format!("{head}: no class named ({why})"),
            (None, None) => head,
        }
    }
}

/// Fits `points` (size n, cost), any number per size, over at least three distinct sizes,
/// every cost positive and finite.
pub fn fit_sizes(what: &str, points: &[(f64, f64)]) -> Result<SizeGrowth, GrowthError> {
    let mut by: Vec<(f64, Vec<f64>)> = Vec::new();
    for &(n, v) in points {
        if !(n > 0.0 && n.is_finite()) {
            return Err(GrowthError::BadWindow {
                what: what.to_owned(),
            });
        }
        if !(v > 0.0 && v.is_finite()) {
            return Err(GrowthError::NotPositive {
                what: what.to_owned(),
            });
        }
        match by.iter_mut().find(|(m, _)| *m == n) {
            Some((_, vs)) => vs.push(v),
            None => by.push((n, vec![v])),
        }
    }
    by.sort_by(|a, b| a.0.total_cmp(&b.0));
    if by.len() < 3 {
        return Err(GrowthError::TooFew {
            what: what.to_owned(),
            n: by.len(),
        });
    }
    let x: Vec<f64> = points.iter().map(|p| p.0.ln()).collect();
    let y: Vec<f64> = points.iter().map(|p| p.1.ln()).collect();
    let (exponent, half) = if points.len() > 2 {
        ols_slope(&x, &y, LEVEL)
    } else {
        (0.0, f64::INFINITY)
    };
    let half = half.max(RESOLUTION);
    let medians: Vec<(f64, f64)> = by
        .iter()
        .map(|(n, vs)| (*n, contract::schema::median(vs).unwrap_or(0.0)))
        .collect();
    let mut fits: Vec<CallClassFit> = CallClass::ALL
        .iter()
        .map(|&c| least_sq(&medians, c))
        .collect();
    fits.sort_by(|a, b| a.rms.total_cmp(&b.rms));
    let (lo, hi) = (exponent - half, exponent + half);
    let span = medians[medians.len() - 1].0 / medians[0].0;
    let refusal = if hi - lo > WIDE_INTERVAL {
        Some(format!(
            "the exponent's interval is {:.2} wide, more than {WIDE_INTERVAL}",
            hi - lo
        ))
    } else if fits[1].rms < fits[0].rms * TIE_RATIO && fits[0].rms > 1e-9 {
        Some(format!(
            "{} and {} fit about equally",
            fits[0].class.big_o(),
            fits[1].class.big_o()
        ))
    } else if fits[0].class.superlinear() && span.powf(lo - 1.0) < 1.0 + MATERIAL_GROWTH {
        // Superlinear: a call's cost per note of the vault grows with n.
        Some(format!(
            "{} fits best, but per note of the vault a call grows by at most {:.0} % over n = {:.0} to {:.0}, less than the {:.0} % a superlinear finding needs",
            fits[0].class.big_o(),
            (span.powf((lo - 1.0).max(0.0)) - 1.0) * 100.0,
            medians[0].0,
            medians[medians.len() - 1].0,
            MATERIAL_GROWTH * 100.0
        ))
    } else {
        None
    };
    Ok(SizeGrowth {
        what: what.to_owned(),
        sizes: by.len(),
        points: points.len(),
        exponent,
        lo,
        hi,
        class: refusal.is_none().then_some(fits[0].class),
        fits,
        refusal,
    })
}

fn least_sq(medians: &[(f64, f64)], class: CallClass) -> CallClassFit {
    let g: Vec<f64> = medians.iter().map(|(n, _)| class.curve(*n)).collect();
    let t: Vec<f64> = medians.iter().map(|(_, v)| *v).collect();
    let sgg: f64 = g.iter().map(|v| v * v).sum();
    let stg: f64 = t.iter().zip(&g).map(|(a, b)| a * b).sum();
    let coef = if sgg > 0.0 { stg / sgg } else { 0.0 };
    let n = t.len() as f64;
    let ss: f64 = t.iter().zip(&g).map(|(a, b)| (a - coef * b).powi(2)).sum();
    let mean = t.iter().sum::<f64>() / n;
    CallClassFit {
        class,
        coef,
        rms: (ss / n).sqrt() / mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const SIZES: [f64; 3] = [1000.0, 5000.0, 10_000.0];

    /// `k` observations per size of `g(n)` times a seeded ±`noise` share.
    fn calls(g: impl Fn(f64) -> f64, k: usize, noise: f64) -> Vec<(f64, f64)> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut out = Vec::new();
        for n in SIZES {
            for _ in 0..k {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                out.push((n, g(n) * (1.0 + noise * (u - 0.5))));
            }
        }
        out
    }

    #[test]
    fn a_walk_of_the_vault_is_linear_and_a_lookup_constant() {
        let g = fit_sizes("search latency", &calls(|n| 3.0 * n, 20, 0.3)).unwrap();
        assert!(g.lo < 1.0 && g.hi > 1.0 && g.hi - g.lo < 0.5, "{g:?}");
        assert_eq!(g.class, Some(CallClass::Linear), "{g:?}");
        assert!(
            g.finding(1000.0, 10_000.0)
                .ends_with("over n = 1000 to 10000: linear in the vault (O(n))"),
            "{}",
            g.finding(1000.0, 10_000.0)
        );
        let c = fit_sizes("read latency", &calls(|_| 400.0, 20, 0.3)).unwrap();
        assert!(c.lo < 0.0 && c.hi > 0.0, "{c:?}");
        assert_eq!(c.class, Some(CallClass::Constant), "{c:?}");
        assert!(!c.class.unwrap().superlinear());
    }

    #[test]
    fn a_quadratic_call_is_superlinear_and_a_scatter_names_nothing() {
        let q = fit_sizes("x", &calls(|n| n * n, 5, 0.1)).unwrap();
        assert_eq!(q.class, Some(CallClass::Quadratic), "{q:?}");
        assert_eq!(q.class.unwrap().words(), "superlinear");
        // One point per size that bends: one degree of freedom gives a wide interval.
        let w = fit_sizes("x", &[(1000.0, 1.0), (5000.0, 9.0), (10_000.0, 3.0)]).unwrap();
        assert_eq!(w.class, None);
        assert!(w.refusal.as_deref().unwrap().contains("wide"), "{w:?}");
        // An exact line through three sizes: the interval is the resolution floor.
        let e = fit_sizes("x", &[(1000.0, 2.0), (5000.0, 10.0), (10_000.0, 20.0)]).unwrap();
        assert!((e.exponent - 1.0).abs() < 1e-9 && (e.hi - e.lo - 2.0 * RESOLUTION).abs() < 1e-9);
        assert_eq!(e.class, Some(CallClass::Linear));
    }

    #[test]
    fn too_few_sizes_or_a_non_positive_cost_are_errors() {
        let two = [(1000.0, 1.0), (1000.0, 2.0), (5000.0, 3.0)];
        assert!(matches!(
            fit_sizes("x", &two),
            Err(GrowthError::TooFew { n: 2, .. })
        ));
        let zero = [(1000.0, 1.0), (5000.0, 0.0), (10_000.0, 3.0)];
        assert!(matches!(
            fit_sizes("x", &zero),
            Err(GrowthError::NotPositive { .. })
        ));
    }
}

//! The statistics against published values (R's `?wilcox.test` example) and vectors computed
//! independently with scipy 1.x / numpy brute force (Python 3.11); each test quotes its snippet.
//!
//! Brute-force helpers used by the snippets below (a Python script when they were generated):
//! ```python
//! import numpy as np, itertools, math
//! from scipy import stats
//! def counts(n):   # exact null distribution of V by enumerating all 2^n sign patterns
//!     m=np.arange(2**n,dtype=np.int64); V=np.zeros(2**n,dtype=np.int64)
//!     for i in range(n): V+=((m>>i)&1)*(i+1)
//!     return np.bincount(V, minlength=n*(n+1)//2+1)
//! def hl(d, conf=0.95):   # R's exact HL interval, Walsh averages by brute force
//!     n=len(d); w=sorted((d[i]+d[j])/2 for i in range(n) for j in range(i,n)); M=len(w)
//!     c=counts(n); cum=np.cumsum(c)/2**n; a=1-conf
//!     qu=max(int(np.argmax(cum>=a/2*(1-1e-12))),1)
//!     return float(np.median(w)), w[qu-1], w[M-qu], 1-2*cum[qu-1]
//! def perm(d):     # exact sign-flip p on the mean
//!     o=abs(sum(d)); t=1e-12*sum(abs(v) for v in d)
//!     return sum(abs(sum(s*v for s,v in zip(ss,d)))>=o-t
//!                for ss in itertools.product((1,-1),repeat=len(d)))/2**len(d)
//! ```

use reports::stats::{
    CiMethod, PMethod, benjamini_hochberg, hodges_lehmann, order_effect, sign_flip_test,
    signed_rank_test,
};

fn close(got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "got {got}, want {want} (tol {tol})"
    );
}

/// Hollander & Wolfe (1973, p. 29) depression data, R's `?wilcox.test` example:
/// `wilcox.test(x, y, paired = TRUE, alternative = "greater")` prints V = 40, p-value = 0.01953;
/// the two-sided p is twice that, 0.03906. scipy agrees:
/// `stats.wilcoxon(x, y, method='exact')` -> pvalue=0.0390625;
/// `hl(x - y)` -> (0.46, 0.01, 0.786, 0.9609375); `perm(x - y)` -> 0.02734375.
#[test]
#[allow(clippy::approx_constant)] // 3.14 is a patient's score, not pi
fn hollander_wolfe_depression_data() {
    let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
    let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
    let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    let t = signed_rank_test(&d).unwrap();
    assert_eq!(t.v, 40.0);
    assert_eq!(t.method, PMethod::Exact);
    close(t.p_two_sided, 0.0390625, 1e-15);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 0.46, 1e-12);
    close(hl.lo, 0.01, 1e-12);
    close(hl.hi, 0.786, 1e-12);
    close(hl.conf_level_achieved, 0.9609375, 1e-15);
    assert_eq!(hl.method, CiMethod::Exact);
    let p = sign_flip_test(&d, 0, 0).unwrap();
    close(p.p_two_sided, 0.02734375, 1e-15);
}

/// Six rounds, B about 20 % slower every time:
/// `l6 = [log(b/a) for a, b in zip([100,102,98,101,99,103], [121,119,118,124,117,122])]`;
/// `stats.wilcoxon(l6, method='exact')` -> p 0.03125 (the smallest possible at n = 6);
/// `hl(l6)` -> (0.17883722213590797, 0.15415067982725836, 0.2051610487637774, 0.96875):
/// at n = 6 the interval is [min, max] of the Walsh averages, achieved level 1 - 2/64.
#[test]
fn six_rounds_all_slower() {
    let a = [100.0, 102.0, 98.0, 101.0, 99.0, 103.0];
    let b = [121.0, 119.0, 118.0, 124.0, 117.0, 122.0];
    let d: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(a, b): (&f64, &f64)| (b / a).ln())
        .collect();
    let t = signed_rank_test(&d).unwrap();
    close(t.p_two_sided, 0.03125, 1e-15);
    assert_eq!(t.v, 21.0);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 0.178_837_222_135_907_97, 1e-14);
    close(hl.lo, 0.154_150_679_827_258_36, 1e-14);
    close(hl.hi, 0.205_161_048_763_777_4, 1e-14);
    close(hl.conf_level_achieved, 0.96875, 1e-15);
    close(
        sign_flip_test(&d, 0, 0).unwrap().p_two_sided,
        0.03125,
        1e-15,
    );
}

/// Mixed signs, n = 6: `m6 = [0.031,-0.012,0.047,0.008,-0.025,0.019]`;
/// `stats.wilcoxon(m6, method='exact')` -> statistic 6 (= min(V+, V-)), p 0.4375;
/// `hl(m6)` -> (0.011, -0.025, 0.047, 0.96875); `perm(m6)` -> 0.34375.
#[test]
fn six_rounds_mixed() {
    let d = [0.031, -0.012, 0.047, 0.008, -0.025, 0.019];
    let t = signed_rank_test(&d).unwrap();
    close(t.p_two_sided, 0.4375, 1e-15);
    assert_eq!(t.v, 15.0); // V+ = 21 - 6
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 0.011, 1e-15);
    close(hl.lo, -0.025, 1e-15);
    close(hl.hi, 0.047, 1e-15);
    close(
        sign_flip_test(&d, 0, 0).unwrap().p_two_sided,
        0.34375,
        1e-15,
    );
}

/// Ties force the normal approximation with tie and continuity correction:
/// `stats.wilcoxon([1.5,-0.5,2.0,1.5,3.0,-1.5,2.5,0.5], method='approx', correction=True)`
/// -> statistic 5.5, pvalue 0.09088878524572709; `hl(t)` -> (1.25, -0.5, 2.5, 0.9609375).
#[test]
fn ties_use_corrected_normal_approximation() {
    let d = [1.5, -0.5, 2.0, 1.5, 3.0, -1.5, 2.5, 0.5];
    let t = signed_rank_test(&d).unwrap();
    assert!(t.ties);
    assert!(matches!(t.method, PMethod::Normal { .. }));
    close(t.p_two_sided, 0.090_888_785_245_727_09, 1e-10);
    assert_eq!(t.v, 36.0 - 5.5);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 1.25, 1e-15);
    close(hl.lo, -0.5, 1e-15);
    close(hl.hi, 2.5, 1e-15);
    close(hl.conf_level_achieved, 0.9609375, 1e-15);
}

/// Zeros are dropped for the test (R and scipy's zero_method='wilcox') and force the normal
/// approximation: `stats.wilcoxon(z, method='approx', correction=True, zero_method='wilcox')`
/// with z = [0.0,1.2,-0.4,2.2,0.9,0.0,1.7,-0.3,1.1] -> pvalue 0.07592696298255772.
/// The HL interval keeps all nine values (documented difference from R):
/// `hl(z)` -> (0.6499999999999999, -0.15, 1.55, 0.9609375).
#[test]
fn zeros_are_dropped_like_r() {
    let d = [0.0, 1.2, -0.4, 2.2, 0.9, 0.0, 1.7, -0.3, 1.1];
    let t = signed_rank_test(&d).unwrap();
    assert_eq!((t.n_used, t.n_zeros), (7, 2));
    close(t.p_two_sided, 0.075_926_962_982_557_72, 1e-10);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 0.65, 1e-12);
    close(hl.lo, -0.15, 1e-12);
    close(hl.hi, 1.55, 1e-12);
}

/// n = 20, exact: `rng = np.random.default_rng(5)` after drawing `big` below,
/// `e20 = np.round(rng.normal(0.03, 0.05, 20), 6)`; `stats.wilcoxon(e20, method='exact')` ->
/// pvalue 0.00830841064453125; `hl(e20)` -> (0.02824275, 0.010951, 0.0492665, 0.9515590667724609).
#[test]
fn twenty_rounds_exact() {
    let d = [
        0.07225, 0.072034, -0.000331, 0.026499, 0.097519, 0.010172, 0.03944, 0.028939, 0.060461,
        0.011755, 0.022382, 0.042119, 0.035151, -0.013249, 0.074789, -0.034924, -0.030056,
        -0.034125, 0.078349, 0.01197,
    ];
    let t = signed_rank_test(&d).unwrap();
    assert_eq!(t.method, PMethod::Exact);
    close(t.p_two_sided, 0.008_308_410_644_531_25, 1e-15);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    close(hl.estimate, 0.028_242_75, 1e-12);
    close(hl.lo, 0.010951, 1e-12);
    close(hl.hi, 0.049_266_5, 1e-12);
    close(hl.conf_level_achieved, 0.951_559_066_772_460_9, 1e-12);
}

/// n = 60 > 49: normal approximations. `big = np.round(np.random.default_rng(5).normal(0.02,
/// 0.05, 60), 6)`; `stats.wilcoxon(big, method='approx', correction=True)` -> statistic 755,
/// pvalue 0.24032466564725907. HL by Hollander & Wolfe eq. 3.25 in Python:
/// `C = floor(mu - norm.ppf(0.975)*sg)` = 648; `(median(w), w[C-1], w[M-C])` ->
/// (0.007637, -0.0053715, 0.02061); achieved `1-2*norm.cdf((C-1+0.5-mu)/sg)` = 0.9510731772468273.
#[test]
fn sixty_rounds_normal() {
    let d = [
        -0.020097, -0.046218, 0.007582, 0.041022, 0.076802, 0.025485, -0.007632, -0.019239,
        0.057437, 0.101739, 0.033638, -0.041666, -0.027913, 0.100001, 0.030144, -0.066607,
        0.015815, -0.038161, -0.011464, -0.0044, -0.015666, 0.047669, 0.016846, -0.009472,
        0.040482, 0.061493, -0.062151, 0.007163, -0.029037, 0.011342, -0.044471, 0.021035,
        0.018106, 0.004783, -0.032396, 0.00019, -0.034566, -0.04776, 0.031239, -0.035467, 0.078515,
        0.055829, -0.079891, 0.033606, -0.035086, 0.021653, 0.022182, -0.079421, 0.008329, 0.00721,
        0.0681, -0.039072, 0.056902, -0.034949, 0.003435, -0.022024, 0.092437, 0.048411, 0.141587,
        0.052096,
    ];
    let t = signed_rank_test(&d).unwrap();
    assert!(matches!(t.method, PMethod::Normal { .. }));
    close(t.p_two_sided, 0.240_324_665_647_259_07, 1e-9);
    let hl = hodges_lehmann(&d, 0.95).unwrap();
    assert_eq!(hl.method, CiMethod::Normal);
    close(hl.estimate, 0.007637, 1e-12);
    close(hl.lo, -0.005_371_5, 1e-12);
    close(hl.hi, 0.02061, 1e-12);
    close(hl.conf_level_achieved, 0.951_073_177_246_827_3, 1e-9);
    // Monte Carlo sign-flip (n > 16) agrees with the Wilcoxon result in magnitude.
    let p = sign_flip_test(&d, 20_000, 1).unwrap();
    assert!((0.1..0.4).contains(&p.p_two_sided), "{}", p.p_two_sided);
}

/// Order effect by exhaustive relabelling:
/// `d = [0.05,0.02,0.04,0.01,0.06,0.00,0.03,0.02]`, A-first = [1,0,1,0,1,0,0,1];
/// `oe(d, f)` over `itertools.combinations(range(8), 4)` -> (0.0275, 0.08571428571428572).
#[test]
fn order_effect_by_enumeration() {
    let d = [0.05, 0.02, 0.04, 0.01, 0.06, 0.00, 0.03, 0.02];
    let f = [true, false, true, false, true, false, false, true];
    let e = order_effect(&d, &f, 0, 0).unwrap().unwrap();
    close(e.difference, 0.0275, 1e-12);
    close(e.p_two_sided, 0.085_714_285_714_285_72, 1e-12);
}

/// R: `p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.5), "BH")` = 0.025 0.050 0.050 0.025 0.500;
/// `stats.false_discovery_control([...])` gives the same.
#[test]
fn benjamini_hochberg_matches_r() {
    let adj = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005, 0.5]).unwrap();
    for (a, w) in adj.iter().zip([0.025, 0.05, 0.05, 0.025, 0.5]) {
        close(*a, w, 1e-12);
    }
}

mod properties {
    use proptest::prelude::*;
    use reports::stats::{hodges_lehmann, sign_flip_test, signed_rank_test};

    proptest! {
        #[test]
        fn hl_interval_contains_estimate(d in prop::collection::vec(-1.0f64..1.0, 1..40)) {
            let hl = hodges_lehmann(&d, 0.95).unwrap();
            prop_assert!(hl.lo <= hl.estimate && hl.estimate <= hl.hi);
            // n = 1 gives the degenerate interval [d, d] at level 1 - 2 * 1/2 = 0.
            prop_assert!((0.0..=1.0).contains(&hl.conf_level_achieved));
        }

        #[test]
        fn p_values_in_unit_interval(d in prop::collection::vec(-1.0f64..1.0, 1..24), seed in any::<u64>()) {
            let p = sign_flip_test(&d, 2_000, seed).unwrap().p_two_sided;
            prop_assert!(p > 0.0 && p <= 1.0);
            let w = signed_rank_test(&d).unwrap().p_two_sided;
            prop_assert!(w > 0.0 && w <= 1.0);
        }

        /// Test–interval duality: the exact interval excludes 0 exactly when the exact test
        /// rejects at 1 − achieved level (untied, non-zero data; distinct magnitudes by
        /// construction: i + fraction, with a random sign).
        #[test]
        fn exact_interval_inverts_the_exact_test(
            parts in prop::collection::vec((0.01f64..0.99, any::<bool>()), 5..25),
        ) {
            let d: Vec<f64> = parts
                .iter()
                .enumerate()
                .map(|(i, (f, neg))| if *neg { -(i as f64 + f) } else { i as f64 + f })
                .collect();
            let t = signed_rank_test(&d).unwrap();
            let hl = hodges_lehmann(&d, 0.95).unwrap();
            prop_assume!(hl.lo != 0.0 && hl.hi != 0.0);
            let excludes = hl.lo > 0.0 || hl.hi < 0.0;
            let rejects = t.p_two_sided <= 1.0 - hl.conf_level_achieved + 1e-12;
            prop_assert_eq!(excludes, rejects, "{:?} {:?}", t, hl);
        }

        #[test]
        fn negating_differences_mirrors_everything(d in prop::collection::vec(-1.0f64..1.0, 1..30)) {
            let neg: Vec<f64> = d.iter().map(|x| -x).collect();
            let (a, b) = (hodges_lehmann(&d, 0.95).unwrap(), hodges_lehmann(&neg, 0.95).unwrap());
            prop_assert!((a.estimate + b.estimate).abs() < 1e-12);
            prop_assert!((a.lo + b.hi).abs() < 1e-12 && (a.hi + b.lo).abs() < 1e-12);
            let (p, q) = (signed_rank_test(&d).unwrap(), signed_rank_test(&neg).unwrap());
            prop_assert!((p.p_two_sided - q.p_two_sided).abs() < 1e-12);
        }
    }
}

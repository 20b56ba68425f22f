//! Seeded random streams and machine-independent sampling (uniform, normal, log-normal).
//!
//! Every random choice in a vault comes from `ChaCha8Rng::seed_from_u64(seed)` with a
//! per-purpose stream (`set_stream`), so adding one axis (say PNG attachments) never shifts
//! the bytes of another (the notes). Transcendental functions from the platform's libm are
//! not guaranteed to round identically on every machine, so `ln` and `exp` are computed here
//! with plain IEEE-754 `+ - * /` and `sqrt`, which are exact-rounded everywhere.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The purpose of a random stream; the high 32 bits of the ChaCha stream number.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub(crate) enum Purpose {
    /// Folder tree, note names, sizes, duplicate groups, index notes.
    NotePlan = 1,
    /// The text of note `i`.
    NoteBody = 2,
    /// Which attachments exist, their names and sizes.
    AttachmentPlan = 3,
    /// The bytes of attachment `i`.
    AttachmentBody = 4,
    /// Which attachments note `i` embeds.
    Embeds = 5,
    /// Hazard files and `.obsidian/` config.
    Hazards = 6,
    /// The edit stream.
    Edits = 7,
    /// Planted queries: phrases, their notes and decoys (`plant.rs`).
    Plant = 8,
}

/// A generator for one purpose and one item (`index`) of the vault made from `seed`.
pub(crate) fn stream(seed: u64, purpose: Purpose, index: u32) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((purpose as u64) << 32) | u64::from(index));
    rng
}

/// Uniform integer in `0..n` (n > 0) by widening multiply (Lemire), independent of rand's
/// sampling algorithms so a rand upgrade cannot change it.
pub(crate) fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    debug_assert!(n > 0);
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// Uniform integer in `lo..=hi`.
pub(crate) fn between(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    lo + below(rng, (hi - lo + 1) as usize) as u64
}

/// Uniform in the open interval (0, 1).
pub(crate) fn unit(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// True with probability `p`.
pub(crate) fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    unit(rng) < p
}

/// Picks one element of a non-empty slice.
pub(crate) fn pick<T: Copy>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[below(rng, items.len())]
}

/// A log-normal sample: `median * exp(sigma * z)`, z standard normal.
pub(crate) fn log_normal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    median * exp(sigma * normal_quantile(unit(rng)))
}

/// A count with the given mean whose distribution is geometric (P(0) = 1/(1+mean)): real
/// vaults' links per note have mean 2.1, median 1, p90 5 (docs/src/vaults/real-vaults.md), which a geometric
/// with mean 2.1 reproduces (median 1, p90 5). Capped at `cap`.
pub(crate) fn geometric(rng: &mut ChaCha8Rng, mean: f64, cap: u32) -> u32 {
    let p_more = mean / (1.0 + mean);
    let mut n = 0;
    while n < cap && chance(rng, p_more) {
        n += 1;
    }
    n
}

const LN2: f64 = std::f64::consts::LN_2;

/// e^x using only exactly-rounded operations (range reduction by ln 2, then Taylor).
pub(crate) fn exp(x: f64) -> f64 {
    let k = (x / LN2).round();
    let r = x - k * LN2;
    let mut term = 1.0;
    let mut sum = 1.0;
    for i in 1..=18 {
        term *= r / f64::from(i);
        sum += term;
    }
    let k = k.clamp(-1000.0, 1000.0) as i64;
    sum * f64::from_bits(((k + 1023) as u64) << 52)
}

/// Natural log of a positive normal number using only exactly-rounded operations.
pub(crate) fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    // ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.172: 14 odd terms reach 1e-22.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    for k in 0..14 {
        sum += term / f64::from(2 * k + 1);
        term *= s2;
    }
    2.0 * sum + e as f64 * LN2
}

/// The standard normal quantile by Peter Acklam's rational approximation (relative error
/// 1.15e-9), which needs only `ln` and `sqrt`.
pub(crate) fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * ln(p)).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * ln(1.0 - p)).sqrt())
    }
}

/// Fills `buf` with the seeded byte stream, always in whole 64-byte ChaCha blocks so the
/// bytes do not depend on how a caller slices its reads.
pub(crate) fn fill_blocks(rng: &mut ChaCha8Rng, buf: &mut [u8]) {
    debug_assert!(buf.len().is_multiple_of(64));
    rng.fill_bytes(buf);
}

/// `YYYY-MM-DD` for `days` after 2019-01-01 (no clock is read).
pub(crate) fn date(days: u32) -> String {
    // 2019-01-01 is day 17,897 of the Unix epoch.
    let (y, m, d) = civil_from_days(i64::from(days) + 17_897);
    format!("{y:04}-{m:02}-{d:02}")
}

/// (year, month, day) of a day count since 1970-01-01: the contract's one civil date.
pub use contract::time::civil_from_days;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn math_matches_std_closely() {
        for &x in &[-20.0, -3.3, -0.5, 0.0, 0.7, 1.0, 2.5, 10.0, 40.0] {
            let (a, b) = (exp(x), f64::exp(x));
            assert!(((a - b) / b).abs() < 1e-13, "exp({x}) = {a}, std {b}");
        }
        for &x in &[1e-16, 0.001, 0.3, 1.0, 1.5, 2.0, 7.0, 1e6] {
            let (a, b) = (ln(x), f64::ln(x));
            assert!((a - b).abs() < 1e-13, "ln({x}) = {a}, std {b}");
        }
    }

    #[test]
    fn normal_quantile_known_points() {
        assert!(normal_quantile(0.5).abs() < 1e-9);
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.01) + 2.326_347_874).abs() < 1e-8);
        assert!((normal_quantile(0.9) - 1.281_551_566).abs() < 1e-8);
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(date(0), "2019-01-01");
        assert_eq!(date(31 + 28), "2019-03-01");
        assert_eq!(date(365 + 31 + 28), "2020-02-29");
    }

    #[test]
    fn streams_are_independent_and_repeatable() {
        let a: Vec<u64> = (0..4)
            .map(|_| stream(7, Purpose::NoteBody, 3).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            stream(7, Purpose::NoteBody, 3).next_u64(),
            stream(7, Purpose::NoteBody, 4).next_u64()
        );
        assert_ne!(
            stream(7, Purpose::NoteBody, 3).next_u64(),
            stream(8, Purpose::NoteBody, 3).next_u64()
        );
    }
}

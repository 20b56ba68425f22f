//! How a per-file cost grows with the vault: a checkpointed series (the cost per file in each
//! window of a cold push, against the files already on the server) fitted on log–log axes for
//! its exponent with a t interval, and a complexity class for the whole import chosen as
//! Google Benchmark's `Complexity()` chooses one, or a refusal to name one.
//!
//! The class choice follows Google Benchmark's `src/complexity.cc` (`MinimalLeastSq`): for
//! each candidate curve g it fits `t = c·g(N)` by least squares without an intercept
//! (c = Σ t·g / Σ g²), scores the fit by its root-mean-square residual divided by the mean of
//! the observed values, starts from O(1) and keeps whichever candidate scores lowest. Here the
//! observations are per-file costs over windows, so each candidate is the whole import's curve
//! G averaged over the window: (G(n₁) − G(n₀)) / (n₁ − n₀). An import that is O(n²) as a whole
//! then costs ∝ n per file, O(n log n) ∝ log n, O(n) a constant and O(log n) ∝ 1/n. A whole
//! import in O(1) costs nothing per file and has no per-file curve, so it is not a candidate.
//!
//! Where the candidates fit about equally (the runner-up's normalised RMS within
//! [`TIE_RATIO`] of the best) or the exponent's interval is wider than [`WIDE_INTERVAL`], no
//! class is named: the line says why instead. The big_O package and the `big_o` crate go
//! further (an intercept, a confidence); the interval on the exponent plays that part here.

use serde::{Deserialize, Serialize};

pub mod sizes;

/// The interval's level.
pub const LEVEL: f64 = 0.95;
/// The runner-up class fits "about equally" when its normalised RMS is below this multiple
/// of the best's: then the data cannot tell the two apart and no class is named. A tenth is a
/// judgement, not a measured figure; the noise test below checks that ten windows at ±5 %
/// noise still name their class past it.
pub const TIE_RATIO: f64 = 1.10;
/// An exponent interval wider than this (in powers of n) cannot tell a constant per-file cost
/// from a linear one, which are a whole power apart; half a power leaves them apart.
pub const WIDE_INTERVAL: f64 = 0.5;
/// The least half-width of the exponent's interval. The t interval only sees the windows'
/// scatter around a straight line, but a per-file cost is rarely a pure power of n: a constant
/// part bends the line. The reference server's `--inject-reindex` re-reads n + 1 versions per
/// post, whose slope over 200 to 2,000 files is 0.998, with a t interval of ±0.002 that
/// excludes 1. Ten windows over one decade of n do not resolve an exponent finer than this.
pub const RESOLUTION: f64 = 0.05;
/// A superlinear class is named only if the interval's low end lets the per-file cost grow by
/// at least this share over the windows' range of n: a drift smaller than that (a file
/// system's directory, an allocator) is not what a user acts on. On a busy 2-core machine the
/// plain reference server's time per file rose by about 10 % over a 2,000-note import; a
/// quadratic import's grows several-fold over the same range.
pub const MATERIAL_GROWTH: f64 = 0.25;
/// The first window is left out of the fit when at least this many others remain: it holds
/// the server's one-time costs (first connections, caches and tables created), which would
/// read as a cost falling with n.
pub const DROP_FIRST_FROM: usize = 4;

/// The whole import's complexity class (a per-file series is the curve averaged over windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// O(log n) for the whole import: per file ∝ 1/n.
    LogN,
    /// O(n): a constant cost per file.
    N,
    /// O(n log n): per file ∝ log n.
    NLogN,
    /// O(n²): per file ∝ n.
    NSquared,
}

impl Class {
    pub const ALL: [Class; 4] = [Class::LogN, Class::N, Class::NLogN, Class::NSquared];

    /// The whole import's class, as Google Benchmark prints it.
    pub fn import(self) -> &'static str {
        match self {
            Class::LogN => "O(log n)",
            Class::N => "O(n)",
            Class::NLogN => "O(n log n)",
            Class::NSquared => "O(n²)",
        }
    }

    /// The same class per file.
    pub fn per_file(self) -> &'static str {
        match self {
            Class::LogN => "O(1/n)",
            Class::N => "O(1)",
            Class::NLogN => "O(log n)",
            Class::NSquared => "O(n)",
        }
    }

    /// The import in words, for the one-line finding.
    pub fn words(self) -> &'static str {
        match self {
            Class::LogN => "logarithmic",
            Class::N => "linear",
            Class::NLogN => "n log n",
            Class::NSquared => "quadratic",
        }
    }

    /// Whether the whole import grows faster than the vault (the finding a user acts on).
    pub fn superlinear(self) -> bool {
        matches!(self, Class::NLogN | Class::NSquared)
    }

    /// The whole import's curve G(n).
    fn total(self, n: f64) -> f64 {
        match self {
            Class::LogN => n.log2(),
            Class::N => n,
            Class::NLogN => n * n.log2(),
            Class::NSquared => n * n,
        }
    }

    /// G averaged over the files (n0, n1]: what one file of that window costs under G.
    fn per_window(self, n0: f64, n1: f64) -> f64 {
        // log2(0) is -inf: a first window from 0 starts its O(log n) curve at n = 1.
        let lo = if self == Class::LogN { n0.max(1.0) } else { n0 };
        (self.total(n1) - self.total(lo)) / (n1 - n0)
    }
}

/// One checkpoint window: the files on the server when it began and ended, and the cost per
/// file over it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub from: u64,
    pub to: u64,
    pub per_file: f64,
}

impl Window {
    /// The window's vault size on the log–log axis: the midpoint of its files.
    pub fn n(&self) -> f64 {
        (self.from as f64 + self.to as f64) / 2.0
    }
}

/// One candidate's least-squares fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassFit {
    pub class: Class,
    pub coef: f64,
    /// RMS residual over the mean of the observations (Google Benchmark's `rms`).
    pub rms: f64,
}

/// The fit of one per-file series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    /// What the series is, in words ("server CPU").
    pub what: String,
    /// Windows fitted (the first may have been left out, [`DROP_FIRST_FROM`]).
    pub windows: usize,
    /// Per-file cost ∝ n^exponent, the OLS slope of ln cost on ln n.
    pub exponent: f64,
    pub lo: f64,
    pub hi: f64,
    /// Every candidate's fit, best first.
    pub fits: Vec<ClassFit>,
    /// The class named, or `None` with [`Growth::refusal`] saying why.
    pub class: Option<Class>,
    pub refusal: Option<String>,
}

/// Why a series has no fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrowthError {
    #[error("{what}: {n} checkpoint window(s), need at least 3 for an interval")]
    TooFew { what: String, n: usize },
    #[error("{what}: a window has no positive cost per file (a log–log fit needs one)")]
    NotPositive { what: String },
    #[error("{what}: a window is empty or out of order")]
    BadWindow { what: String },
}

impl Growth {
    /// Whether this fit names a class that grows faster than the vault.
    pub fn superlinear(&self) -> bool {
        self.class.is_some_and(Class::superlinear) && self.lo > 0.0
    }

    /// The total import's exponent: the per-file exponent plus one (a positive number for any
    /// import that does not get cheaper as it goes, so A/B rounds can take its log ratio).
    pub fn import_exponent(&self) -> f64 {
        self.exponent + 1.0
    }

    /// One line: "server CPU per file grows as n^0.97 [0.90, 1.04]: the import is quadratic
    /// in the vault".
    pub fn finding(&self) -> String {
        let head = format!(
            "{} per file grows as n^{:.2} [{:.2}, {:.2}]",
            self.what, self.exponent, self.lo, self.hi
        );
        match (self.class, &self.refusal) {
            (Some(c), _) => format!(
                "{head}: the import is {} in the vault ({})",
                c.words(),
                c.import()
            ),
            (None, Some(why)) => format!("{head}: no class named ({why})"),
            (None, None) => head,
        }
    }
}

/// Fits `windows` (in checkpoint order). The series must have at least three windows after
/// the first is left out, every one non-empty, in order and with a positive cost per file.
pub fn fit(what: &str, windows: &[Window]) -> Result<Growth, GrowthError> {
    let ws = if windows.len() > DROP_FIRST_FROM {
        &windows[1..]
    } else {
        windows
    };
    if ws.len() < 3 {
        return Err(GrowthError::TooFew {
            what: what.to_owned(),
            n: ws.len(),
        });
    }
    if ws.iter().any(|w| w.to <= w.from) || ws.windows(2).any(|p| p[1].from < p[0].to) {
        return Err(GrowthError::BadWindow {
            what: what.to_owned(),
        });
    }
    if ws
        .iter()
        .any(|w| !(w.per_file > 0.0 && w.per_file.is_finite()))
    {
        return Err(GrowthError::NotPositive {
            what: what.to_owned(),
        });
    }
    let x: Vec<f64> = ws.iter().map(|w| w.n().ln()).collect();
    let y: Vec<f64> = ws.iter().map(|w| w.per_file.ln()).collect();
    let (exponent, half) = ols_slope(&x, &y, LEVEL);
    let half = half.max(RESOLUTION);
    let span = ws[ws.len() - 1].n() / ws[0].n();
    let mut fits: Vec<ClassFit> = Class::ALL.iter().map(|&c| least_sq(ws, c)).collect();
    fits.sort_by(|a, b| a.rms.total_cmp(&b.rms));
    let (lo, hi) = (exponent - half, exponent + half);
    let refusal = if hi - lo > WIDE_INTERVAL {
        Some(format!(
            "the exponent's interval is {:.2} wide, more than {WIDE_INTERVAL}",
            hi - lo
        ))
    } else if fits[1].rms < fits[0].rms * TIE_RATIO && fits[0].rms > 1e-9 {
        Some(format!(
            "{} and {} fit about equally",
            fits[0].class.import(),
            fits[1].class.import()
        ))
    } else if fits[0].class.superlinear() && span.powf(lo) < 1.0 + MATERIAL_GROWTH {
        Some(format!(
            "{} fits best, but per file it grows by at most {:.0} % over n = {:.0} to {:.0}, \
             less than the {:.0} % a superlinear finding needs",
            fits[0].class.import(),
            (span.powf(lo.max(0.0)) - 1.0) * 100.0,
            ws[0].n(),
            ws[ws.len() - 1].n(),
            MATERIAL_GROWTH * 100.0
        ))
    } else {
        None
    };
    Ok(Growth {
        what: what.to_owned(),
        windows: ws.len(),
        exponent,
        lo,
        hi,
        class: refusal.is_none().then_some(fits[0].class),
        fits,
        refusal,
    })
}

/// Google Benchmark's `MinimalLeastSq` for one curve: c = Σ t·g / Σ g², normalised RMS.
fn least_sq(ws: &[Window], class: Class) -> ClassFit {
    let g: Vec<f64> = ws
        .iter()
        .map(|w| class.per_window(w.from as f64, w.to as f64))
        .collect();
    let t: Vec<f64> = ws.iter().map(|w| w.per_file).collect();
    let sgg: f64 = g.iter().map(|v| v * v).sum();
    let stg: f64 = t.iter().zip(&g).map(|(a, b)| a * b).sum();
    let coef = if sgg > 0.0 { stg / sgg } else { 0.0 };
    let n = t.len() as f64;
    let ss: f64 = t.iter().zip(&g).map(|(a, b)| (a - coef * b).powi(2)).sum();
    let mean = t.iter().sum::<f64>() / n;
    ClassFit {
        class,
        coef,
        rms: (ss / n).sqrt() / mean,
    }
}

/// The OLS slope of `y` on `x` and the half-width of its two-sided `level` t interval
/// (n − 2 degrees of freedom). `x` must hold at least 3 values, not all equal.
fn ols_slope(x: &[f64], y: &[f64], level: f64) -> (f64, f64) {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    if sxx <= 0.0 {
        return (0.0, f64::INFINITY);
    }
    let slope = sxy / sxx;
    let ssr: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (b - my - slope * (a - mx)).powi(2))
        .sum();
    let se = (ssr / (n - 2.0) / sxx).sqrt();
    let t = StudentsT::new(0.0, 1.0, n - 2.0)
        .map(|d| d.inverse_cdf(1.0 - (1.0 - level) / 2.0))
        .unwrap_or(f64::INFINITY);
    (slope, t * se)
}

/// Windows from cumulative readings at checkpoints: `at` holds (files, cumulative cost) in
/// order, starting with the push's start; each window's per-file cost is the difference over
/// the files between them.
pub fn windows_from_cumulative(at: &[(u64, f64)]) -> Vec<Window> {
    at.windows(2)
        .filter(|p| p[1].0 > p[0].0)
        .map(|p| Window {
            from: p[0].0,
            to: p[1].0,
            per_file: (p[1].1 - p[0].1) / (p[1].0 - p[0].0) as f64,
        })
        .collect()
}

/// One per-file series of a checkpointed phase and what its fit found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The series' key segment: `log.NAME`, `server_cpu` or `time`.
    pub series: String,
    /// The fit, where the series has one.
    pub growth: Option<Growth>,
    /// The one line the recording and every report show.
    pub line: String,
}

/// Per-file series of a checkpointed phase, read from its keys: `PHASE.checkpoint.NNNNNNN.`
/// `log.NAME_per_file`, and from a cost sample `server_instructions_per_file` and
/// `server_syscalls_per_file` (counts first: a count's growth is the evidence, time confirms
/// it), `server_cpu_us_per_file`, and `files_per_s` (as time per file). Each is fitted over its
/// checkpoints, the first window starting at no files.
pub fn findings<'a>(phase: &str, keys: impl IntoIterator<Item = (&'a str, f64)>) -> Vec<Finding> {
    use std::collections::BTreeMap;
    let head = format!("{phase}.checkpoint.");
    // series -> files -> per-file value
    let mut by: BTreeMap<(u8, String), BTreeMap<u64, f64>> = BTreeMap::new();
    for (k, v) in keys {
        let Some(rest) = k.strip_prefix(&head) else {
            continue;
        };
        let Some((files, stat)) = rest.split_once('.') else {
            continue;
        };
        let Ok(files) = files.parse::<u64>() else {
            continue;
        };
        let (rank, series, per_file) = if let Some(n) = stat
            .strip_prefix("log.")
            .and_then(|s| s.strip_suffix("_per_file"))
        {
            (0, format!("log.{n}"), v)
        } else if stat == "server_instructions_per_file" {
            (0, "server_instructions".to_owned(), v)
        } else if stat == "server_syscalls_per_file" {
            (0, "server_syscalls".to_owned(), v)
        } else if stat == "server_cpu_us_per_file" {
            (1, "server_cpu".to_owned(), v)
        } else if stat == "files_per_s" && v > 0.0 {
            (2, "time".to_owned(), 1e6 / v)
        } else {
            continue;
        };
        by.entry((rank, series))
            .or_default()
            .insert(files, per_file);
    }
    by.into_iter()
        .map(|((_, series), pts)| {
            let what = match series.as_str() {
                "server_cpu" => "server CPU".to_owned(),
                "server_instructions" => "server instructions".to_owned(),
                "server_syscalls" => "server syscalls (traced)".to_owned(),
                "time" => "time".to_owned(),
                s => format!("log {}", s.trim_start_matches("log.")),
            };
            let mut from = 0;
            let ws: Vec<Window> = pts
                .iter()
                .map(|(&to, &per_file)| {
                    let w = Window { from, to, per_file };
                    from = to;
                    w
                })
                .collect();
            if !ws.is_empty() && ws.iter().all(|w| w.per_file == 0.0) {
                return Finding {
                    line: format!("{what} per file is 0 at every checkpoint: no growth"),
                    series,
                    growth: None,
                };
            }
            match fit(&what, &ws) {
                Ok(g) => Finding {
                    line: g.finding(),
                    series,
                    growth: Some(g),
                },
                Err(e) => Finding {
                    line: format!("no fit: {e}"),
                    series,
                    growth: None,
                },
            }
        })
        .collect()
}

/// The phases with checkpoint keys among `keys`, in key order.
pub fn checkpointed_phases<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        if let Some((phase, _)) = k.split_once(".checkpoint.")
            && !phase.contains('.')
            && !out.iter().any(|p| p == phase)
        {
            out.push(phase.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Ten windows of `every` files whose total cost follows `g` exactly.
    fn series(every: u64, g: impl Fn(f64) -> f64) -> Vec<Window> {
        let at: Vec<(u64, f64)> = (0..=10)
            .map(|i| (i * every, if i == 0 { 0.0 } else { g((i * every) as f64) }))
            .collect();
        windows_from_cumulative(&at)
    }

    #[test]
    fn a_quadratic_import_costs_n_per_file_and_is_named_quadratic() {
        let g = fit("server CPU", &series(200, |n| 3e-6 * n * n)).unwrap();
        // Per file in window (a, b]: 3e-6·(a + b) = 6e-6 · midpoint, so the slope is exactly 1.
        assert!((g.exponent - 1.0).abs() < 1e-9, "{g:?}");
        // An exact series: the interval is the resolution floor.
        assert!((g.hi - g.lo - 2.0 * RESOLUTION).abs() < 1e-9);
        assert_eq!(g.class, Some(Class::NSquared));
        assert!(g.superlinear());
        assert_eq!(
            g.finding(),
            "server CPU per file grows as n^1.00 [0.95, 1.05]: the import is quadratic in the \
             vault (O(n²))"
        );
    }

    #[test]
    fn a_linear_import_is_flat_per_file_and_not_superlinear() {
        let g = fit("server CPU", &series(200, |n| 0.004 * n)).unwrap();
        assert!(g.exponent.abs() < 1e-9);
        assert_eq!(g.class, Some(Class::N));
        assert!(!g.superlinear());
        assert!(g.lo <= 0.0 && g.hi >= 0.0);
    }

    #[test]
    fn n_log_n_and_log_n_are_told_from_their_neighbours() {
        // Over one decade an O(n log n) import's cost per file grows by only about 20 %: it
        // fits best, but is not material enough to name.
        let g = fit("x", &series(1000, |n| n * n.log2())).unwrap();
        assert_eq!(g.fits[0].class, Class::NLogN, "{g:?}");
        assert_eq!(g.class, None, "{g:?}");
        assert!(!g.superlinear());
        let g = fit("x", &series(1000, |n| 50.0 * n.log2())).unwrap();
        assert_eq!(g.class, Some(Class::LogN), "{g:?}");
        assert!(g.exponent < -0.5);
    }

    #[test]
    fn the_best_fit_is_the_one_google_benchmark_would_pick() {
        // Normalised RMS of the exact curve is 0; every other candidate's is positive.
        let g = fit("x", &series(200, |n| n * n)).unwrap();
        assert!(g.fits[0].rms < 1e-12);
        assert_eq!(g.fits[0].class, Class::NSquared);
        assert!((g.fits[0].coef - 1.0).abs() < 1e-12);
        assert!(g.fits[1..].iter().all(|f| f.rms > 0.05));
    }

    #[test]
    fn a_noisy_quadratic_keeps_an_interval_around_one_and_a_noisy_linear_around_zero() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut noisy = |g: &dyn Fn(f64) -> f64| {
            let mut ws = series(200, g);
            for w in &mut ws {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                w.per_file *= 1.0 + 0.1 * (u - 0.5);
            }
            ws
        };
        let q = fit("x", &noisy(&|n| n * n)).unwrap();
        assert!(q.lo < 1.0 && q.hi > 1.0 && q.lo > 0.8, "{q:?}");
        assert_eq!(q.class, Some(Class::NSquared));
        let l = fit("x", &noisy(&|n| 5.0 * n)).unwrap();
        assert!(l.lo < 0.0 && l.hi > 0.0, "{l:?}");
        assert!(!l.superlinear());
    }

    #[test]
    fn a_wide_interval_or_a_tie_names_no_class() {
        // Wildly alternating costs: the slope's interval is wide.
        let ws: Vec<Window> = (0..6)
            .map(|i| Window {
                from: i * 100,
                to: (i + 1) * 100,
                per_file: if i % 2 == 0 { 1.0 } else { 20.0 },
            })
            .collect();
        let g = fit("x", &ws).unwrap();
        assert_eq!(g.class, None);
        assert!(g.refusal.as_deref().unwrap().contains("wide"), "{g:?}");
        assert!(g.finding().contains("no class named"));
    }

    #[test]
    fn findings_read_a_phase_s_checkpoint_keys_counts_first() {
        let mut keys = Vec::new();
        for i in 1..=6u64 {
            let n = i * 200;
            let mid = n as f64 - 100.0;
            keys.push((
                format!("cold_push.checkpoint.{n:07}.log.reindex_per_file"),
                mid,
            ));
            keys.push((
                format!("cold_push.checkpoint.{n:07}.server_cpu_us_per_file"),
                40.0,
            ));
            keys.push((format!("cold_push.checkpoint.{n:07}.files_per_s"), 100.0));
            keys.push((
                format!("cold_push.checkpoint.{n:07}.log.quiet_per_file"),
                0.0,
            ));
        }
        keys.push(("cold_push.wall_ms".to_owned(), 1.0));
        let f = findings("cold_push", keys.iter().map(|(k, v)| (k.as_str(), *v)));
        let series: Vec<&str> = f.iter().map(|x| x.series.as_str()).collect();
        assert_eq!(series, ["log.quiet", "log.reindex", "server_cpu", "time"]);
        assert_eq!(
            f[0].line,
            "log quiet per file is 0 at every checkpoint: no growth"
        );
        let re = f[1].growth.as_ref().unwrap();
        assert_eq!(re.class, Some(Class::NSquared));
        assert!(
            f[1].line.ends_with("quadratic in the vault (O(n²))"),
            "{}",
            f[1].line
        );
        assert_eq!(f[2].growth.as_ref().unwrap().class, Some(Class::N));
        assert_eq!(
            checkpointed_phases(keys.iter().map(|(k, _)| k.as_str())),
            vec!["cold_push".to_string()]
        );
    }

    #[test]
    fn a_slight_drift_is_not_called_superlinear() {
        // Per file ∝ n^0.1, as the plain reference server's time per file on a busy machine:
        // O(n log n) fits best and the slope is above 0, yet the cost grows by about 20 %.
        let g = fit("time", &series(200, |n| n.powf(1.1))).unwrap();
        assert!(g.lo > 0.0, "{g:?}");
        assert_eq!(g.fits[0].class, Class::NLogN, "{g:?}");
        assert_eq!(g.class, None, "{g:?}");
        assert!(!g.superlinear());
        assert!(
            g.refusal.as_deref().unwrap().contains("less than the 25 %"),
            "{g:?}"
        );
    }

    #[test]
    fn too_few_or_non_positive_windows_are_errors() {
        let ws = series(200, |n| n)[..3].to_vec();
        assert!(matches!(
            fit("x", &ws[..2]),
            Err(GrowthError::TooFew { .. })
        ));
        let mut ws = series(200, |n| n);
        ws[3].per_file = 0.0;
        assert!(matches!(
            fit("x", &ws),
            Err(GrowthError::NotPositive { .. })
        ));
    }
}

//! Change points per key over a history, named as a step, a drift or a machine change.
//!
//! For every key (and every calibration channel), over the entries that have it:
//! 1. E-Divisive means with a permutation test finds the candidate splits (`edivisive`).
//! 2. Each split's size is the Hodges–Lehmann shift between the segments either side of it
//!    (bounded by the neighbouring splits), in percent of the level before. A split whose
//!    interval holds zero, or whose size is below the key's minimum effect, is dropped, the
//!    weakest first, and its neighbours are measured again (the merge step of Fleming et al.,
//!    "Hunter: Using Change Point Detection to Hunt for Performance Regressions", ICPE 2023,
//!    with an effect floor per class in place of Hunter's one magnitude).
//! 3. Neighbouring splits of one direction (no machine change between them) are a run; the
//!    run is one drift, from its first entry to its last, when a line explains its entries at
//!    least as well as its levels do by the Bayesian information criterion (a line has two
//!    parameters; `k` splits have `k + 1` levels and `k` positions), else each split is a step.
//! 4. A split of a key that depends on a calibration channel (timing and resource keys,
//!    `comparability::depends_on`) is a machine change when a channel's median moved beyond
//!    its tolerance (`comparability::DEFAULT_TOLERANCE`) between the same two segments. The
//!    channels' own splits are reported as machine changes under `calibration.<channel>`.
//!
//! Cost and exact keys are nearly deterministic, so their class floors are small (any change
//! for an exact key, 1 % for a cost key: the A/A spread of instruction counts was 0.56 % over
//! 60 cost samples, docs/src/measured.md "The cost keys"); timing and resource keys get 5 %,
//! `compare`'s default threshold. Every key's floor is at least half its typical recorded
//! spread (the median over entries of `(high − low) / value`): a change smaller than one
//! recording's own spread is not told from noise. That lifts the floor of a cost key whose
//! cost samples disagree (a phase whose work depends on timing, such as a pull that batches)
//! and of the syscall counts strace gives, and leaves a truly exact key at zero.

use std::collections::BTreeMap;

use contract::ab::Interval;
use contract::gate::KERNELS;
use contract::history::HistoryEntry;
use contract::schema::{Better, FORMAT_VERSION, MetricClass};
use contract::trend::{
    CHANNEL_PREFIX, EntryRef, KIND_TREND, PointKind, TrendPoint, TrendResult, TrendSettings,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::edivisive::{self, Search, Split};
use super::fit;
use crate::comparability::{default_tolerance, depends_on, ratio_text, within};

/// The settings of a detection.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Seed of the permutation draws (one ChaCha8 stream per key).
    pub seed: u64,
    /// Shuffles per significance test.
    pub permutations: u32,
    /// A split is kept when its p-value is at most this.
    pub max_p: f64,
    /// The fewest entries either side of a split.
    pub min_segment: usize,
    /// The minimum effect per class, in percent.
    pub min_effect_pct: BTreeMap<MetricClass, f64>,
}

/// The default seed of the permutation draws.
pub const DEFAULT_SEED: u64 = 0x7e2d;

impl Default for Config {
    /// 199 shuffles and p ≤ 0.01: Matteson and James test at 199 permutations; the level is
    /// stricter than their 0.05 because a history has hundreds of keys, each tested. Three
    /// entries either side: a change must hold for three recordings before it is called, so
    /// one outlier is not a change.
    fn default() -> Config {
        Config {
            seed: DEFAULT_SEED,
            permutations: 199,
            max_p: 0.01,
            min_segment: 3,
            min_effect_pct: BTreeMap::from([
                (MetricClass::Exact, 0.0),
                (MetricClass::Cost, 1.0),
                (MetricClass::Resource, 5.0),
                (MetricClass::Timing, 5.0),
            ]),
        }
    }
}

/// One series: the positions (history indices) that have the key and their values.
struct Series {
    key: String,
    unit: String,
    class: MetricClass,
    better: Better,
    at: Vec<usize>,
    values: Vec<f64>,
    /// The key's floor, percent.
    min_effect_pct: f64,
    /// A calibration channel's own series: judged against its tolerance.
    channel: Option<String>,
}

/// A split with its segments measured.
#[derive(Debug, Clone)]
struct Measured {
    split: Split,
    /// The segment before starts here; the segment after ends here (exclusive).
    from: usize,
    to: usize,
    pct: f64,
    ci: Interval,
}

fn level(left: &[f64], right: &[f64]) -> f64 {
    let l = fit::median(left).unwrap_or(0.0);
    if l != 0.0 {
        l.abs()
    } else {
        fit::median(right).unwrap_or(0.0).abs()
    }
}

/// Measures every split against its neighbours.
fn measure(x: &[f64], splits: &[Split]) -> Vec<Measured> {
    (0..splits.len())
        .map(|i| {
            let from = if i == 0 { 0 } else { splits[i - 1].index };
            let to = splits.get(i + 1).map_or(x.len(), |s| s.index);
            let at = splits[i].index;
            let (l, r) = (&x[from..at], &x[at..to]);
            let lv = level(l, r);
            let (pct, ci) = match fit::shift(l, r) {
                Some(e) if lv > 0.0 => (
                    e.value / lv * 100.0,
                    Interval {
                        lo: e.lo / lv * 100.0,
                        hi: e.hi / lv * 100.0,
                    },
                ),
                _ => (0.0, Interval { lo: 0.0, hi: 0.0 }),
            };
            Measured {
                split: splits[i],
                from,
                to,
                pct,
                ci,
            }
        })
        .collect()
}

/// How far a split is from being kept: below 1 it is dropped (the smallest first).
fn strength(m: &Measured, s: &Series, x: &[f64]) -> f64 {
    if let Some(ch) = &s.channel {
        let (l, r) = (&x[m.from..m.split.index], &x[m.split.index..m.to]);
        let ratio = match (fit::median(l), fit::median(r)) {
            (Some(a), Some(b)) if a > 0.0 => b / a,
            _ => return 0.0,
        };
        // Beyond the tolerance is ≥ 1; inside it, how far towards it.
        let t = default_tolerance(ch);
        let dev = if ratio >= 1.0 {
            ratio - 1.0
        } else {
            1.0 / ratio - 1.0
        };
        return if within(ratio, t) {
            dev / t * 0.999
        } else {
            1.0 + dev
        };
    }
    let excludes_zero = m.ci.lo > 0.0 || m.ci.hi < 0.0;
    if !excludes_zero {
        return 0.0;
    }
    if s.min_effect_pct <= 0.0 {
        return 1.0 + m.pct.abs();
    }
    m.pct.abs() / s.min_effect_pct
}

/// The splits that survive the effect floor, each measured against its final neighbours.
fn keep_effective(s: &Series, mut splits: Vec<Split>) -> Vec<Measured> {
    loop {
        let measured = measure(&s.values, &splits);
        let weakest = measured
            .iter()
            .enumerate()
            .map(|(i, m)| (i, strength(m, s, &s.values)))
            .filter(|(_, st)| *st < 1.0)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match weakest {
            Some((i, _)) => {
                splits.remove(i);
            }
            None => return measured,
        }
    }
}

/// Median relative half-spread of a key's entries, percent.
fn spread_pct(entries: &[&contract::history::HistoryValue]) -> f64 {
    let rel: Vec<f64> = entries
        .iter()
        .filter(|v| v.value != 0.0 && v.value.is_finite())
        .map(|v| (v.high - v.low).abs() / v.value.abs() / 2.0 * 100.0)
        .collect();
    fit::median(&rel).unwrap_or(0.0)
}

fn series_of(entries: &[HistoryEntry], cfg: &Config) -> Vec<Series> {
    let mut keys: BTreeMap<&str, Vec<(usize, &contract::history::HistoryValue)>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        for (k, v) in &e.keys {
            if v.value.is_finite() {
                keys.entry(k.as_str()).or_default().push((i, v));
            }
        }
    }
    let mut out = Vec::new();
    for channel in KERNELS {
        let (at, values): (Vec<usize>, Vec<f64>) = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                e.calibration
                    .get(channel)
                    .copied()
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .map(|v| (i, v))
            })
            .unzip();
        if !at.is_empty() {
            out.push(Series {
                key: format!("{CHANNEL_PREFIX}{channel}"),
                unit: "ms".into(),
                class: MetricClass::Timing,
                better: Better::Lower,
                at,
                values,
                min_effect_pct: default_tolerance(channel) * 100.0,
                channel: Some(channel.to_owned()),
            });
        }
    }
    for (key, vals) in keys {
        let first = vals[0].1;
        let class_floor = cfg.min_effect_pct.get(&first.class).copied().unwrap_or(5.0);
        let vs: Vec<&contract::history::HistoryValue> = vals.iter().map(|p| p.1).collect();
        let floor = class_floor.max(spread_pct(&vs));
        out.push(Series {
            key: key.to_owned(),
            unit: first.unit.clone(),
            class: first.class,
            better: first.better,
            at: vals.iter().map(|p| p.0).collect(),
            values: vals.iter().map(|p| p.1.value).collect(),
            min_effect_pct: floor,
            channel: None,
        });
    }
    out
}

fn entry_ref(entries: &[HistoryEntry], i: usize) -> EntryRef {
    EntryRef {
        index: i,
        commit: entries[i].commit.clone(),
        date: entries[i].date.clone(),
    }
}

/// The channels whose median moved beyond tolerance between history positions `l` and `r`.
fn moved_channels(entries: &[HistoryEntry], l: &[usize], r: &[usize]) -> Vec<String> {
    KERNELS
        .iter()
        .filter_map(|ch| {
            let med = |idx: &[usize]| {
                let v: Vec<f64> = idx
                    .iter()
                    .filter_map(|&i| entries[i].calibration.get(*ch).copied())
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .collect();
                fit::median(&v)
            };
            let (a, b) = (med(l)?, med(r)?);
            let ratio = b / a;
            (!within(ratio, default_tolerance(ch))).then(|| format!("{ch} ×{}", ratio_text(ratio)))
        })
        .collect()
}

fn is_worse(better: Better, pct: f64) -> bool {
    match better {
        Better::Lower => pct > 0.0,
        Better::Higher => pct < 0.0,
    }
}

/// Change points of one series.
fn points_of(entries: &[HistoryEntry], s: &Series, cfg: &Config, stream: u64) -> Vec<TrendPoint> {
    let x = &s.values;
    if x.windows(2).all(|w| w[0] == w[1]) {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(stream);
    let search = Search {
        permutations: cfg.permutations,
        max_p: cfg.max_p,
        min_segment: cfg.min_segment,
    };
    let splits = edivisive::detect(x, &search, &mut rng);
    if splits.is_empty() {
        return Vec::new();
    }
    let kept = keep_effective(s, splits);
    let point = |m: &Measured, kind: PointKind, channels: Vec<String>| {
        let at = m.split.index;
        TrendPoint {
            key: s.key.clone(),
            unit: s.unit.clone(),
            class: s.class,
            better: s.better,
            kind,
            worse: kind != PointKind::Machine && is_worse(s.better, m.pct),
            before: entry_ref(entries, s.at[at - 1]),
            after: entry_ref(entries, s.at[at]),
            estimate_pct: m.pct,
            ci_pct: m.ci,
            p_value: m.split.p_value,
            min_effect_pct: s.min_effect_pct,
            channels,
            bisect: None,
        }
    };
    let mut out: Vec<TrendPoint> = Vec::new();
    // Splits of the code (not of the machine), gathered into runs of one direction.
    let mut run: Vec<&Measured> = Vec::new();
    for m in &kept {
        let at = m.split.index;
        let machine = match &s.channel {
            Some(ch) => {
                let (a, b) = (
                    fit::median(&x[m.from..at]).unwrap_or(1.0),
                    fit::median(&x[at..m.to]).unwrap_or(1.0),
                );
                vec![format!("{ch} ×{}", ratio_text(b / a))]
            }
            None if !depends_on(s.class).is_empty() => {
                moved_channels(entries, &s.at[m.from..at], &s.at[at..m.to])
            }
            None => Vec::new(),
        };
        if !machine.is_empty() {
            flush(&mut run, &mut out, entries, s, &point);
            out.push(point(m, PointKind::Machine, machine));
            continue;
        }
        if run.last().is_some_and(|r| (r.pct > 0.0) != (m.pct > 0.0)) {
            flush(&mut run, &mut out, entries, s, &point);
        }
        run.push(m);
    }
    flush(&mut run, &mut out, entries, s, &point);
    out
}

/// The Bayesian information criterion of a fit with `params` parameters leaving `rss` over
/// `n` values (Gaussian errors; a floor keeps an exact fit finite).
fn bic(n: usize, rss: f64, scale: f64, params: usize) -> f64 {
    let nf = n as f64;
    let rss = rss.max(1e-12 * scale.max(f64::MIN_POSITIVE));
    nf * (rss / nf).ln() + params as f64 * nf.ln()
}

/// Ends a run of same-direction splits: one drift over the run's span when a line explains it
/// at least as well as the run's levels do (by BIC: a line has 2 parameters, `k` splits have
/// `k + 1` levels and `k` positions), else one step per split.
fn flush(
    run: &mut Vec<&Measured>,
    out: &mut Vec<TrendPoint>,
    entries: &[HistoryEntry],
    s: &Series,
    point: &dyn Fn(&Measured, PointKind, Vec<String>) -> TrendPoint,
) {
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return;
    };
    let (from, to) = (first.from, last.to);
    let seg = &s.values[from..to];
    let scale: f64 = seg.iter().map(|v| v * v).sum();
    let mut cuts: Vec<usize> = vec![0];
    cuts.extend(run.iter().map(|m| m.split.index - from));
    cuts.push(seg.len());
    let steps_rss: f64 = cuts
        .windows(2)
        .map(|w| fit::step_rss(&seg[w[0]..w[1]], w[1] - w[0]))
        .sum();
    let k = run.len();
    let drift = seg.len() >= 3
        && bic(seg.len(), fit::line_rss(seg), scale, 2)
            <= bic(seg.len(), steps_rss, scale, 2 * k + 1);
    if drift {
        let p = run.iter().map(|m| m.split.p_value).fold(1.0, f64::min);
        out.push(drift_point(entries, s, from, to, p));
    } else {
        out.extend(run.iter().map(|m| point(m, PointKind::Step, Vec::new())));
    }
    run.clear();
}

/// A drift over series positions `from..to`: the fitted line's change from its start to its
/// end, in percent of its start.
fn drift_point(entries: &[HistoryEntry], s: &Series, from: usize, to: usize, p: f64) -> TrendPoint {
    let seg = &s.values[from..to];
    let (a, b, hw) = fit::line(seg).unwrap_or((seg[0], 0.0, 0.0));
    let len = (seg.len() - 1) as f64;
    let start = a.abs().max(f64::MIN_POSITIVE);
    let pct = b * len / start * 100.0;
    let lo = (b - hw) * len / start * 100.0;
    let hi = (b + hw) * len / start * 100.0;
    TrendPoint {
        key: s.key.clone(),
        unit: s.unit.clone(),
        class: s.class,
        better: s.better,
        kind: PointKind::Drift,
        worse: is_worse(s.better, pct),
        before: entry_ref(entries, s.at[from]),
        after: entry_ref(entries, s.at[to - 1]),
        estimate_pct: pct,
        ci_pct: Interval { lo, hi },
        p_value: p,
        min_effect_pct: s.min_effect_pct,
        channels: Vec::new(),
        bisect: None,
    }
}

/// The change points of a history (entries oldest first, one scenario on one machine class).
pub fn detect(entries: &[HistoryEntry], cfg: &Config) -> TrendResult {
    let series = series_of(entries, cfg);
    let mut points: Vec<TrendPoint> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        points.extend(points_of(entries, s, cfg, i as u64));
    }
    let first = entries.first();
    TrendResult {
        kind: KIND_TREND.into(),
        format_version: FORMAT_VERSION,
        scenario: first.map(|e| e.scenario.clone()).unwrap_or_default(),
        machine_class: first.map(|e| e.machine_class.clone()).unwrap_or_default(),
        settings: TrendSettings {
            seed: cfg.seed,
            permutations: cfg.permutations,
            max_p: cfg.max_p,
            min_segment: cfg.min_segment,
            min_effect_pct: cfg
                .min_effect_pct
                .iter()
                .map(|(c, v)| (c.as_str().to_owned(), *v))
                .collect(),
        },
        entries: (0..entries.len()).map(|i| entry_ref(entries, i)).collect(),
        keys_examined: series.len(),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::history::HistoryValue;

    fn history(values: &[f64], io: impl Fn(usize) -> f64) -> Vec<HistoryEntry> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let keys = BTreeMap::from([(
                    "k".to_owned(),
                    HistoryValue {
                        value: v,
                        unit: "instructions".into(),
                        class: MetricClass::Cost,
                        better: Better::Lower,
                        low: v,
                        high: v,
                        n: 1,
                    },
                )]);
                HistoryEntry::new(
                    Some(format!("c{i}")),
                    None,
                    format!("d{i:02}"),
                    "m".into(),
                    "s".into(),
                    1,
                    "v".into(),
                    BTreeMap::from([("io_ms".to_owned(), io(i))]),
                    keys,
                )
            })
            .collect()
    }

    /// A small wobble that repeats, so no stretch of it looks like a change.
    fn wobble(i: usize) -> f64 {
        [0.0, 0.002, -0.001, 0.001, -0.002][i % 5]
    }

    #[test]
    fn a_ramp_is_one_drift_a_jump_is_a_step_and_a_channel_jump_is_the_machine() {
        let ramp: Vec<f64> = (0..40)
            .map(|i| 100.0 * (1.0 + 0.002 * i as f64 + wobble(i)))
            .collect();
        let r = detect(&history(&ramp, |_| 1.0), &Config::default());
        let kinds: Vec<(PointKind, usize, usize)> = r
            .points
            .iter()
            .map(|p| (p.kind, p.before.index, p.after.index))
            .collect();
        assert_eq!(kinds, vec![(PointKind::Drift, 0, 39)], "{:?}", r.points);
        assert!(r.points[0].worse);
        let step: Vec<f64> = (0..40)
            .map(|i| 100.0 * (if i < 22 { 1.0 } else { 1.03 } + wobble(i)))
            .collect();
        let r = detect(&history(&step, |_| 1.0), &Config::default());
        let kinds: Vec<(PointKind, usize, usize)> = r
            .points
            .iter()
            .map(|p| (p.kind, p.before.index, p.after.index))
            .collect();
        assert_eq!(kinds, vec![(PointKind::Step, 21, 22)], "{:?}", r.points);
        let flat: Vec<f64> = (0..40).map(|i| 100.0 * (1.0 + wobble(i))).collect();
        let r = detect(
            &history(&flat, |i| if i < 25 { 1.0 } else { 2.5 }),
            &Config::default(),
        );
        assert_eq!(r.points.len(), 1, "{:?}", r.points);
        let p = &r.points[0];
        assert_eq!(
            (p.kind, p.key.as_str(), p.after.index),
            (PointKind::Machine, "calibration.io_ms", 25)
        );
        assert_eq!(p.channels, vec!["io_ms ×2.50".to_owned()]);
    }
}

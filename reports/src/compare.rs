//! `vaultbench compare BASELINE RECORDING`: per key, the change and whether it is beyond the
//! noise the two recordings' own raw series allow; a regression is a change in the metric's bad
//! direction that is both beyond the noise and beyond the threshold.
//!
//! Noise rule (timing and resource keys): the change counts as real only when the two raw
//! series do not overlap (every candidate sample above every baseline sample, or below), and
//! then only by the *gap* between them, which must exceed the threshold plus the larger
//! relative spread (max − min over median) of the two series, and one step of the values'
//! resolution. Non-overlap alone is not enough between two recordings: for two series of
//! n = 5 it has probability 2 / C(10, 5) ≈ 0.8 % when the samples are exchangeable, but the
//! samples of one recording share that recording's hour on the host, so a whole recording
//! drifts, and a noisier key drifts further. Measured on a 2-vCPU cloud VM
//! (docs/src/measured.md, "The trend compare's false alarms"): with non-overlap and a 5 %
//! change of medians, most A/A pairs of recordings of one build showed a false regression
//! (tail latencies, per-thread CPU, the fsync-bound push); with this rule none did, while
//! +1 ms per version post stayed a regression. The resolution step is the one the values were
//! recorded at (`resolution_step`): a thread's CPU read in 10 ms clock ticks (0.07 s
//! against 0.08 s) is one tick, not +14 %. Series shorter than [`MIN_SERIES`] have
//! no usable spread: their changes are judged on the threshold alone and flagged.
//!
//! Exact keys are deterministic for a build and seed, so they compare exactly: any difference
//! is reported, and a difference in the bad direction (more requests, more bytes, more fsyncs
//! per file, more errors) is a regression whatever the threshold — it is a behaviour change,
//! not noise. A `bool` exact key (e.g. `cold_pull.byte_identical`) that changes at all is a
//! regression. An exact key whose raw series varied inside either recording is not
//! deterministic on that build, so it is judged by the noise rule (still without a threshold).
//!
//! Cost keys (instructions retired under an instruction counter, from one cost sample per
//! recording) have no series to judge noise by; they are judged against their own, tighter
//! threshold ([`DEFAULT_COST_THRESHOLD`], overridable). So are the cost sample's exact syscall
//! counts (a series of one in both recordings): a change within that threshold is reported as
//! below it, since a server that coalesces flushes under concurrency moves, say, a route's
//! 1,008 fdatasyncs at 4 in flight by a few from run to run; beyond it they are exact keys.
//!
//! Like with like: before any key is judged, each calibration channel's median in the recording
//! is compared with the baseline's ([`crate::comparability`]). A timing or resource key that
//! depends on a channel that differs beyond its tolerance is [`Status::NotComparable`], with the
//! channel and its ratio named (`io_ms ×2.25`): the difference would be the machine's speed, not
//! the build. The verdict then rests on the keys that do not depend on the machine (exact keys,
//! and cost keys where both recordings have them). [`Options::strict_machine`] makes such a
//! difference an error instead.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::comparability::{self, ChannelMatch};
use crate::schema::{Baseline, Better, MetricClass, Provenance};

/// Below this many raw values a series' min–max says nothing about noise.
pub const MIN_SERIES: usize = 3;

/// A cost-sample key with runs on only one side (the other recording has one cost sample), or
/// a syscall count from the cost samples, counts only when its change is more than this many
/// times the larger relative range (max − min over median) of the runs it has. (With runs on
/// both sides, a cost key is judged by the gap between them, as timing keys are.) A server that batches work by timing (group commit, a polling feed) retires a
/// different number of instructions on each run: on a 2-vCPU cloud VM one recording against
/// another of the same build moved `route.changes.c1` by up to 2.6 % and `idle_resync` by 6 %
/// while the post routes moved by under 0.5 % (docs/src/measured.md, "Comparing like with
/// like"). For three runs a side, the range is about 1.7 standard deviations and the median's
/// difference has about one, so twice the larger range is about three of them.
pub const COST_NOISE_FACTOR: f64 = 2.0;

/// The threshold of cost keys (and the cost sample's syscall counts) when a calibration channel
/// differs beyond its tolerance: 6 %. Instructions are not wholly independent of the machine's
/// speed on a server that batches by timing: on a disk ×2.29 slower (the same build, the same
/// VM, the work dir on a loop-mounted ext4) the reference server's `route.changes.c1` moved
/// +4.8 % and `route.chunks-exists.c1` −2.7 %, where the post routes moved under 0.6 %
/// (docs/src/measured.md, "Comparing like with like"). Across such machines a cost change
/// smaller than this is not judged; on machines of one speed the cost threshold applies.
pub const ACROSS_SPEED_COST_THRESHOLD: f64 = 0.06;

/// The default threshold: 5 %, the change a trend job should notice on a quiet machine.
pub const DEFAULT_THRESHOLD: f64 = 0.05;
/// The default threshold of `cost` keys (instructions retired): 1 %. Two runs of the
/// reference server's 500-post phase under callgrind differed by at most 1.23 % in the
/// cost-channel study, and a route step of 2000 posts by at most 0.09 %, where timing keys on
/// the same machine moved by tens of percent; a real-world decision line was 3 %.
pub const DEFAULT_COST_THRESHOLD: f64 = 0.01;

/// How one key moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Worse, beyond the noise and the threshold (exact: any change in the bad direction).
    Regression,
    /// Better, beyond the noise and the threshold (exact: any change in the good direction).
    Improvement,
    /// Beyond the noise but smaller than the threshold.
    BelowThreshold,
    /// The raw series overlap: the change is inside the recordings' own spread.
    WithinNoise,
    Unchanged,
    /// Only in the recording.
    Added,
    /// Only in the baseline.
    Removed,
    /// A timing or resource key on machines whose calibration channels differ beyond their
    /// tolerance (see [`KeyComparison::not_comparable`]): shown, not judged.
    NotComparable,
}

/// One key's comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyComparison {
    pub key: String,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
    pub baseline: Option<f64>,
    pub recording: Option<f64>,
    /// (recording − baseline) / |baseline|; infinite when the baseline is 0 and the recording not.
    pub change: Option<f64>,
    pub baseline_range: Option<(f64, f64)>,
    pub recording_range: Option<(f64, f64)>,
    /// Whether the raw series are disjoint (`None`: too few values to say, or exact).
    pub beyond_noise: Option<bool>,
    /// For a timing or resource key whose series are disjoint: the gap between them (nearest
    /// recording sample to nearest baseline sample) over the baseline's median, signed like
    /// `change`. Only a gap beyond [`KeyComparison::allowance`] is a regression or an
    /// improvement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// What the gap must exceed: the threshold plus the larger relative spread of the two
    /// series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowance: Option<f64>,
    pub status: Status,
    /// For a [`Status::NotComparable`] key: each channel it depends on that differs, with its
    /// ratio (`io_ms ×2.25`); empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_comparable: Vec<String>,
    /// For a [`Status::NotComparable`] key: what it would have been on comparable machines
    /// (information, never the verdict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_be: Option<Status>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub scenario: String,
    pub threshold: f64,
    /// The threshold of `cost` keys.
    pub cost_threshold: f64,
    pub keys: Vec<KeyComparison>,
    pub regressions: usize,
    /// Facts the reader must know (different machine, vault digest, samples too few).
    pub notes: Vec<String>,
    /// Each calibration channel's median in both recordings, and whether they match.
    pub machine: Vec<ChannelMatch>,
    /// Keys not judged because a channel they depend on differs.
    pub not_comparable: usize,
}

/// How to compare: the thresholds and the machine check.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub threshold: f64,
    /// The threshold of `cost` keys.
    pub cost_threshold: f64,
    /// Per channel, the relative difference of medians beyond which its keys are not
    /// comparable; a channel not named here has [`comparability::default_tolerance`].
    pub machine_tolerance: BTreeMap<String, f64>,
    /// A channel beyond its tolerance is an error ([`CompareError::Machine`]), not a set of
    /// keys reported as not comparable.
    pub strict_machine: bool,
    /// The cost keys' threshold when a channel differs ([`ACROSS_SPEED_COST_THRESHOLD`]);
    /// the larger of it and `cost_threshold` applies.
    pub across_speed_cost_threshold: f64,
}

impl Options {
    /// The given thresholds, the default tolerances, not strict.
    pub fn new(threshold: f64, cost_threshold: f64) -> Options {
        Options {
            threshold,
            cost_threshold,
            machine_tolerance: BTreeMap::new(),
            strict_machine: false,
            across_speed_cost_threshold: ACROSS_SPEED_COST_THRESHOLD,
        }
    }

    /// The tolerance of one channel.
    pub fn tolerance(&self, channel: &str) -> f64 {
        self.machine_tolerance
            .get(channel)
            .copied()
            .unwrap_or_else(|| comparability::default_tolerance(channel))
    }
}

/// Comparing two documents that are not comparable, or a bad threshold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error(
        "baseline is scenario {baseline:?} but the recording is {recording:?}: compare recordings of the same scenario"
    )]
    Scenario { baseline: String, recording: String },
    #[error(
        "baseline seed {baseline:#x} differs from the recording's {recording:#x}: different vaults are different workloads"
    )]
    Seed { baseline: u64, recording: u64 },
    #[error(
        "the machines differ beyond the calibration tolerance ({differences}): timing and resource keys would measure the machine, not the build (without --strict-machine they are reported as not comparable)"
    )]
    Machine { differences: String },
}

/// Compares a recording with a baseline (both with their sidecars); cost keys against
/// [`DEFAULT_COST_THRESHOLD`].
pub fn compare(
    base: (&Baseline, &Provenance),
    rec: (&Baseline, &Provenance),
    threshold: f64,
) -> Result<Comparison, CompareError> {
    compare_with(base, rec, threshold, DEFAULT_COST_THRESHOLD)
}

/// [`compare`] with the cost keys' threshold given.
pub fn compare_with(
    base: (&Baseline, &Provenance),
    rec: (&Baseline, &Provenance),
    threshold: f64,
    cost_threshold: f64,
) -> Result<Comparison, CompareError> {
    compare_opts(base, rec, &Options::new(threshold, cost_threshold))
}

/// [`compare`] with every option given.
pub fn compare_opts(
    base: (&Baseline, &Provenance),
    rec: (&Baseline, &Provenance),
    opts: &Options,
) -> Result<Comparison, CompareError> {
    let threshold = opts.threshold;
    let ((bb, bp), (rb, rp)) = (base, rec);
    if bb.scenario != rb.scenario {
        return Err(CompareError::Scenario {
            baseline: bb.scenario.clone(),
            recording: rb.scenario.clone(),
        });
    }
    if bb.seed != rb.seed {
        return Err(CompareError::Seed {
            baseline: bb.seed,
            recording: rb.seed,
        });
    }
    let machine = comparability::match_channels(bp, rp, |c| opts.tolerance(c));
    let differ: Vec<&ChannelMatch> = machine
        .iter()
        .filter(|m| m.comparable == Some(false))
        .collect();
    if opts.strict_machine && !differ.is_empty() {
        return Err(CompareError::Machine {
            differences: differ
                .iter()
                .map(|m| format!("{} beyond ±{}", m.label(), crate::fmt::pct(m.tolerance)))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut notes = Vec::new();
    let cost_threshold = if differ.is_empty() {
        opts.cost_threshold
    } else {
        opts.cost_threshold.max(opts.across_speed_cost_threshold)
    };
    if !differ.is_empty() {
        let named: Vec<String> = differ.iter().map(|m| m.label()).collect();
        notes.push(format!(
            "the machines differ: {} beyond the tolerance, so the timing and resource keys that depend on it are not comparable and not judged; the verdict rests on the exact and cost keys",
            named.join(", ")
        ));
        if cost_threshold > opts.cost_threshold {
            notes.push(format!(
                "on machines of different speed the cost keys are judged at {} (not {}): a server that batches by timing retires a few percent more or fewer instructions on a slower disk",
                crate::fmt::pct(cost_threshold),
                crate::fmt::pct(opts.cost_threshold)
            ));
        }
    }
    let unchecked: Vec<&str> = machine
        .iter()
        .filter(|m| m.comparable.is_none())
        .map(|m| m.channel.as_str())
        .collect();
    if !unchecked.is_empty() {
        notes.push(format!(
            "{} not read in both recordings (one was made before the channel existed): not checked, so a machine difference there would show as a change",
            unchecked.join(", ")
        ));
    }
    if bp.vault_digest != rp.vault_digest {
        notes.push(format!(
            "the vault digests differ ({} vs {}): the generator changed, so exact counts may differ for that reason alone",
            short(&bp.vault_digest),
            short(&rp.vault_digest)
        ));
    }
    if bp.machine.identity != rp.machine.identity {
        notes.push("the machine fingerprints differ: timing and resource changes may be the machine, not the build".into());
    }
    if bb.samples.min(rb.samples) < MIN_SERIES as u32 {
        notes.push(format!("fewer than {MIN_SERIES} samples on one side: noise cannot be judged, timing changes rest on the threshold alone"));
    }
    let mut keys = Vec::new();
    let mut unsteady_exact: Vec<String> = Vec::new();
    let all: std::collections::BTreeSet<&String> =
        bb.metrics.keys().chain(rb.metrics.keys()).collect();
    for key in all {
        let (bm, rm) = (bb.metrics.get(key), rb.metrics.get(key));
        let m = rm.or(bm).expect("key came from one of the maps");
        let br = bp.raw.get(key).and_then(|s| crate::stats::range(s));
        let rr = rp.raw.get(key).and_then(|s| crate::stats::range(s));
        let (b, r) = (bm.map(|m| m.value), rm.map(|m| m.value));
        let change = match (b, r) {
            (Some(b), Some(r)) if b == r => Some(0.0),
            (Some(0.0), Some(r)) => Some(if r > 0.0 {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            }),
            (Some(b), Some(r)) => Some((r - b) / b.abs()),
            _ => None,
        };
        let runs = |k: &str, p: &Provenance| p.raw.get(k).map_or(0, Vec::len);
        let series_ok = |k: &str, p: &Provenance| runs(k, p) >= MIN_SERIES;
        let varies = |r: Option<(f64, f64)>| r.is_some_and(|(lo, hi)| lo != hi);
        // An exact key that varied inside a recording is not deterministic there: it gets the
        // noise rule too (but still no threshold), so a flapping count does not flap the job.
        let unsteady = m.class == MetricClass::Exact && (varies(br) || varies(rr));
        if unsteady {
            unsteady_exact.push(key.clone());
        }
        // A cost-sample key (instructions, syscalls by name) with two or more runs on a side:
        // the larger relative range of its runs.
        let from_cost_sample = m.class == MetricClass::Cost
            || contract::key::MetricKey::is_scoped_server_member(key, contract::key::SYSCALLS);
        let cost_noise = if from_cost_sample {
            let spread = |p: &Provenance| {
                let s = p.raw.get(key).filter(|s| s.len() >= 2)?;
                let (lo, hi) = crate::stats::range(s)?;
                let med = crate::schema::median(s)?;
                (med != 0.0).then(|| (hi - lo) / med.abs())
            };
            match (spread(bp), spread(rp)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        let within_cost_noise =
            |c: f64| cost_noise.is_some_and(|n| c.abs() <= COST_NOISE_FACTOR * n);
        let beyond_noise = match (br, rr) {
            _ if m.class == MetricClass::Exact && !unsteady => None,
            (Some(x), Some(y))
                if (series_ok(key, bp) && series_ok(key, rp))
                    || (m.class == MetricClass::Cost
                        && runs(key, bp) >= 2
                        && runs(key, rp) >= 2) =>
            {
                Some(y.0 > x.1 || y.1 < x.0)
            }
            _ => None,
        };
        // The gap between disjoint series of a timing, resource or cost key (over the
        // baseline's median), what it must exceed (the key's threshold plus the series' own
        // spread: cost keys drift between recordings too, `cold_push` instructions by 1.4 %
        // over nine recordings of one build on a server that batches its flushes), and
        // whether it is more than one resolution step.
        let series = |p: &Provenance| p.raw.get(key).cloned().unwrap_or_default();
        let key_threshold = if m.class == MetricClass::Cost {
            cost_threshold
        } else {
            threshold
        };
        let (gap, allowance, beyond_step) = match (br, rr, b, r) {
            (Some(x), Some(y), Some(bv), Some(rv))
                if beyond_noise == Some(true)
                    && bv != 0.0
                    && matches!(
                        m.class,
                        MetricClass::Timing | MetricClass::Resource | MetricClass::Cost
                    ) =>
            {
                let raw_gap = if y.0 > x.1 { y.0 - x.1 } else { y.1 - x.0 };
                let spread = |lo: f64, hi: f64, med: f64| {
                    if med == 0.0 {
                        0.0
                    } else {
                        (hi - lo) / med.abs()
                    }
                };
                let widest = spread(x.0, x.1, bv).max(spread(y.0, y.1, rv));
                let step = resolution_step(&series(bp), &series(rp));
                (
                    Some(raw_gap / bv.abs()),
                    Some(key_threshold + widest),
                    raw_gap.abs() > step,
                )
            }
            _ => (None, None, true),
        };
        let status = match (b, r, change) {
            (None, Some(_), _) => Status::Added,
            (Some(_), None, _) => Status::Removed,
            (_, _, Some(0.0)) => Status::Unchanged,
            (_, _, Some(c)) => {
                let worse = if m.better == Better::Lower {
                    c > 0.0
                } else {
                    c < 0.0
                };
                if m.class == MetricClass::Exact {
                    if beyond_noise == Some(false) || within_cost_noise(c) {
                        Status::WithinNoise
                    } else if from_cost_sample && c.abs() <= cost_threshold {
                        // A count from the cost samples (syscalls by name): a server that
                        // coalesces flushes under concurrency moves it by a few in a thousand
                        // from run to run, so it gets the cost keys' threshold.
                        Status::BelowThreshold
                    } else if worse || m.unit == "bool" {
                        Status::Regression
                    } else {
                        Status::Improvement
                    }
                } else if beyond_noise == Some(false) || (gap.is_none() && within_cost_noise(c)) {
                    Status::WithinNoise
                } else if !beyond_step {
                    // Apart by one step of the values' resolution (a clock tick): not a change.
                    Status::WithinNoise
                } else if let (Some(g), Some(allow)) = (gap, allowance)
                    && g.abs() <= allow
                {
                    // Apart, but by less than the threshold plus the series' own spread: a
                    // recording's drift, not a change that every sample shows.
                    Status::BelowThreshold
                } else if c.abs()
                    <= if m.class == MetricClass::Cost {
                        cost_threshold
                    } else {
                        threshold
                    }
                {
                    Status::BelowThreshold
                } else if worse {
                    Status::Regression
                } else {
                    Status::Improvement
                }
            }
            _ => Status::Unchanged,
        };
        let why = match status {
            Status::Added | Status::Removed => Vec::new(),
            _ => comparability::differing(&machine, comparability::depends_on(m.class)),
        };
        let (status, would_be) = if why.is_empty() {
            (status, None)
        } else {
            (Status::NotComparable, Some(status))
        };
        keys.push(KeyComparison {
            not_comparable: why,
            would_be,
            key: key.clone(),
            unit: m.unit.clone(),
            class: m.class,
            better: m.better,
            baseline: b,
            recording: r,
            change,
            baseline_range: br,
            recording_range: rr,
            beyond_noise,
            gap,
            allowance,
            status,
        });
    }
    if let Some(first) = unsteady_exact.first() {
        notes.push(format!(
            "{} exact key(s) varied across samples (e.g. {first}): compared with the noise rule instead of exactly",
            unsteady_exact.len()
        ));
    }
    let regressions = keys
        .iter()
        .filter(|k| k.status == Status::Regression)
        .count();
    let not_comparable = keys
        .iter()
        .filter(|k| k.status == Status::NotComparable)
        .count();
    Ok(Comparison {
        scenario: bb.scenario.clone(),
        threshold,
        cost_threshold,
        keys,
        regressions,
        notes,
        machine,
        not_comparable,
    })
}

/// The resolution the values of a key were recorded at: 10^−d for the fewest decimal places d
/// (at most 9) that write every value of both series exactly. A thread's CPU from 10 ms clock
/// ticks (0.07, 0.08 s) has 0.01; a latency in whole microseconds has 1; a rusage figure
/// (2.086752 s) has 10^−6.
fn resolution_step(a: &[f64], b: &[f64]) -> f64 {
    let places = |v: f64| {
        (0..=9)
            .find(|&d| {
                let x = v * 10f64.powi(d);
                (x - x.round()).abs() <= 1e-9 * x.abs().max(1.0)
            })
            .unwrap_or(9)
    };
    let d = a
        .iter()
        .chain(b)
        .filter(|v| v.is_finite())
        .map(|&v| places(v))
        .max()
        .unwrap_or(9);
    10f64.powi(-d)
}

/// A status in words (`below threshold`).
fn status_text(s: Status) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default()
}

fn short(s: &str) -> &str {
    &s[..s.len().min(12)]
}

/// The comparison as Markdown: regressions first, then improvements and other changes; keys
/// that did not move are counted, not listed.
pub fn markdown(c: &Comparison) -> String {
    use crate::fmt::{md_table, num, pct, signed_pct};
    let mut s = format!(
        "# vaultbench compare: {}\n\nThreshold {} (cost keys {}); a timing/resource change counts only when the two recordings' raw series are apart by more than the threshold plus their own spread; exact keys compare exactly.\n\n",
        c.scenario,
        pct(c.threshold),
        pct(c.cost_threshold)
    );
    s.push_str(&format!(
        "**{} regression{}.**",
        c.regressions,
        if c.regressions == 1 { "" } else { "s" }
    ));
    if c.not_comparable > 0 {
        let named: Vec<String> = c
            .machine
            .iter()
            .filter(|m| m.comparable == Some(false))
            .map(ChannelMatch::label)
            .collect();
        s.push_str(&format!(
            " {} key{} not comparable on this machine ({}).",
            c.not_comparable,
            if c.not_comparable == 1 { "" } else { "s" },
            named.join(", ")
        ));
    }
    s.push_str("\n\n");
    for n in &c.notes {
        s.push_str(&format!("- note: {n}\n"));
    }
    if !c.notes.is_empty() {
        s.push('\n');
    }
    if !c.machine.is_empty() {
        let rows: Vec<Vec<String>> = c
            .machine
            .iter()
            .map(|m| {
                vec![
                    m.channel.clone(),
                    m.baseline_median.map_or("–".into(), |v| format!("{v:.3}")),
                    m.recording_median.map_or("–".into(), |v| format!("{v:.3}")),
                    m.ratio.map_or("–".into(), |r| {
                        format!("×{}", comparability::ratio_text(r))
                    }),
                    format!("±{}", pct(m.tolerance)),
                    match m.comparable {
                        Some(true) => "yes".into(),
                        Some(false) => "**no**: its timing and resource keys are not judged".into(),
                        None => "not checked (one side has no reading)".into(),
                    },
                ]
            })
            .collect();
        s.push_str("Machine: each calibration channel's median (ms) over the counted samples.\n\n");
        s.push_str(&md_table(
            &[
                "channel",
                "baseline",
                "recording",
                "ratio",
                "tolerance",
                "comparable",
            ],
            &rows,
        ));
        s.push('\n');
    }
    let range = |r: Option<(f64, f64)>| {
        r.map_or("–".into(), |(lo, hi)| {
            if lo == hi {
                num(lo)
            } else {
                format!("{}–{}", num(lo), num(hi))
            }
        })
    };
    let mut changed: Vec<&KeyComparison> = c
        .keys
        .iter()
        .filter(|k| k.status != Status::Unchanged && k.would_be != Some(Status::Unchanged))
        .collect();
    changed.sort_by(|a, b| a.status.cmp(&b.status).then_with(|| a.key.cmp(&b.key)));
    let rows: Vec<Vec<String>> = changed
        .iter()
        .map(|k| {
            vec![
                k.key.clone(),
                format!("{:?}", k.class).to_lowercase(),
                k.baseline.map_or("–".into(), num),
                k.recording.map_or("–".into(), num),
                k.unit.clone(),
                k.change.map_or("–".into(), signed_pct),
                range(k.baseline_range),
                range(k.recording_range),
                match k.would_be {
                    Some(w) => format!(
                        "not comparable: {} (would be {})",
                        k.not_comparable.join(", "),
                        status_text(w)
                    ),
                    None => match (k.gap, k.allowance) {
                        (Some(g), Some(a)) if k.status != Status::WithinNoise => format!(
                            "{} (apart by {}, beyond {} counts)",
                            status_text(k.status),
                            pct(g.abs()),
                            pct(a)
                        ),
                        _ => status_text(k.status),
                    },
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        s.push_str("Every key is unchanged.\n");
    } else {
        s.push_str(&md_table(
            &[
                "key",
                "class",
                "baseline",
                "recording",
                "unit",
                "change",
                "baseline raw",
                "recording raw",
                "status",
            ],
            &rows,
        ));
    }
    let same = c.keys.len() - changed.len();
    s.push_str(&format!(
        "\n{same} key{} unchanged.\n",
        if same == 1 { "" } else { "s" }
    ));
    s
}

//! Change points over synthetic histories built from real recordings.
//!
//! The noise is real: `fixtures/aa-small-cost.jsonl` is the history of five `vaultbench
//! record small --cost --cost-samples 3` runs of one build on one busy 2-vCPU VM (EPYC, load
//! 5–8, a loose gate; `history import` of their recordings). Two more runs of that series are
//! left out: another job loaded the disk during them (`io_ms` ×10), which the default gate
//! refuses (an `io_ms` median more than twice the machine's reference), so a trend job would
//! never have added them to its history. Each entry of a synthetic history is one of those recordings,
//! drawn with a seeded ChaCha8, whole (every key and channel of one entry comes from one run).
//! Changes are injected on top: a +2 % step of one cost key at entry 31, a +1 % per ten
//! entries drift of another from the start, and a machine change at entry 45 (`io_ms` ×2, and
//! every timing and resource key ×1.3, as a slower disk makes them).

use contract::history::{HistoryEntry, parse_lines};
use contract::schema::MetricClass;
use contract::trend::{PointKind, TrendResult};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reports::trend::{Config, detect};

/// The key the step is injected into: instructions per version post.
pub const STEP_KEY: &str = "route.post-version.c1.server.instructions_per_request";
/// The key the drift is injected into: instructions of the cold push.
pub const DRIFT_KEY: &str = "cold_push.server.instructions";
/// Entries in a synthetic history, and where the changes go.
pub const N: usize = 60;
pub const STEP_AT: usize = 31;
pub const MACHINE_AT: usize = 45;

/// The real recordings the noise is drawn from.
pub fn pool() -> Vec<HistoryEntry> {
    let text = include_str!("../fixtures/aa-small-cost.jsonl");
    parse_lines(text).expect("the fixture history parses")
}

/// `n` entries of A/A noise: each a real recording drawn from the pool, with commit `c<i>`.
pub fn noise(pool: &[HistoryEntry], seed: u64, n: usize) -> Vec<HistoryEntry> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let mut e = pool[rng.random_range(0..pool.len())].clone();
            e.commit = Some(format!("c{i:02}"));
            e.date = format!("2026-10-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24);
            e
        })
        .collect()
}

fn scale(e: &mut HistoryEntry, key: &str, f: f64) {
    let v = e
        .keys
        .get_mut(key)
        .unwrap_or_else(|| panic!("no key {key}"));
    v.value *= f;
    v.low *= f;
    v.high *= f;
}

/// The acceptance history: noise with a step, a drift and a machine change.
pub fn synthetic(pool: &[HistoryEntry], seed: u64) -> Vec<HistoryEntry> {
    let mut h = noise(pool, seed, N);
    for (i, e) in h.iter_mut().enumerate() {
        if i >= STEP_AT {
            scale(e, STEP_KEY, 1.02);
        }
        scale(e, DRIFT_KEY, 1.0 + 0.01 * i as f64 / 10.0);
        if i >= MACHINE_AT {
            if let Some(io) = e.calibration.get_mut("io_ms") {
                *io *= 2.0;
            }
            let slowed: Vec<String> = e
                .keys
                .iter()
                .filter(|(_, v)| matches!(v.class, MetricClass::Timing | MetricClass::Resource))
                .map(|(k, _)| k.clone())
                .collect();
            for k in slowed {
                scale(e, &k, 1.3);
            }
        }
    }
    h
}

fn describe_one(p: &contract::trend::TrendPoint) -> String {
    format!(
        "{} {:?} {}→{} {:+.2}% [{:+.2}, {:+.2}] p {:.3} {}",
        p.key,
        p.kind,
        p.before.index,
        p.after.index,
        p.estimate_pct,
        p.ci_pct.lo,
        p.ci_pct.hi,
        p.p_value,
        p.channels.join(", ")
    )
}

fn describe(r: &TrendResult) -> String {
    r.points
        .iter()
        .map(describe_one)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The acceptance: the step at 31 within one commit, the drift named a drift, the machine
/// change named a machine change (the channel and every key that moved with it), and nothing
/// else; over several draws of the noise.
#[test]
fn a_step_a_drift_and_a_machine_change_are_told_apart_and_nothing_else_is_found() {
    let pool = pool();
    assert!(pool.len() >= 5, "five real recordings");
    for seed in [1u64, 2, 3] {
        let h = synthetic(&pool, seed);
        let r = detect(&h, &Config::default());
        let all = describe(&r);
        let steps: Vec<_> = r
            .points
            .iter()
            .filter(|p| p.kind == PointKind::Step)
            .collect();
        assert_eq!(steps.len(), 1, "seed {seed}: one step\n{all}");
        let s = steps[0];
        assert_eq!(s.key, STEP_KEY, "{all}");
        assert_eq!(
            (s.before.index, s.after.index),
            (STEP_AT - 1, STEP_AT),
            "seed {seed}: the step's range is one commit\n{all}"
        );
        assert_eq!(s.after.commit.as_deref(), Some("c31"));
        assert!(s.worse, "more instructions is worse");
        assert!(
            s.ci_pct.lo <= 2.05 && 1.95 <= s.ci_pct.hi && s.ci_pct.lo > 1.0,
            "seed {seed}: the interval holds +2 %\n{all}"
        );
        let drifts: Vec<_> = r
            .points
            .iter()
            .filter(|p| p.kind == PointKind::Drift)
            .collect();
        assert_eq!(drifts.len(), 1, "seed {seed}: one drift\n{all}");
        let d = drifts[0];
        assert_eq!(d.key, DRIFT_KEY, "{all}");
        assert!(
            d.after.index - d.before.index >= N / 2,
            "seed {seed}: the drift spans most of the history\n{all}"
        );
        // +1 % per 10 entries, over the drift's span.
        let expect = (d.after.index - d.before.index) as f64 / 10.0;
        assert!(
            d.ci_pct.lo <= expect * 1.1 && expect * 0.9 <= d.ci_pct.hi,
            "seed {seed}: the drift's size ~{expect:.1} %\n{all}"
        );
        let machine: Vec<_> = r
            .points
            .iter()
            .filter(|p| p.kind == PointKind::Machine)
            .collect();
        assert!(
            machine
                .iter()
                .any(|p| p.key == "calibration.io_ms" && p.after.index == MACHINE_AT),
            "seed {seed}: io_ms named at {MACHINE_AT}\n{all}"
        );
        // Every other point is a machine change: the injected one, or one the real noise
        // holds (the recordings come from a busy VM whose channels moved between them, so a
        // run of draws from one busy recording is a machine change too); each names the
        // channel that moved, and none is a regression.
        let mut elsewhere = 0;
        for p in &machine {
            assert!(!p.channels.is_empty() && !p.worse, "{all}");
            assert!(
                p.key.starts_with("calibration.")
                    || matches!(p.class, MetricClass::Timing | MetricClass::Resource),
                "{all}"
            );
            if p.after.index.abs_diff(MACHINE_AT) > 2 {
                elsewhere += 1;
                eprintln!(
                    "seed {seed}: away from {MACHINE_AT}: {} at {}→{} ({})",
                    p.key,
                    p.before.index,
                    p.after.index,
                    p.channels.join(", ")
                );
            }
        }
        eprintln!(
            "seed {seed}: step {:+.2} % [{:+.2}, {:+.2}] at {}→{}; drift {:+.2} % [{:+.2}, {:+.2}] over {}→{}; {} machine-change points, {elsewhere} away from {MACHINE_AT}",
            s.estimate_pct,
            s.ci_pct.lo,
            s.ci_pct.hi,
            s.before.index,
            s.after.index,
            d.estimate_pct,
            d.ci_pct.lo,
            d.ci_pct.hi,
            d.before.index,
            d.after.index,
            machine.len()
        );
        assert_eq!(
            r.points.len(),
            1 + 1 + machine.len(),
            "seed {seed}: nothing else\n{all}"
        );
    }
}

/// Pure noise: the change points found over 20 histories of 60 entries drawn from the real
/// recordings (the figures the book quotes): a step or drift there is a false regression; a
/// machine change names a channel that moved between the drawn recordings.
#[test]
#[ignore = "slow: 20 histories of 382 keys, about 30 s in a debug build"]
fn pure_noise_histories_give_no_false_regression() {
    let pool = pool();
    let (mut regressions, mut machine) = (Vec::new(), 0usize);
    let mut keys = 0;
    for seed in 100..120u64 {
        let h = noise(&pool, seed, N);
        let r = detect(&h, &Config::default());
        keys = r.keys_examined;
        for p in &r.points {
            if p.kind == PointKind::Machine {
                machine += 1;
            } else {
                regressions.push(format!("seed {seed}: {}", describe_one(p)));
            }
        }
    }
    eprintln!(
        "20 noise histories of {N} entries, {keys} keys each: {} steps or drifts, {machine} machine-change points\n{}",
        regressions.len(),
        regressions.join("\n")
    );
    assert!(
        regressions.len() <= 1,
        "{} false steps or drifts over 20 histories\n{}",
        regressions.len(),
        regressions.join("\n")
    );
}

/// The three formats of a result: Markdown and HTML name every point with its range; JSON
/// is the result itself with its kind; HTML draws each changed key's history with its marks.
#[test]
fn the_result_renders_as_markdown_json_and_html_with_marked_charts() {
    use reports::render::{Document, Format, charts, render};
    let pool = pool();
    let h = synthetic(&pool, 1);
    let r = detect(&h, &Config::default());
    let doc = Document::Trend {
        result: &r,
        entries: &h,
    };
    let md = render(&doc, Format::Md).unwrap();
    assert!(md.contains("| key | kind | commits |"), "{md}");
    assert!(md.contains("c30 (#30) → c31 (#31)"), "{md}");
    assert!(
        md.contains("drift (worse)") && md.contains("machine change"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&render(&doc, Format::Json).unwrap()).unwrap();
    assert_eq!(json["kind"], "vaultbench.trend");
    assert_eq!(json["settings"]["permutations"], 199);
    let back: TrendResult = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
    let html = render(&doc, Format::Html).unwrap();
    assert!(
        html.contains("<svg") && html.contains("change point: step"),
        "a marked chart"
    );
    assert!(!html.contains("<script"), "self-contained, no scripts");
    let c = charts(&doc).unwrap();
    assert!(c.len() <= reports::render::TREND_MAX_CHARTS);
    assert!(
        c.iter()
            .any(|c| c.slug.contains("instructions-per-request"))
    );
}

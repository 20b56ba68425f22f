//! Compare rules on crafted recordings: noise from the raw series, the threshold, exact keys.

use reports::compare::{Status, compare};
use reports::schema::{Baseline, Provenance};

use crate::fixtures::small;

fn set(b: &mut Baseline, p: &mut Provenance, key: &str, series: &[f64]) {
    p.raw.insert(key.into(), series.to_vec());
    b.metrics.get_mut(key).unwrap().value = reports::schema::median(series).unwrap();
    if p.exact_snapshot.contains_key(key) {
        p.exact_snapshot.insert(key.into(), b.metrics[key].value);
    }
}

fn status(c: &reports::compare::Comparison, key: &str) -> Status {
    c.keys.iter().find(|k| k.key == key).unwrap().status
}

#[test]
fn identical_recordings_have_no_regression() {
    let (b, p) = small();
    let c = compare((&b, &p), (&b, &p), 0.05).unwrap();
    assert_eq!(c.regressions, 0);
    assert!(c.keys.iter().all(|k| k.status == Status::Unchanged));
}

#[test]
fn a_slower_phase_beyond_noise_and_threshold_is_a_regression() {
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    set(
        &mut rb,
        &mut rp,
        "cold_push.wall_ms",
        &[1500.0, 1510.0, 1490.0, 1505.0, 1520.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.wall_ms"), Status::Regression);
    assert_eq!(c.regressions, 1);
    // At a 30 % threshold the same change is real but small.
    let c = compare((&b, &p), (&rb, &rp), 0.30).unwrap();
    assert_eq!(status(&c, "cold_push.wall_ms"), Status::BelowThreshold);
    assert_eq!(c.regressions, 0);
}

#[test]
fn a_big_change_inside_the_noise_is_not_a_regression() {
    let (mut b, mut p) = small();
    let (mut rb, mut rp) = small();
    set(
        &mut b,
        &mut p,
        "edit.p95_ms",
        &[10.0, 30.0, 20.0, 21.0, 19.0],
    );
    set(
        &mut rb,
        &mut rp,
        "edit.p95_ms",
        &[25.0, 12.0, 26.0, 28.0, 29.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(
        status(&c, "edit.p95_ms"),
        Status::WithinNoise,
        "+30% but the raw series overlap"
    );
}

#[test]
fn higher_is_better_keys_regress_downwards() {
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    set(
        &mut rb,
        &mut rp,
        "cold_push.files_per_s",
        &[50.0, 51.0, 52.0, 49.0, 50.5],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.files_per_s"), Status::Regression);
    let (mut rb, mut rp) = small();
    set(
        &mut rb,
        &mut rp,
        "cold_push.files_per_s",
        &[150.0, 151.0, 152.0, 149.0, 150.5],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.files_per_s"), Status::Improvement);
}

#[test]
fn exact_keys_compare_exactly() {
    let (b, p) = small();
    // One more fsync per file is a regression even though it is far below any threshold.
    let (mut rb, mut rp) = small();
    set(
        &mut rb,
        &mut rp,
        "cold_push.server.fsyncs_per_file",
        &[8.42; 5],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.50).unwrap();
    assert_eq!(
        status(&c, "cold_push.server.fsyncs_per_file"),
        Status::Regression
    );
    // Fewer requests is reported, as an improvement.
    let (mut rb, mut rp) = small();
    set(&mut rb, &mut rp, "cold_push.requests", &[300.0; 5]);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.requests"), Status::Improvement);
    assert_eq!(c.regressions, 0);
}

#[test]
fn added_and_removed_keys_are_reported_not_failed() {
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    rb.metrics.remove("edit.max_ms");
    rp.raw.remove("edit.max_ms");
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "edit.max_ms"), Status::Removed);
    let c = compare((&rb, &rp), (&b, &p), 0.05).unwrap();
    assert_eq!(status(&c, "edit.max_ms"), Status::Added);
    assert_eq!(c.regressions, 0);
}

#[test]
fn different_workloads_are_refused() {
    let (b, p) = small();
    let (mut rb, rp) = small();
    rb.seed = 7;
    let e = compare((&b, &p), (&rb, &rp), 0.05).unwrap_err().to_string();
    assert!(e.contains("seed 0x5eed differs"), "{e}");
    rb.seed = b.seed;
    rb.scenario = "large".into();
    assert!(
        compare((&b, &p), (&rb, &rp), 0.05)
            .unwrap_err()
            .to_string()
            .contains("\"large\"")
    );
}

#[test]
fn the_markdown_lists_regressions_first() {
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    set(&mut rb, &mut rp, "cold_push.requests", &[300.0; 5]);
    set(
        &mut rb,
        &mut rp,
        "cold_pull.wall_ms",
        &[900.0, 910.0, 905.0, 899.0, 901.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    let md = reports::compare::markdown(&c);
    assert!(md.contains("**1 regression.**"));
    let reg = md.find("cold_pull.wall_ms").unwrap();
    let imp = md.find("cold_push.requests").unwrap();
    assert!(reg < imp, "regressions come first");
}

#[test]
fn an_exact_key_that_varied_gets_the_noise_rule() {
    let (mut b, mut p) = small();
    let (mut rb, mut rp) = small();
    set(
        &mut b,
        &mut p,
        "cold_push.requests",
        &[380.0, 381.0, 381.0, 382.0, 381.0],
    );
    set(
        &mut rb,
        &mut rp,
        "cold_push.requests",
        &[381.0, 382.0, 382.0, 381.0, 383.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.requests"), Status::WithinNoise);
    assert!(
        c.notes.iter().any(|n| n.contains("1 exact key(s) varied")),
        "{:?}",
        c.notes
    );
    // Disjoint series in the bad direction: a regression, whatever the threshold.
    set(
        &mut rb,
        &mut rp,
        "cold_push.requests",
        &[390.0, 391.0, 390.0, 390.0, 392.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.50).unwrap();
    assert_eq!(status(&c, "cold_push.requests"), Status::Regression);
}

/// A cost key (one value per recording, no series) is judged against the cost threshold: a
/// 2 % rise is a regression at the default 1 % while the timing threshold is 5 %, and below
/// a 3 % cost threshold.
#[test]
fn cost_keys_use_their_own_tight_threshold() {
    use reports::compare::{DEFAULT_COST_THRESHOLD, compare_with};
    use reports::schema::Metric;
    let key = "route.post-version.c1.server.instructions_per_request";
    let with = |v: f64| {
        let (mut b, mut p) = small();
        b.metrics
            .insert(key.into(), Metric::cost(v, "instructions/request"));
        p.raw.insert(key.into(), vec![v]);
        (b, p)
    };
    let (b, p) = with(167_000.0);
    let (rb, rp) = with(167_000.0 * 1.02);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(c.cost_threshold, DEFAULT_COST_THRESHOLD);
    assert_eq!(status(&c, key), Status::Regression);
    assert_eq!(c.regressions, 1);
    let c = compare_with((&b, &p), (&rb, &rp), 0.05, 0.03).unwrap();
    assert_eq!(status(&c, key), Status::BelowThreshold);
    let (fb, fp) = with(167_000.0 * 0.98);
    let c = compare((&b, &p), (&fb, &fp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::Improvement);
    assert!(reports::compare::markdown(&c).contains("cost keys 1"));
}

/// A syscall count from the one cost sample (exact, a series of one in both recordings) that
/// moved by a few in a thousand is below the cost threshold, not a regression; beyond the
/// threshold it is judged as an exact key again, whatever the timing threshold.
#[test]
fn a_cost_sample_syscall_count_gets_the_cost_threshold() {
    use reports::compare::compare_with;
    use reports::schema::Metric;
    let key = "route.post-version.c4.server.syscalls.fdatasync";
    let with = |v: f64| {
        let (mut b, mut p) = small();
        b.metrics.insert(key.into(), Metric::exact(v, "count"));
        p.raw.insert(key.into(), vec![v]);
        (b, p)
    };
    let (b, p) = with(1004.0);
    let (rb, rp) = with(1009.0);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::BelowThreshold);
    assert_eq!(c.regressions, 0);
    let (wb, wp) = with(1030.0);
    let c = compare_with((&b, &p), (&wb, &wp), 0.50, 0.01).unwrap();
    assert_eq!(status(&c, key), Status::Regression);
    // An exact key of the timing samples (a series of five) still compares exactly.
    let (mut b5, mut p5) = small();
    let (mut r5, mut rp5) = small();
    set(&mut b5, &mut p5, "cold_push.requests", &[1004.0; 5]);
    set(&mut r5, &mut rp5, "cold_push.requests", &[1005.0; 5]);
    let c = compare((&b5, &p5), (&r5, &rp5), 0.05).unwrap();
    assert_eq!(status(&c, "cold_push.requests"), Status::Regression);
}

/// With several cost samples a side (`record --cost --cost-samples 3`), a cost key counts only
/// when its runs lie apart by more than the threshold plus their larger relative range: the
/// changes feed of a server that batches its flushes moved 2.6 % between two recordings of one
/// build, a post route under 0.5 %, and an injected 2 % on the post route must still be found.
#[test]
fn a_cost_key_counts_only_when_its_runs_are_apart_beyond_threshold_and_range() {
    use reports::schema::Metric;
    let with = |key: &str, runs: &[f64]| {
        let (mut b, mut p) = small();
        b.metrics
            .insert(key.into(), Metric::cost(0.0, "instructions/request"));
        set(&mut b, &mut p, key, runs);
        (b, p)
    };
    let feed = "route.changes.c1.server.instructions_per_request";
    let (b, p) = with(feed, &[1_392_000.0, 1_400_000.0, 1_412_000.0]);
    let (rb, rp) = with(feed, &[1_427_000.0, 1_436_000.0, 1_445_000.0]);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    // +2.6 % with runs over 1.4 %: the ranges do not overlap, but they are apart by 1.1 %,
    // under 1 % + 1.4 %.
    assert_eq!(status(&c, feed), Status::BelowThreshold);
    assert_eq!(c.regressions, 0);
    let (wb, wp) = with(feed, &[1_470_000.0, 1_480_000.0, 1_490_000.0]);
    let c = compare((&b, &p), (&wb, &wp), 0.05).unwrap();
    // +5.7 %: apart by 4.1 %, beyond 1 % + 1.4 %.
    assert_eq!(status(&c, feed), Status::Regression);
    let post = "route.post-version.c1.server.instructions_per_request";
    let (b, p) = with(post, &[170_800.0, 170_886.0, 171_000.0]);
    let (rb, rp) = with(post, &[174_200.0, 174_300.0, 174_400.0]);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, post), Status::Regression);
    // A baseline of one run against three: the recording's own spread is the noise.
    let (b1, p1) = with(post, &[170_886.0]);
    let (nb, np) = with(post, &[170_000.0, 174_300.0, 178_000.0]);
    let c = compare((&b1, &p1), (&nb, &np), 0.05).unwrap();
    assert_eq!(status(&c, post), Status::WithinNoise);
}

/// Scales one calibration channel of every sample reading in a sidecar (and adds the round
/// trip where `rtt` is given).
fn machine(p: &mut Provenance, io_factor: f64, rtt: Option<f64>) {
    for s in &mut p.samples {
        for r in &mut s.calibration {
            r.io_ms *= io_factor;
            r.rtt_ms = rtt;
        }
    }
}

/// A recording on a machine whose fsync path is ×2 slower: every timing key 2× slower is
/// reported as not comparable (naming `io_ms ×2.00`), none as a regression, while an exact
/// key that changed still is one.
#[test]
fn a_slower_disk_makes_timing_keys_not_comparable_and_the_verdict_rests_on_exact_keys() {
    use reports::compare::markdown;
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    machine(&mut rp, 2.0, None);
    let slow: Vec<String> = rb
        .metrics
        .iter()
        .filter(|(_, m)| m.class == reports::schema::MetricClass::Timing)
        .map(|(k, _)| k.clone())
        .collect();
    for k in &slow {
        let Some(raw) = rp.raw.get(k) else { continue };
        let series: Vec<f64> = raw.iter().map(|v| v * 2.0).collect();
        set(&mut rb, &mut rp, k, &series);
    }
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(
        c.regressions,
        0,
        "{:?}",
        c.keys
            .iter()
            .filter(|k| k.status == Status::Regression)
            .collect::<Vec<_>>()
    );
    let io = c.machine.iter().find(|m| m.channel == "io_ms").unwrap();
    assert_eq!(io.comparable, Some(false));
    assert_eq!(io.label(), "io_ms ×2.00");
    let k = c
        .keys
        .iter()
        .find(|k| k.key == "cold_push.wall_ms")
        .unwrap();
    assert_eq!(k.status, Status::NotComparable);
    assert_eq!(k.not_comparable, ["io_ms ×2.00"]);
    assert!(matches!(
        k.would_be,
        Some(Status::Regression | Status::Improvement)
    ));
    assert!(c.not_comparable >= slow.len());
    // The round trip was read in neither recording: not checked, and said so.
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("rtt_ms not read in both")),
        "{:?}",
        c.notes
    );
    let md = markdown(&c);
    assert!(md.contains("**0 regressions.**"), "{md}");
    assert!(
        md.contains("not comparable on this machine (io_ms ×2.00)"),
        "{md}"
    );
    assert!(md.contains("| io_ms |"), "{md}");
    assert!(
        md.contains("not comparable: io_ms ×2.00 (would be regression)"),
        "{md}"
    );

    // An exact key that changed on the slower machine is still judged, and regresses.
    set(
        &mut rb,
        &mut rp,
        "cold_push.server.fsyncs_per_file",
        &[8.42; 5],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(c.regressions, 1);
    assert_eq!(
        status(&c, "cold_push.server.fsyncs_per_file"),
        Status::Regression
    );
}

/// Within the tolerance the machines count as the same: timing keys are judged as before.
#[test]
fn channels_within_tolerance_keep_timing_keys_judged() {
    let (b, p) = small();
    let (mut rb, mut rp) = small();
    machine(&mut rp, 1.3, None);
    set(
        &mut rb,
        &mut rp,
        "cold_pull.wall_ms",
        &[900.0, 910.0, 905.0, 899.0, 901.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, "cold_pull.wall_ms"), Status::Regression);
    assert_eq!(c.not_comparable, 0);
    assert!(c.machine.iter().all(|m| m.comparable != Some(false)));
}

/// A round trip read on both sides that differs ×1.8 makes the timing keys not comparable
/// even when cpu and io agree; a tighter or looser tolerance moves the line.
#[test]
fn the_round_trip_channel_is_checked_when_both_have_it_and_tolerances_are_options() {
    use reports::compare::{CompareError, Options, compare_opts};
    let (b, mut p) = small();
    let (rb, mut rp) = small();
    machine(&mut p, 1.0, Some(10.0));
    machine(&mut rp, 1.0, Some(18.0));
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    let rtt = c.machine.iter().find(|m| m.channel == "rtt_ms").unwrap();
    assert_eq!(rtt.comparable, Some(false));
    assert_eq!(status(&c, "cold_push.wall_ms"), Status::NotComparable);
    assert_eq!(status(&c, "cold_push.requests"), Status::Unchanged);
    let mut loose = Options::new(0.05, 0.01);
    loose.machine_tolerance.insert("rtt_ms".into(), 1.0);
    let c = compare_opts((&b, &p), (&rb, &rp), &loose).unwrap();
    assert_eq!(c.not_comparable, 0);
    // --strict-machine: the difference is an error naming the channel and its ratio.
    let strict = Options {
        strict_machine: true,
        ..Options::new(0.05, 0.01)
    };
    let e = compare_opts((&b, &p), (&rb, &rp), &strict).unwrap_err();
    assert!(matches!(e, CompareError::Machine { .. }));
    let msg = e.to_string();
    assert!(msg.contains("rtt_ms ×1.80 beyond ±40.0%"), "{msg}");
    assert!(!msg.contains('\n'));
    // Identical machines pass a strict compare.
    assert!(compare_opts((&b, &p), (&b, &p), &strict).is_ok());
}

/// Cost keys are judged across a machine difference, at the across-speed threshold: a
/// batching server's instruction counts moved by up to 4.8 % on a ×2.29 slower disk, so +2 %
/// there is below it and +8 % a regression; on one speed +2 % is a regression.
#[test]
fn cost_keys_are_judged_across_a_machine_difference_at_a_wider_threshold() {
    use reports::schema::Metric;
    let key = "route.post-version.c1.server.instructions_per_request";
    let with = |v: f64, io: f64| {
        let (mut b, mut p) = small();
        b.metrics
            .insert(key.into(), Metric::cost(v, "instructions/request"));
        p.raw.insert(key.into(), vec![v]);
        machine(&mut p, io, None);
        (b, p)
    };
    let (b, p) = with(167_000.0, 1.0);
    let (rb, rp) = with(167_000.0 * 1.02, 2.2);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::BelowThreshold);
    assert_eq!(c.regressions, 0);
    assert_eq!(
        c.cost_threshold,
        reports::compare::ACROSS_SPEED_COST_THRESHOLD
    );
    assert!(
        c.notes.iter().any(|n| n.contains("judged at 6.0%")),
        "{:?}",
        c.notes
    );
    let (wb, wp) = with(167_000.0 * 1.08, 2.2);
    let c = compare((&b, &p), (&wb, &wp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::Regression);
    assert_eq!(c.regressions, 1);
    let (sb, sp) = with(167_000.0 * 1.02, 1.0);
    let c = compare((&b, &p), (&sb, &sp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::Regression);
}

/// Two recordings of one build drift apart as a whole: series that do not overlap, moved by
/// more than the threshold, but apart by less than the threshold plus their own spread, are
/// below the threshold, not a regression.
#[test]
fn series_apart_by_less_than_threshold_plus_spread_are_not_a_regression() {
    let (mut b, mut p) = small();
    let (mut rb, mut rp) = small();
    let key = "cold_push.wall_ms";
    set(
        &mut b,
        &mut p,
        key,
        &[1000.0, 1020.0, 1040.0, 1060.0, 1080.0],
    );
    // +12 % of medians, disjoint, but the gap (1100 - 1080 = 2 %) is under 5 % + 8 %.
    set(
        &mut rb,
        &mut rp,
        key,
        &[1100.0, 1110.0, 1120.0, 1130.0, 1140.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    let k = c.keys.iter().find(|k| k.key == key).unwrap();
    assert_eq!(k.status, Status::BelowThreshold, "{k:?}");
    assert_eq!(k.beyond_noise, Some(true));
    assert!((k.gap.unwrap() - 20.0 / 1040.0).abs() < 1e-9, "{k:?}");
    assert!(
        (k.allowance.unwrap() - (0.05 + 80.0 / 1040.0)).abs() < 1e-9,
        "{k:?}"
    );
    // The same spread moved far enough is a regression.
    set(
        &mut rb,
        &mut rp,
        key,
        &[1300.0, 1310.0, 1320.0, 1330.0, 1340.0],
    );
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::Regression);
}

/// A thread's CPU read in 10 ms clock ticks: 0.07 s against 0.08 s in every sample is one
/// tick, within the values' resolution, not +14 %.
#[test]
fn one_step_of_the_values_resolution_is_not_a_change() {
    let (mut b, mut p) = small();
    let (mut rb, mut rp) = small();
    let key = "cold_push.wall_ms";
    set(&mut b, &mut p, key, &[0.07; 5]);
    set(&mut rb, &mut rp, key, &[0.08; 5]);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::WithinNoise);
    // Two ticks apart is a change.
    set(&mut rb, &mut rp, key, &[0.09; 5]);
    let c = compare((&b, &p), (&rb, &rp), 0.05).unwrap();
    assert_eq!(status(&c, key), Status::Regression);
}

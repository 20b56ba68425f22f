//! The decision-rule parser (good and malformed input) and KEEP / REJECT / INCONCLUSIVE on
//! constructed analyses whose intervals are known.

use std::collections::BTreeMap;

use reports::ab::{
    Better, Cmp, DecisionRules, MetricAnalysis, Order, Outcome, RuleStatus, RuleTarget,
    analyse_metric, decide, parse_rule,
};

#[test]
fn parses_good_rules() {
    let r = parse_rule("server.cpu_s <= -10%").unwrap();
    assert_eq!(r.target, RuleTarget::Metric("server.cpu_s".into()));
    assert_eq!((r.cmp, r.threshold_pct), (Cmp::Le, -10.0));
    assert_eq!(r.text, "server.cpu_s <= -10%");
    let r = parse_rule("all <= +3%").unwrap();
    assert_eq!(
        (r.target, r.cmp, r.threshold_pct),
        (RuleTarget::All, Cmp::Le, 3.0)
    );
    let r = parse_rule("  rps>=2.5 % ").unwrap();
    assert_eq!((r.cmp, r.threshold_pct), (Cmp::Ge, 2.5));
    let r = parse_rule("latency.p95_ms ≤ 0%").unwrap();
    assert_eq!((r.cmp, r.threshold_pct), (Cmp::Le, 0.0));
    assert_eq!(parse_rule("x >= .5%").unwrap().threshold_pct, 0.5);
}

#[test]
fn malformed_rules_name_the_text() {
    for (text, why) in [
        ("", "no '<=' or '>=' comparison"),
        ("server.cpu_s", "no '<=' or '>=' comparison"),
        ("server.cpu_s < -10%", "no '<=' or '>=' comparison"),
        ("server.cpu_s <= -10", "must be a percent"),
        (
            "server.cpu_s <= abc%",
            "'abc' is not a signed decimal number",
        ),
        ("server.cpu_s <= %", "'' is not a signed decimal number"),
        ("server.cpu_s <= inf%", "not a signed decimal"),
        ("server.cpu_s <= NaN%", "not a signed decimal"),
        ("server.cpu_s <= 1e3%", "not a signed decimal"),
        ("server.cpu_s <= --5%", "not a signed decimal"),
        ("server.cpu_s <= 5%%", "not a signed decimal"),
        ("server.cpu_s <= -100%", "-100 %"),
        ("<= 5%", "no metric"),
        ("server cpu <= 5%", "contains a space"),
        ("a <= 5% <= 6%", "more than one comparison"),
        ("a <= >= 5%", "more than one comparison"),
    ] {
        let err = parse_rule(text).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("malformed rule '{text}': ")),
            "{err}"
        );
        assert!(err.contains(why), "{text}: {err}");
        assert!(!err.ends_with('.'));
    }
    let err = DecisionRules::parse(Some("all <= -10%"), &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "keep-if rule 'all <= -10%' must name one metric, not 'all'"
    );
}

const ORDERS: [Order; 6] = [
    Order::AFirst,
    Order::BFirst,
    Order::BFirst,
    Order::AFirst,
    Order::BFirst,
    Order::AFirst,
];
const BASE: [f64; 6] = [100.0, 102.0, 98.0, 101.0, 99.0, 103.0];

/// A metric whose B is `factor` times A with per-round multiplicative `noise`. With six
/// rounds the interval is [min, max] of the per-round ratios, so it is known by construction.
fn metric(better: Better, factor: f64, noise: [f64; 6]) -> MetricAnalysis {
    let b: Vec<f64> = BASE
        .iter()
        .zip(noise)
        .map(|(a, e)| a * factor * (1.0 + e))
        .collect();
    analyse_metric(&BASE, &b, &ORDERS, better, 0.03, 1).unwrap()
}

const TIGHT: [f64; 6] = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004];
const WIDE: [f64; 6] = [0.3, -0.2, 0.25, -0.3, 0.1, -0.15];

fn analyses(items: Vec<(&str, MetricAnalysis)>) -> BTreeMap<String, MetricAnalysis> {
    items.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn rules(keep: Option<&str>, guards: &[&str]) -> DecisionRules {
    DecisionRules::parse(keep, guards).unwrap()
}

#[test]
fn keep_when_cpu_drops_and_nothing_gets_worse() {
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.8, TIGHT)), // [-20.4 %, -19.6 %]
        ("p95_ms", metric(Better::Lower, 1.0, TIGHT)),       // [-0.4 %, +0.4 %]
        ("rps", metric(Better::Higher, 1.01, TIGHT)),        // +1 %: an improvement
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Keep, "{}", d.reason);
    assert_eq!(d.keep_if.as_ref().unwrap().status, RuleStatus::Holds);
    // `all` covers every metric except the keep-if's own.
    let covered: Vec<&str> = d.guards.iter().map(|g| g.metric.as_str()).collect();
    assert_eq!(covered, vec!["p95_ms", "rps"]);
    // rps is read in the worsening frame: +1 % throughput is -1 % worsening.
    let rps = &d.guards[1];
    assert!(rps.worsening_frame && rps.interval_pct.unwrap().hi < 0.0);
}

#[test]
fn reject_when_a_guard_is_confidently_violated() {
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.8, TIGHT)),
        ("p95_ms", metric(Better::Lower, 1.2, TIGHT)), // 20 % slower
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Reject);
    assert_eq!(d.reason, "'all <= +3%' violated by p95_ms");
}

#[test]
fn higher_is_better_metric_that_falls_violates_all_guard() {
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.8, TIGHT)),
        ("rps", metric(Better::Higher, 0.9, TIGHT)), // throughput fell 10 %
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Reject, "{}", d.reason);
    // Named, the threshold is the raw change: `rps >= -15%` holds for a 10 % drop.
    let d = decide(&rules(None, &["rps >= -15%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Keep, "{}", d.reason);
    assert_eq!(d.guards[0].status, RuleStatus::Holds);
}

#[test]
fn reject_when_keep_if_is_confidently_false() {
    // CPU fell only 2 %: the whole interval is above -10 %.
    let a = analyses(vec![("server.cpu_s", metric(Better::Lower, 0.98, TIGHT))]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &[]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Reject);
    assert_eq!(d.keep_if.unwrap().status, RuleStatus::Violated);
}

#[test]
fn inconclusive_when_noise_straddles_the_threshold() {
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.9, WIDE)),
        ("p95_ms", metric(Better::Lower, 1.0, WIDE)), // unknown guard: does not block
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Inconclusive, "{}", d.reason);
    assert_eq!(d.guards[0].status, RuleStatus::Unknown);
    // And a clear keep-if with an unknown guard is KEEP (the guard is not *confidently* violated).
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.8, TIGHT)),
        ("p95_ms", metric(Better::Lower, 1.0, WIDE)),
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Keep);
}

#[test]
fn too_few_rounds_make_every_rule_unknown() {
    let orders = [Order::AFirst, Order::BFirst];
    let m = analyse_metric(
        &[100.0, 100.0],
        &[50.0, 51.0],
        &orders,
        Better::Lower,
        0.03,
        1,
    )
    .unwrap();
    let a = analyses(vec![("server.cpu_s", m)]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &[]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Inconclusive);
    assert_eq!(d.keep_if.unwrap().interval_pct, None);
}

#[test]
fn ge_rules_and_no_rules() {
    let a = analyses(vec![("rps", metric(Better::Higher, 1.2, TIGHT))]);
    let d = decide(&rules(Some("rps >= +10%"), &[]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Keep);
    let d = decide(&rules(Some("rps >= +30%"), &[]), &a).unwrap();
    assert_eq!(d.outcome, Outcome::Reject);
    let d = decide(&DecisionRules::default(), &a).unwrap();
    assert_eq!(
        (d.outcome, d.reason.as_str()),
        (Outcome::Keep, "no rule given")
    );
}

#[test]
fn unknown_metric_is_an_error_naming_it() {
    let a = analyses(vec![("server.cpu_s", metric(Better::Lower, 0.8, TIGHT))]);
    let r = rules(Some("server.cpu_s <= -10%"), &["p99_ms <= +3%"]);
    let err = decide(&r, &a).unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown metric 'p99_ms' in rule 'p99_ms <= +3%' (known: server.cpu_s)"
    );
    assert!(r.check_metrics(["server.cpu_s", "p99_ms"]).is_ok());
}

#[test]
fn decision_round_trips_through_json() {
    let a = analyses(vec![
        ("server.cpu_s", metric(Better::Lower, 0.8, TIGHT)),
        ("p95_ms", metric(Better::Lower, 1.0, TIGHT)),
    ]);
    let d = decide(&rules(Some("server.cpu_s <= -10%"), &["all <= +3%"]), &a).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"outcome\":\"KEEP\""), "{json}");
    assert_eq!(d.outcome.to_string(), "KEEP");
    assert_eq!(
        serde_json::from_str::<reports::ab::Decision>(&json).unwrap(),
        d
    );
}

#[test]
fn rules_may_name_exact_metrics() {
    let a = analyses(vec![("p95_ms", metric(Better::Lower, 1.0, TIGHT))]);
    let mut exact = BTreeMap::new();
    exact.insert("server.fsyncs_per_post".to_string(), (5.0, 4.0)); // -20 % exactly
    exact.insert("requests.put".to_string(), (120.0, 120.0));
    exact.insert("errors".to_string(), (0.0, 3.0));
    let r = rules(
        Some("server.fsyncs_per_post <= -20%"),
        &["all <= +3%", "requests.put <= 0%"],
    );
    let d = reports::ab::decide_with_exact(&r, &a, &exact).unwrap();
    assert_eq!(d.outcome, Outcome::Keep, "{}", d.reason);
    let k = d.keep_if.unwrap();
    assert_eq!(k.status, RuleStatus::Holds);
    let i = k.interval_pct.unwrap();
    assert!((i.lo + 20.0).abs() < 1e-12 && i.lo == i.hi);
    // `all` does not reach exact metrics; a named one does.
    assert_eq!(d.guards.len(), 2);
    let r = rules(Some("server.fsyncs_per_post <= -25%"), &[]);
    let d = reports::ab::decide_with_exact(&r, &a, &exact).unwrap();
    assert_eq!(d.outcome, Outcome::Reject);
    // From 0 there is no percent: unknown, hence INCONCLUSIVE.
    let r = rules(Some("errors <= 0%"), &[]);
    let d = reports::ab::decide_with_exact(&r, &a, &exact).unwrap();
    assert_eq!(d.outcome, Outcome::Inconclusive);
    // Without the exact map the name is unknown.
    assert!(decide(&r, &a).is_err());
}

//! The A/B report from full result documents: the one a real `vaultbench ab` A/A run wrote
//! (`tests/fixtures/ab.json`), and a B-is-better result built on it whose analyses the real
//! `ab::analyse_metric` made from crafted per-round values.

use std::collections::BTreeMap;

use reports::ab::{
    BalancePlan, Better, Decision, ExactDiff, Order, OrderCount, OrderCounts, Outcome,
    analyse_metric, order_counts, plan_orders,
};
use reports::render::{Document, Format, charts, render};
use reports::schema::{AbExact, AbResult, AbRound, TargetIdentity};

use crate::fixtures::RECORDED_AT;

fn target(command: &str, id: &str) -> TargetIdentity {
    TargetIdentity {
        command: command.into(),
        executable: id.into(),
        sha256: id.into(),
        version: id.into(),
        inputs: Default::default(),
        note: None,
        git: None,
    }
}

/// 8 rounds: server CPU drops ~12 % in B, wall time does not move. The machine, harness and
/// each round's samples are the real run's.
pub fn ab_result() -> AbResult {
    let orders: Vec<Order> = plan_orders(8, 0xab).unwrap();
    let a_cpu = [2.50, 2.61, 2.55, 2.48, 2.58, 2.53, 2.60, 2.49];
    let b_cpu: Vec<f64> = a_cpu
        .iter()
        .enumerate()
        .map(|(i, x)| x * (0.88 + 0.005 * (i % 3) as f64))
        .collect();
    let a_wall = [
        1210.0, 1190.0, 1225.0, 1201.0, 1215.0, 1198.0, 1207.0, 1220.0,
    ];
    let b_wall = [
        1212.0, 1188.0, 1226.0, 1199.0, 1217.0, 1197.0, 1209.0, 1219.0,
    ];
    let cpu = analyse_metric(&a_cpu, &b_cpu, &orders, Better::Lower, 0.03, 1).unwrap();
    let wall = analyse_metric(&a_wall, &b_wall, &orders, Better::Lower, 0.03, 2).unwrap();
    let real = crate::fixtures::ab();
    let kept: Vec<usize> = (0..orders.len()).collect();
    let rounds = orders
        .iter()
        .enumerate()
        .map(|(i, &order)| AbRound {
            index: i,
            order,
            ..real.rounds[0].clone()
        })
        .collect();
    AbResult {
        scenario: "small".into(),
        profile: "small".into(),
        seed: 0x5eed,
        aa: false,
        recorded_at: RECORDED_AT.into(),
        a: target("ref", "a"),
        b: target("ref --group-commit", "b"),
        rounds_planned: orders.len(),
        rounds,
        order_counts: Some(order_counts(&orders, &kept)),
        balance: BalancePlan {
            kept,
            dropped: Vec::new(),
        },
        tau: 0.03,
        tau_source: "default".into(),
        units: BTreeMap::from([
            ("server.cpu_s".into(), "s".into()),
            ("cold_push.wall_ms".into(), "ms".into()),
        ]),
        metrics: BTreeMap::from([
            ("server.cpu_s".into(), cpu),
            ("cold_push.wall_ms".into(), wall),
        ]),
        exact_differences: BTreeMap::from([(
            "cold_push.server.fsyncs.journal".into(),
            AbExact {
                unit: "count".into(),
                diff: ExactDiff {
                    a: 100.0,
                    b: 25.0,
                    a_stable: true,
                    b_stable: true,
                },
            },
        )]),
        exact_same: Vec::new(),
        gate: crate::fixtures::small().1.gate,
        rules: vec!["keep-if server.cpu_s <= -10%".into(), "all <= +3%".into()],
        decision: Some(Decision {
            outcome: Outcome::Keep,
            keep_if: None,
            guards: Vec::new(),
            reason: "server.cpu_s dropped beyond 10% and no metric is worse than 3%".into(),
        }),
        ..real
    }
}

/// The real run's report: the Markdown pinned whole (its timestamp redacted), the JSON report
/// carrying the result as it is on disk, the HTML with a forest plot and per-round charts.
#[test]
fn the_real_ab_result_renders_in_every_format() {
    let r = crate::fixtures::ab();
    let md = render(&Document::Ab(&r), Format::Md).unwrap();
    assert!(
        md.contains("2 of 2 planned rounds kept (1 A-first, 1 B-first) (A/A run"),
        "{md}"
    );
    assert!(md.contains("Decision: KEEP.") && md.contains("- rule: `all <= +50%`"));
    insta::assert_snapshot!("ab_md", md.replace(&r.recorded_at, "[timestamp]"));

    let text = render(&Document::Ab(&r), Format::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "vaultbench.report");
    assert_eq!(v["report"], "ab");
    assert_eq!(v["summary"]["decision"], "KEEP");
    assert_eq!(v["summary"]["rounds_kept"], 2);
    assert_eq!(
        v["summary"]["verdicts"].as_object().unwrap().len(),
        r.metrics.len()
    );
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(crate::fixtures::dir().join("ab.json")).unwrap())
            .unwrap();
    assert!(
        v["result"] == on_disk,
        "the report carries the result as written"
    );

    let html = render(&Document::Ab(&r), Format::Html).unwrap();
    let cs = charts(&Document::Ab(&r)).unwrap();
    assert_eq!(cs[0].slug, "ab-forest");
    assert_eq!(cs.len(), 1 + 6, "the forest plot and six per-round charts");
    assert_eq!(html.matches("<svg").count(), cs.len());
    assert!(html.contains("<p class=\"keep\">Decision: KEEP."), "{html}");
    assert!(html.contains("round 2 B") && !html.contains("http"));
}

/// A result written before `order_counts` existed: the counts come from its rounds and
/// `balance.kept`, and the report reads as it does with them.
#[test]
fn a_result_without_order_counts_counts_its_rounds() {
    let r = crate::fixtures::ab();
    let older = AbResult {
        order_counts: None,
        ..r.clone()
    };
    assert_eq!(
        render(&Document::Ab(&older), Format::Md).unwrap(),
        render(&Document::Ab(&r), Format::Md).unwrap()
    );
}

#[test]
fn ab_markdown_has_changes_intervals_verdicts_and_the_decision() {
    let v = ab_result();
    let md = render(&Document::Ab(&v), Format::Md).unwrap();
    assert!(md.contains("Decision: KEEP."), "{md}");
    let cpu_line = md
        .lines()
        .find(|l| l.starts_with("| server.cpu_s"))
        .unwrap();
    assert!(cpu_line.contains("| better |"), "{cpu_line}");
    assert!(
        cpu_line.contains("−1"),
        "a negative change with its interval: {cpu_line}"
    );
    let wall_line = md
        .lines()
        .find(|l| l.starts_with("| cold_push.wall_ms"))
        .unwrap();
    assert!(
        wall_line.contains("no change") || wall_line.contains("inconclusive"),
        "{wall_line}"
    );
    assert!(md.contains("cold_push.server.fsyncs.journal | count | 100 | 25"));
    assert!(
        md.contains("## Calibration") && md.contains("| io_ms | 10 |"),
        "{md}"
    );
    assert!(
        md.contains("## What these numbers are not") && md.contains("With 8 rounds"),
        "{md}"
    );
    assert!(!md.contains("A/A run (the same build"), "not an A/A run");
}

#[test]
fn ab_html_has_a_forest_plot_and_rounds_coloured_by_order() {
    let v = ab_result();
    let cs = charts(&Document::Ab(&v)).unwrap();
    let slugs: Vec<&str> = cs.iter().map(|c| c.slug.as_str()).collect();
    assert_eq!(
        slugs,
        [
            "ab-forest",
            "ab-rounds-server-cpu-s",
            "ab-rounds-cold-push-wall-ms"
        ]
    );
    let html = render(&Document::Ab(&v), Format::Html).unwrap();
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains("ran first") && html.contains("ran second"));
    assert!(!html.contains("http"));
}

#[test]
fn write_a_sample_ab_page_when_asked() {
    // For looking at by eye (headless Chromium): VAULTBENCH_WRITE_AB_HTML=ab.html.
    if let Some(path) = std::env::var_os("VAULTBENCH_WRITE_AB_HTML") {
        let v = ab_result();
        std::fs::write(path, render(&Document::Ab(&v), Format::Html).unwrap()).unwrap();
    }
}

#[test]
fn an_odd_round_count_states_its_order_counts_and_what_they_cost() {
    // Written by this build: the counts are in the document.
    let mut v = ab_result();
    v.rounds_planned = 3;
    let count = |a_first, b_first| OrderCount { a_first, b_first };
    v.order_counts = Some(OrderCounts {
        planned: count(2, 1),
        kept: count(2, 1),
    });
    let md = render(&Document::Ab(&v), Format::Md).unwrap();
    assert!(
        md.contains("of 3 planned rounds kept (2 A-first, 1 B-first)"),
        "{md}"
    );
    assert!(
        md.contains("Not balanced for order. The kept rounds are 2 A-first, 1 B-first"),
        "{md}"
    );
    let html = render(&Document::Ab(&v), Format::Html).unwrap();
    assert!(html.contains("(2 A-first, 1 B-first)"), "{html}");
    // An older document without them: counted from its rounds and the kept indices.
    let mut v = ab_result();
    v.order_counts = None;
    v.rounds.truncate(2);
    v.rounds[0].order = Order::BFirst;
    v.rounds[1].order = Order::AFirst;
    v.balance.kept = vec![0, 1];
    let md = render(&Document::Ab(&v), Format::Md).unwrap();
    assert!(md.contains("(1 A-first, 1 B-first)"), "{md}");
    assert!(!md.contains("Not balanced for order"), "{md}");
}

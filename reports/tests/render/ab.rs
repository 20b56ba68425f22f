//! The A/B report from a result document shaped like `schema::AbResult`, with analyses made by
//! the real `ab::analyse_metric` on crafted per-round values.

use reports::ab::{Better, Order, analyse_metric, plan_orders};
use reports::render::{Document, Format, charts, render};
use serde_json::json;

/// 8 rounds: server CPU drops ~12 % in B, wall time does not move.
pub fn ab_result() -> serde_json::Value {
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
    json!({
        "kind": "vaultbench.ab",
        "format_version": 1,
        "scenario": "small",
        "profile": "small",
        "seed": 0x5eed,
        "aa": false,
        "recorded_at": "2026-11-30T12:00:00Z",
        "a": { "command": "ref", "executable": "a", "sha256": "a", "version": "a" },
        "b": { "command": "ref --group-commit", "executable": "b", "sha256": "b", "version": "b" },
        "rounds_planned": 8,
        "tau": 0.03,
        "tau_source": "default",
        "units": { "server.cpu_s": "s", "cold_push.wall_ms": "ms" },
        "metrics": { "server.cpu_s": cpu, "cold_push.wall_ms": wall },
        "exact_differences": { "cold_push.server.fsyncs.journal": { "unit": "count", "diff": { "a": 100.0, "b": 25.0, "a_stable": true, "b_stable": true } } },
        "gate": crate::fixtures::small().1.gate,
        "rules": ["keep-if server.cpu_s <= -10%", "all <= +3%"],
        "decision": { "outcome": "KEEP", "reason": "server.cpu_s dropped beyond 10% and no metric is worse than 3%" },
    })
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
fn an_ab_document_without_metrics_is_named() {
    let v = json!({ "kind": "vaultbench.ab" });
    let e = render(&Document::Ab(&v), Format::Md)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "a/b result: no `metrics` object");
}

#[test]
fn write_a_sample_ab_page_when_asked() {
    // For looking at by eye (headless Chromium): VAULTBENCH_WRITE_AB_HTML=/tmp/ab.html.
    if let Some(path) = std::env::var_os("VAULTBENCH_WRITE_AB_HTML") {
        let v = ab_result();
        std::fs::write(path, render(&Document::Ab(&v), Format::Html).unwrap()).unwrap();
    }
}

#[test]
fn an_odd_round_count_states_its_order_counts_and_what_they_cost() {
    // Written by this build: the counts are in the document.
    let mut v = ab_result();
    v["rounds_planned"] = json!(3);
    v["order_counts"] = json!({
        "planned": { "a_first": 2, "b_first": 1 },
        "kept": { "a_first": 2, "b_first": 1 },
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
    v["rounds"] = json!([{ "index": 0, "order": "b_first" }, { "index": 1, "order": "a_first" }]);
    v["balance"] = json!({ "kept": [0, 1], "dropped": [] });
    let md = render(&Document::Ab(&v), Format::Md).unwrap();
    assert!(md.contains("(1 A-first, 1 B-first)"), "{md}");
    assert!(!md.contains("Not balanced for order"), "{md}");
}

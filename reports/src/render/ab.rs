//! The A/B result report: the table of changes with intervals and verdicts, a forest plot of
//! per-metric change, per-round values coloured by which build ran first, and the decision.
//!
//! Read defensively from JSON (`schema::AbResult`'s field names: `metrics.<key>.{estimate_pct,
//! ci_pct, verdict, a, b, orders, ...}`, `exact_differences`, `decision`): the A/B document was
//! designed in parallel with this renderer, and a report of an older or partial result should
//! degrade to fewer columns rather than fail.

use serde_json::Value;

use super::RenderError;
use super::fmt::{html_escape, html_table, md_table, num, pct, signed_pct};
use crate::charts::{Chart, ChartKind, ForestRow, RoundPoint};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AbMetric {
    pub key: String,
    pub unit: String,
    pub better: String,
    pub a_median: Option<f64>,
    pub b_median: Option<f64>,
    pub estimate_pct: Option<f64>,
    pub ci_pct: Option<(f64, f64)>,
    pub mde_pct: Option<f64>,
    pub p: Option<f64>,
    pub verdict: String,
    pub reason: String,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub a_first: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AbView {
    pub scenario: String,
    pub aa: bool,
    pub recorded_at: String,
    pub a_target: String,
    pub b_target: String,
    pub rounds_planned: Option<u64>,
    pub rounds_kept: usize,
    /// Rounds per order, planned and kept (from `order_counts`, or counted from `rounds`
    /// and `balance.kept` in an older result); `None` when neither is there.
    pub orders: Option<crate::ab::OrderCounts>,
    pub tau: Option<f64>,
    pub tau_source: String,
    pub metrics: Vec<AbMetric>,
    pub exact: Vec<(String, String, f64, f64)>,
    pub rules: Vec<String>,
    pub decision: Option<(String, String)>,
    /// The gate over every kept sample of both builds.
    pub calibration: super::recording::Calibration,
}

/// Every kept sample's in-sample contention from an A/B result's rounds (`round N A`).
fn round_contention(v: &Value) -> Vec<super::recording::ContentionRow> {
    let Some(rounds) = v.get("rounds").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, r) in rounds.iter().enumerate() {
        for arm in ["a", "b"] {
            let c = r
                .get(arm)
                .and_then(|s| s.get("contention"))
                .filter(|c| !c.is_null())
                .and_then(|c| serde_json::from_value(c.clone()).ok());
            if let Some(contention) = c {
                out.push(super::recording::ContentionRow {
                    sample: format!("round {} {}", i + 1, arm.to_uppercase()),
                    contention,
                });
            }
        }
    }
    out
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}
fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}
fn floats(v: &Value, k: &str) -> Vec<f64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// The order counts of a result: its `order_counts`, else counted from each round's `order`
/// and `balance.kept`.
fn order_counts(v: &Value) -> Option<crate::ab::OrderCounts> {
    if let Some(c) = v
        .get("order_counts")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
    {
        return Some(c);
    }
    let orders: Vec<crate::ab::Order> = v
        .get("rounds")?
        .as_array()?
        .iter()
        .map(|r| serde_json::from_value(r.get("order")?.clone()).ok())
        .collect::<Option<_>>()?;
    let kept: Vec<usize> = v
        .get("balance")?
        .get("kept")?
        .as_array()?
        .iter()
        .map(|i| i.as_u64().map(|i| i as usize))
        .collect::<Option<_>>()?;
    Some(crate::ab::order_counts(&orders, &kept))
}

impl AbView {
    pub fn read(v: &Value) -> Result<AbView, RenderError> {
        let metrics_obj = v
            .get("metrics")
            .and_then(Value::as_object)
            .ok_or_else(|| RenderError::Ab("no `metrics` object".into()))?;
        let units = v.get("units");
        let mut metrics = Vec::new();
        for (key, m) in metrics_obj {
            let ci = m
                .get("ci_pct")
                .and_then(|c| Some((f(c, "lo")?, f(c, "hi")?)));
            let orders: Vec<bool> = m
                .get("orders")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|o| o.as_str() == Some("a_first")).collect())
                .unwrap_or_default();
            metrics.push(AbMetric {
                key: key.clone(),
                unit: units.map(|u| s(u, key)).unwrap_or_default(),
                better: s(m, "better"),
                a_median: f(m, "a_median"),
                b_median: f(m, "b_median"),
                estimate_pct: f(m, "estimate_pct"),
                ci_pct: ci,
                mde_pct: f(m, "mde_pct"),
                p: f(m, "p_bh").or_else(|| m.get("wilcoxon").and_then(|w| f(w, "p_two_sided"))),
                verdict: s(m, "verdict").replace('_', " "),
                reason: s(m, "reason"),
                a: floats(m, "a"),
                b: floats(m, "b"),
                a_first: orders,
            });
        }
        let exact = v
            .get("exact_differences")
            .and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, e)| {
                        let d = e.get("diff").unwrap_or(e);
                        Some((k.clone(), s(e, "unit"), f(d, "a")?, f(d, "b")?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rounds = v.get("rounds").and_then(Value::as_array);
        Ok(AbView {
            scenario: s(v, "scenario"),
            aa: v.get("aa").and_then(Value::as_bool).unwrap_or(false),
            recorded_at: s(v, "recorded_at"),
            a_target: v.get("a").map(|a| s(a, "command")).unwrap_or_default(),
            b_target: v.get("b").map(|b| s(b, "command")).unwrap_or_default(),
            rounds_planned: v.get("rounds_planned").and_then(Value::as_u64),
            rounds_kept: metrics
                .first()
                .map_or_else(|| rounds.map_or(0, Vec::len), |m| m.a.len()),
            orders: order_counts(v),
            tau: f(v, "tau"),
            tau_source: s(v, "tau_source"),
            metrics,
            exact,
            rules: v
                .get("rules")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|r| r.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            calibration: {
                let gate: Option<contract::gate::Gate> = match v.get("gate") {
                    None | Some(Value::Null) => None,
                    Some(g) => Some(
                        serde_json::from_value(g.clone())
                            .map_err(|e| RenderError::Ab(format!("gate: {e}")))?,
                    ),
                };
                let mut c = super::recording::calibration(gate.as_ref());
                c.samples = round_contention(v);
                c
            },
            decision: v
                .get("decision")
                .filter(|d| !d.is_null())
                .map(|d| (s(d, "outcome"), s(d, "reason"))),
        })
    }
}

fn intro(r: &AbView) -> String {
    format!(
        "Scenario {}, {} of {} planned rounds kept{}{}; practical threshold τ = {} ({}). A: `{}`; B: `{}`. Recorded {}.",
        r.scenario,
        r.rounds_kept,
        r.rounds_planned.map_or("?".into(), |n| n.to_string()),
        r.orders.map_or(String::new(), |c| format!(" ({})", c.kept)),
        if r.aa {
            " (A/A run: both arms are the same build)"
        } else {
            ""
        },
        r.tau.map_or("?".into(), pct),
        if r.tau_source.is_empty() {
            "source not recorded"
        } else {
            &r.tau_source
        },
        r.a_target,
        r.b_target,
        r.recorded_at
    )
}

fn change_rows(r: &AbView) -> Vec<Vec<String>> {
    r.metrics
        .iter()
        .map(|m| {
            vec![
                m.key.clone(),
                m.a_median.map_or("–".into(), num),
                m.b_median.map_or("–".into(), num),
                m.estimate_pct.map_or("–".into(), |e| signed_pct(e / 100.0)),
                m.ci_pct.map_or("–".into(), |(lo, hi)| {
                    format!("{} … {}", signed_pct(lo / 100.0), signed_pct(hi / 100.0))
                }),
                m.mde_pct.map_or("–".into(), |x| format!("{x:.1}%")),
                m.p.map_or("–".into(), num),
                m.verdict.clone(),
            ]
        })
        .collect()
}

const CHANGE_HEADERS: [&str; 8] = [
    "metric",
    "A median",
    "B median",
    "change",
    "95% interval",
    "MDE",
    "p (BH)",
    "verdict",
];

fn decision_text(r: &AbView) -> String {
    match &r.decision {
        Some((o, why)) => format!("Decision: {o}. {why}"),
        None if r.rules.is_empty() => "No decision rule was given.".into(),
        None => "Rules were given but no decision was recorded.".into(),
    }
}

/// The A/B report's "what these numbers are not", from the run's own facts.
pub(crate) fn not_claims(r: &AbView) -> Vec<String> {
    let mut out = Vec::new();
    if r.aa {
        let flagged: Vec<&str> = r
            .metrics
            .iter()
            .filter(|m| m.verdict == "better" || m.verdict == "worse")
            .map(|m| m.key.as_str())
            .collect();
        out.push(format!(
            "Not a comparison of two builds. This is an A/A run (the same build in both arms): each of its {} better/worse verdict(s) is a false positive{}, and it measures the noise floor.",
            flagged.len(),
            flagged.first().map_or(String::new(), |k| format!(" (e.g. {k})"))
        ));
    }
    if let Some(planned) = r.rounds_planned
        && (r.rounds_kept as u64) < planned
    {
        out.push(format!(
            "Not every planned round. {} of {planned} rounds were kept; failed or refused rounds were dropped to keep the order balanced.",
            r.rounds_kept
        ));
    }
    if let Some(c) = r.orders.filter(|c| c.kept.is_uneven()) {
        out.push(format!(
            "Not balanced for order. The kept rounds are {}: an effect of which build runs first is not cancelled for the one extra round (cost keys counted under Valgrind do not depend on order; timing keys may).",
            c.kept
        ));
    }
    let mdes: Vec<f64> = r.metrics.iter().filter_map(|m| m.mde_pct).collect();
    let none = r.metrics.len() - mdes.len();
    let mut s = format!(
        "Not sensitive to small changes. With {} rounds",
        r.rounds_kept
    );
    if let Some(med) = crate::schema::median(&mdes) {
        s.push_str(&format!(
            ", the median minimum detectable effect is {med:.1}%"
        ));
    }
    if none > 0 {
        s.push_str(if mdes.is_empty() { ", " } else { "; " });
        s.push_str(&format!(
            "{none} of {} metrics have no detectable effect at all at this round count",
            r.metrics.len()
        ));
    }
    s.push_str(". \"Inconclusive\" means the run could not tell, not that nothing changed.");
    out.push(s);
    out.push("Not a claim about other machines. Both builds ran interleaved on this one machine; the ratio is what transfers, not the absolute values.".into());
    out
}

pub(crate) fn markdown(r: &AbView) -> String {
    let mut out = format!("# vaultbench A/B: {}\n\n{}\n\n", r.scenario, intro(r));
    out.push_str(&format!("## Decision\n\n{}\n\n", decision_text(r)));
    for rule in &r.rules {
        out.push_str(&format!("- rule: `{rule}`\n"));
    }
    if !r.rules.is_empty() {
        out.push('\n');
    }
    out.push_str("## Changes (B vs A)\n\nHodges–Lehmann estimate of the per-round change with its 95% interval; the verdict compares the interval with ±τ.\n\n");
    out.push_str(&md_table(&CHANGE_HEADERS, &change_rows(r)));
    if !r.exact.is_empty() {
        out.push_str("\n## Exact keys that differ\n\n");
        let rows: Vec<Vec<String>> = r
            .exact
            .iter()
            .map(|(k, u, a, b)| vec![k.clone(), u.clone(), num(*a), num(*b)])
            .collect();
        out.push_str(&md_table(&["key", "unit", "A", "B"], &rows));
    }
    let cal = super::md::calibration_section(&r.calibration);
    let mut sections = vec![cal];
    sections.extend(super::md::contention_sections(&r.calibration));
    for cal in sections.iter().filter(|c| !c.rows.is_empty()) {
        out.push_str(&format!("\n## {}\n\n{}\n\n", cal.heading, cal.intro));
        out.push_str(&md_table(&cal.headers, &cal.rows));
    }
    out.push_str("\n## What these numbers are not\n\n");
    for c in not_claims(r) {
        out.push_str(&format!("- {c}\n"));
    }
    out.push_str("\n## Why each verdict\n\n");
    for m in &r.metrics {
        out.push_str(&format!(
            "- {}: {}\n",
            m.key,
            if m.reason.is_empty() {
                "(no reason recorded)"
            } else {
                &m.reason
            }
        ));
    }
    out
}

pub(crate) fn json(r: &AbView, v: &Value) -> Value {
    serde_json::json!({
        "kind": super::KIND_REPORT,
        "report": "ab",
        "format_version": crate::schema::FORMAT_VERSION,
        "summary": {
            "scenario": r.scenario,
            "rounds_kept": r.rounds_kept,
            "decision": r.decision.as_ref().map(|d| &d.0),
            "verdicts": r.metrics.iter().map(|m| (m.key.clone(), Value::from(m.verdict.clone()))).collect::<serde_json::Map<_, _>>(),
        },
        "result": v,
    })
}

/// Metrics with the most rounds-worth of evidence first: the forest plot and the per-round
/// charts are capped so a page stays readable.
const MAX_FOREST_ROWS: usize = 30;
const MAX_ROUND_CHARTS: usize = 6;

/// Which metrics the forest plot keeps when there are too many: 0 = a decided verdict,
/// 1 = a headline metric (server CPU and RSS, wall times, throughput), 2 = the rest.
fn forest_rank(m: &AbMetric) -> u8 {
    let k = m.key.as_str();
    if m.verdict == "better" || m.verdict == "worse" {
        0
    } else if k.starts_with("server.cpu")
        || k.starts_with("server.peak_rss")
        || k.ends_with(".wall_ms")
        || k.ends_with(".rps")
        || k.starts_with("edit.p")
    {
        1
    } else {
        2
    }
}

pub(crate) fn charts(r: &AbView) -> Vec<Chart> {
    let mut out = Vec::new();
    let mut rows: Vec<(u8, ForestRow)> = r
        .metrics
        .iter()
        .filter_map(|m| {
            let (lo, hi) = m.ci_pct?;
            Some((
                forest_rank(m),
                ForestRow {
                    label: m.key.clone(),
                    estimate_pct: m.estimate_pct?,
                    low_pct: lo,
                    high_pct: hi,
                    verdict: m.verdict.clone(),
                },
            ))
        })
        .collect();
    let total = rows.len();
    // Decided metrics first, then the headline ones, then the rest; shown in key order.
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.label.cmp(&b.1.label)));
    rows.truncate(MAX_FOREST_ROWS);
    rows.sort_by(|a, b| a.1.label.cmp(&b.1.label));
    let rows: Vec<ForestRow> = rows.into_iter().map(|(_, f)| f).collect();
    let shown = if rows.len() < total {
        format!(" ({} of {total}; every metric is in the table)", rows.len())
    } else {
        String::new()
    };
    if !rows.is_empty() {
        out.push(Chart {
            slug: "ab-forest".into(),
            title: format!("{}: change of B vs A per metric{shown}", r.scenario),
            kind: ChartKind::Forest(rows),
        });
    }
    let mut ranked: Vec<&AbMetric> = r
        .metrics
        .iter()
        .filter(|m| !m.a.is_empty() && m.a.len() == m.b.len())
        .collect();
    // The decided metrics first (better/worse), then the rest, by name.
    ranked.sort_by_key(|m| {
        (
            !(m.verdict == "better" || m.verdict == "worse"),
            m.key.clone(),
        )
    });
    for m in ranked.into_iter().take(MAX_ROUND_CHARTS) {
        let rounds = (0..m.a.len())
            .map(|i| RoundPoint {
                round: i,
                a: m.a[i],
                b: m.b[i],
                a_first: m.a_first.get(i).copied().unwrap_or(true),
            })
            .collect();
        out.push(Chart {
            slug: format!("ab-rounds-{}", super::slug(&m.key)),
            title: format!("{}: per-round values ({})", m.key, m.verdict),
            kind: ChartKind::Rounds {
                unit: m.unit.clone(),
                rounds,
            },
        });
    }
    out
}

pub(crate) fn html(r: &AbView, charts: &[Chart]) -> Result<String, RenderError> {
    let mut s = super::html::head(&format!("vaultbench A/B: {}", r.scenario));
    s.push_str(&format!(
        "<h1>vaultbench A/B: {}</h1>\n<p>{}</p>\n",
        html_escape(&r.scenario),
        super::fmt::html_inline(&intro(r))
    ));
    let class = match r.decision.as_ref().map(|d| d.0.as_str()) {
        Some("KEEP") => "keep",
        Some("REJECT") => "reject",
        _ => "muted",
    };
    s.push_str(&format!(
        "<h2>Decision</h2>\n<p class=\"{class}\">{}</p>\n",
        html_escape(&decision_text(r))
    ));
    if !r.rules.is_empty() {
        s.push_str("<ul>\n");
        for rule in &r.rules {
            s.push_str(&format!("<li><code>{}</code></li>\n", html_escape(rule)));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("<h2>Changes (B vs A)</h2>\n");
    for c in charts.iter().filter(|c| c.slug == "ab-forest") {
        s.push_str(&super::html::figure(c)?);
    }
    s.push_str(&html_table(&CHANGE_HEADERS, &change_rows(r)));
    if !r.exact.is_empty() {
        s.push_str("<h2>Exact keys that differ</h2>\n");
        let rows: Vec<Vec<String>> = r
            .exact
            .iter()
            .map(|(k, u, a, b)| vec![k.clone(), u.clone(), num(*a), num(*b)])
            .collect();
        s.push_str(&html_table(&["key", "unit", "A", "B"], &rows));
    }
    let cal = super::md::calibration_section(&r.calibration);
    let mut sections = vec![cal];
    sections.extend(super::md::contention_sections(&r.calibration));
    for cal in sections.iter().filter(|c| !c.rows.is_empty()) {
        s.push_str(&format!(
            "<h2>{}</h2>\n<p>{}</p>\n",
            cal.heading,
            html_escape(&cal.intro)
        ));
        s.push_str(&html_table(&cal.headers, &cal.rows));
    }
    s.push_str("<h2>What these numbers are not</h2>\n<ul class=\"notes\">\n");
    for c in not_claims(r) {
        s.push_str(&format!("<li>{}</li>\n", super::fmt::html_inline(&c)));
    }
    s.push_str("</ul>\n");
    s.push_str("<h2>Per-round values</h2>\n<p class=\"muted\">Filled markers: that build ran first in the round; hollow: it ran second. A pattern by fill is an order effect.</p>\n");
    for c in charts.iter().filter(|c| c.slug.starts_with("ab-rounds-")) {
        s.push_str(&super::html::figure(c)?);
    }
    s.push_str(super::html::TAIL);
    Ok(s)
}

//! The A/B result report: the table of changes with intervals and verdicts, a forest plot of
//! per-metric change, per-round values coloured by which build ran first, and the decision.
//!
//! Read from the typed result (`contract::ab::AbResult`, the one reader and writer of the
//! `vaultbench.ab` format): renaming a field fails to compile here instead of blanking a column.
//! A result of an older harness lacks `order_counts`; they are then counted from its rounds
//! and `balance.kept`.

use serde_json::Value;

use super::error::RenderError;
use crate::ab::{Order, OrderCounts, Outcome};
use crate::charts::{Chart, ChartKind, ForestRow, RoundPoint};
use crate::fmt::{html_escape, html_table, md_table, num, pct, signed_pct};
use crate::schema::AbResult;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AbMetric {
    pub key: String,
    pub unit: String,
    pub a_median: f64,
    pub b_median: f64,
    pub estimate_pct: Option<f64>,
    pub ci_pct: Option<(f64, f64)>,
    pub mde_pct: Option<f64>,
    /// The Benjamini–Hochberg-adjusted p, else the run's own Wilcoxon p.
    pub p: f64,
    /// The verdict in words (`no change`).
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
    pub rounds_planned: usize,
    pub rounds_kept: usize,
    /// Rounds per order, planned and kept (from `order_counts`, or counted from `rounds`
    /// and `balance.kept` in an older result).
    pub orders: OrderCounts,
    pub tau: f64,
    pub tau_source: String,
    pub metrics: Vec<AbMetric>,
    pub exact: Vec<(String, String, f64, f64)>,
    pub rules: Vec<String>,
    pub decision: Option<(Outcome, String)>,
    /// The gate over every kept sample of both builds.
    pub calibration: super::recording::Calibration,
    /// `ab --cost`: per part, the functions that changed most.
    pub functions: std::collections::BTreeMap<String, contract::profile::PartChanges>,
}

/// Every kept sample's in-sample contention from an A/B result's rounds (`round N A`).
fn round_contention(r: &AbResult) -> Vec<super::recording::ContentionRow> {
    let mut out = Vec::new();
    for (i, round) in r.rounds.iter().enumerate() {
        for (arm, sample) in [("A", &round.a), ("B", &round.b)] {
            if let Some(contention) = sample.as_ref().and_then(|s| s.contention.clone()) {
                out.push(super::recording::ContentionRow {
                    sample: format!("round {} {arm}", i + 1),
                    contention,
                });
            }
        }
    }
    out
}

/// The order counts of a result: its `order_counts`, else counted from each round's `order`
/// and `balance.kept` (a result written before odd plans existed).
fn order_counts(r: &AbResult) -> OrderCounts {
    r.order_counts.unwrap_or_else(|| {
        let orders: Vec<Order> = r.rounds.iter().map(|round| round.order).collect();
        crate::ab::order_counts(&orders, &r.balance.kept)
    })
}

impl AbView {
    pub fn read(r: &AbResult) -> AbView {
        let metrics: Vec<AbMetric> = r
            .metrics
            .iter()
            .map(|(key, m)| AbMetric {
                key: key.clone(),
                unit: r.units.get(key).cloned().unwrap_or_default(),
                a_median: m.a_median,
                b_median: m.b_median,
                estimate_pct: m.estimate_pct,
                ci_pct: m.ci_pct.map(|c| (c.lo, c.hi)),
                mde_pct: m.mde_pct,
                p: m.p_bh.unwrap_or(m.wilcoxon.p_two_sided),
                verdict: m.verdict.to_string(),
                reason: m.reason.clone(),
                a: m.a.clone(),
                b: m.b.clone(),
                a_first: m.orders.iter().map(|o| *o == Order::AFirst).collect(),
            })
            .collect();
        let exact = r
            .exact_differences
            .iter()
            .map(|(k, e)| (k.clone(), e.unit.clone(), e.diff.a, e.diff.b))
            .collect();
        let mut calibration = super::recording::calibration(r.gate.as_ref());
        calibration.samples = round_contention(r);
        AbView {
            scenario: r.scenario.clone(),
            aa: r.aa,
            recorded_at: r.recorded_at.clone(),
            a_target: super::recording::target_label(&r.a),
            b_target: super::recording::target_label(&r.b),
            rounds_planned: r.rounds_planned,
            rounds_kept: metrics.first().map_or(r.rounds.len(), |m| m.a.len()),
            orders: order_counts(r),
            tau: r.tau,
            tau_source: r.tau_source.clone(),
            metrics,
            exact,
            rules: r.rules.clone(),
            calibration,
            decision: r.decision.as_ref().map(|d| (d.outcome, d.reason.clone())),
            functions: r.functions.clone(),
        }
    }
}

fn intro(r: &AbView) -> String {
    format!(
        "Scenario {}, {} of {} planned rounds kept ({}){}; practical threshold τ = {} ({}). A: `{}`; B: `{}`. Recorded {}.",
        r.scenario,
        r.rounds_kept,
        r.rounds_planned,
        r.orders.kept,
        if r.aa {
            " (A/A run: both arms are the same build)"
        } else {
            ""
        },
        pct(r.tau),
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

/// Whether a verdict is a decision (better or worse).
fn decided(m: &AbMetric) -> bool {
    m.verdict == "better" || m.verdict == "worse"
}

/// The phase (or route-load step) a key belongs to: `route.<route>.c<N>` for route load,
/// `whole run` for `server.*` and `generator.*`, else the key's first segment.
pub(crate) fn part_of(key: &str) -> String {
    let parts: Vec<&str> = key.split('.').collect();
    match parts.as_slice() {
        ["route", r, c, ..] => format!("route.{r}.{c}"),
        ["server" | "generator", ..] => "whole run".into(),
        [p, ..] => (*p).to_owned(),
        [] => String::new(),
    }
}

/// The metrics to show, each with its label: a latency key measured on one request per
/// round (its p50, p95 and p99 equal in every round of both arms) is shown once, as
/// `<stem>.p50_us = p95 = p99`.
fn shown<'a>(ms: &[&'a AbMetric]) -> Vec<(String, &'a AbMetric)> {
    fn stem(k: &str) -> Option<(&str, &str)> {
        for q in ["p50", "p95", "p99"] {
            for unit in ["_us", "_ms"] {
                if let Some(s) = k.strip_suffix(&format!(".{q}{unit}")) {
                    return Some((s, unit));
                }
            }
        }
        None
    }
    let mut out = Vec::new();
    let mut skip: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for m in ms {
        if skip.contains(m.key.as_str()) {
            continue;
        }
        if let Some((st, unit)) = stem(&m.key)
            && m.key.ends_with(&format!(".p50{unit}"))
        {
            let siblings: Vec<&&AbMetric> = ms
                .iter()
                .filter(|o| o.key != m.key && stem(&o.key) == Some((st, unit)))
                .collect();
            if !siblings.is_empty() && siblings.iter().all(|o| o.a == m.a && o.b == m.b) {
                let mut names = vec!["p50".to_owned()];
                for o in &siblings {
                    skip.insert(o.key.as_str());
                    names.push(
                        o.key
                            .trim_start_matches(&format!("{st}."))
                            .trim_end_matches(unit)
                            .to_owned(),
                    );
                }
                out.push((
                    format!("{st}.{}{unit} (one request)", names.join(" = ")),
                    *m,
                ));
                continue;
            }
        }
        out.push((m.key.clone(), *m));
    }
    out
}

/// The cost key's explanation by function: the part's largest changes that explain at least
/// a tenth of its change, e.g. "`inject_work` +3,300/request (97% of the change)".
pub(crate) fn explained_by(r: &AbView, key: &str) -> String {
    if !key.contains(".server.instructions") {
        return String::new();
    }
    let Some(p) = r.functions.get(&part_of(key)) else {
        return String::new();
    };
    let per = if p.per.is_empty() {
        String::new()
    } else {
        format!("/{}", p.per)
    };
    p.functions
        .iter()
        .filter(|f| f.share_of_change.is_some_and(|s| s >= 0.1))
        .take(3)
        .map(|f| {
            format!(
                "`{}` {}{per} ({:.0}% of the change)",
                f.name,
                signed_num(f.delta),
                f.share_of_change.unwrap_or(0.0) * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn signed_num(x: f64) -> String {
    if x >= 0.0 {
        format!("+{}", num(x.round()))
    } else {
        format!("−{}", num((-x).round()))
    }
}

const SUMMARY_HEADERS: [&str; 6] = [
    "key",
    "change",
    "95% interval",
    "verdict",
    "B vs A medians",
    "explained by",
];

/// The decided keys of one part, as summary rows.
fn summary_rows(r: &AbView, ms: &[&AbMetric]) -> Vec<Vec<String>> {
    shown(ms)
        .into_iter()
        .map(|(label, m)| {
            vec![
                label,
                m.estimate_pct.map_or("–".into(), |e| signed_pct(e / 100.0)),
                m.ci_pct.map_or("–".into(), |(lo, hi)| {
                    format!("{} … {}", signed_pct(lo / 100.0), signed_pct(hi / 100.0))
                }),
                m.verdict.clone(),
                format!("{} → {}", num(m.a_median), num(m.b_median)),
                explained_by(r, &m.key),
            ]
        })
        .map(|mut row| {
            if r.functions.is_empty() {
                row.pop();
            }
            row
        })
        .collect()
}

/// The decided keys grouped by part, in key order of their first key.
fn decided_by_part(r: &AbView) -> Vec<(String, Vec<&AbMetric>)> {
    let mut out: Vec<(String, Vec<&AbMetric>)> = Vec::new();
    for m in r.metrics.iter().filter(|m| decided(m)) {
        let p = part_of(&m.key);
        match out.iter_mut().find(|(q, _)| *q == p) {
            Some((_, v)) => v.push(m),
            None => out.push((p, vec![m])),
        }
    }
    out
}

fn summary_text(r: &AbView) -> String {
    let worse = r.metrics.iter().filter(|m| m.verdict == "worse").count();
    let better = r.metrics.iter().filter(|m| m.verdict == "better").count();
    let undecided = r
        .metrics
        .iter()
        .filter(|m| m.verdict == "inconclusive")
        .count();
    if worse + better == 0 {
        format!(
            "No key was called worse or better at τ = {}. {} of {} keys could not be decided (below).",
            pct(r.tau),
            undecided,
            r.metrics.len()
        )
    } else {
        format!(
            "{worse} key(s) worse and {better} better, by phase; {undecided} of {} could not be decided (below). A cost key's change is explained by the functions whose instructions changed most (medians over rounds).",
            r.metrics.len()
        )
    }
}

/// Rows of the folded table: the keys not called better or worse, with why.
fn undecided_rows(r: &AbView) -> Vec<Vec<String>> {
    let ms: Vec<&AbMetric> = r.metrics.iter().filter(|m| !decided(m)).collect();
    shown(&ms)
        .into_iter()
        .map(|(label, m)| {
            let mut row = metric_row(label, m);
            if !r.functions.is_empty() {
                row.push(explained_by(r, &m.key));
            }
            row.push(m.reason.clone());
            row
        })
        .collect()
}

/// The folded table's headers: "explained by" only for an `ab --cost` result.
fn undecided_headers(r: &AbView) -> Vec<&'static str> {
    UNDECIDED_HEADERS
        .iter()
        .copied()
        .filter(|h| *h != "explained by" || !r.functions.is_empty())
        .collect()
}

/// The summary's headers: "explained by" only for an `ab --cost` result.
fn summary_headers(r: &AbView) -> Vec<&'static str> {
    SUMMARY_HEADERS
        .iter()
        .copied()
        .filter(|h| *h != "explained by" || !r.functions.is_empty())
        .collect()
}

const UNDECIDED_HEADERS: [&str; 10] = [
    "metric",
    "A median",
    "B median",
    "change",
    "95% interval",
    "MDE",
    "p (BH)",
    "verdict",
    "explained by",
    "why",
];

/// The per-part function changes, as rows.
fn function_rows(r: &AbView) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (part, p) in &r.functions {
        let per = if p.per.is_empty() {
            String::new()
        } else {
            format!("/{}", p.per)
        };
        for (i, f) in p.functions.iter().enumerate() {
            rows.push(vec![
                if i == 0 {
                    format!(
                        "{part} ({} → {}{per})",
                        num(p.a_total.round()),
                        num(p.b_total.round())
                    )
                } else {
                    String::new()
                },
                format!("`{}`", f.name),
                num(f.a.round()),
                num(f.b.round()),
                format!("{}{per}", signed_num(f.delta)),
                f.relative.map_or("new".into(), signed_pct),
                f.share_of_change
                    .map_or("–".into(), |x| format!("{:.0}%", x * 100.0)),
                format!("{:.2}%", f.share_of_total * 100.0),
            ]);
        }
    }
    rows
}

const FUNCTION_HEADERS: [&str; 8] = [
    "part (A → B instructions)",
    "function",
    "A",
    "B",
    "change",
    "relative",
    "of the change",
    "of the total",
];

const FUNCTIONS_INTRO: &str = "Per phase, the functions whose own (self) instructions per unit of work changed most between the arms of the cost samples: each value is the median over the kept rounds, so one round cannot make a function grow. \"Of the change\" is the function's change over the part's (given when the part moved by 0.1 % or more); \"of the total\" is over A's total. An inlined function's instructions count in the function it was inlined into.";

fn metric_row(label: String, m: &AbMetric) -> Vec<String> {
    vec![
        label,
        num(m.a_median),
        num(m.b_median),
        m.estimate_pct.map_or("–".into(), |e| signed_pct(e / 100.0)),
        m.ci_pct.map_or("–".into(), |(lo, hi)| {
            format!("{} … {}", signed_pct(lo / 100.0), signed_pct(hi / 100.0))
        }),
        m.mde_pct.map_or("–".into(), |x| format!("{x:.1}%")),
        num(m.p),
        m.verdict.clone(),
    ]
}

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
    if r.rounds_kept < r.rounds_planned {
        out.push(format!(
            "Not every planned round. {} of {} rounds were kept; failed or refused rounds were dropped to keep the order balanced.",
            r.rounds_kept, r.rounds_planned
        ));
    }
    if r.orders.kept.is_uneven() {
        out.push(format!(
            "Not balanced for order. The kept rounds are {}: an effect of which build runs first is not cancelled for the one extra round (cost keys counted under Valgrind do not depend on order; timing keys may).",
            r.orders.kept
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
    out.push_str(&format!("## What changed\n\n{}\n", summary_text(r)));
    for (part, ms) in decided_by_part(r) {
        out.push_str(&format!("\n### {part}\n\n"));
        out.push_str(&md_table(&summary_headers(r), &summary_rows(r, &ms)));
    }
    if !r.functions.is_empty() {
        out.push_str(&format!(
            "\n## Functions that changed most\n\n{FUNCTIONS_INTRO}\n\n"
        ));
        out.push_str(&md_table(&FUNCTION_HEADERS, &function_rows(r)));
    }
    if !r.exact.is_empty() {
        out.push_str("\n## Exact keys that differ\n\n");
        let rows: Vec<Vec<String>> = r
            .exact
            .iter()
            .map(|(k, u, a, b)| vec![k.clone(), u.clone(), num(*a), num(*b)])
            .collect();
        out.push_str(&md_table(&["key", "unit", "A", "B"], &rows));
    }
    let undecided = undecided_rows(r);
    if !undecided.is_empty() {
        out.push_str(&format!(
            "\n## Keys not called better or worse\n\n{UNDECIDED_INTRO}\n\n<details><summary>{}</summary>\n\n",
            undecided_summary(r)
        ));
        out.push_str(&md_table(&undecided_headers(r), &undecided));
        out.push_str("\n</details>\n");
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
    let decided_keys: Vec<&AbMetric> = r.metrics.iter().filter(|m| decided(m)).collect();
    if !decided_keys.is_empty() {
        out.push_str("\n## Why each verdict\n\n");
    }
    for m in decided_keys {
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

const UNDECIDED_INTRO: &str = "Hodges–Lehmann estimate of the per-round change with its 95% interval (a t interval for cost keys). \"Inconclusive\": the interval is wider than τ or straddles it, so the run could not tell; \"no change\": the interval lies inside ±τ.";

fn undecided_summary(r: &AbView) -> String {
    let n = |v: &str| r.metrics.iter().filter(|m| m.verdict == v).count();
    format!(
        "{} inconclusive (interval wider than τ = {} or across it), {} no change",
        n("inconclusive"),
        pct(r.tau),
        n("no change")
    )
}

/// The `--format json` report: a summary and the result itself, serialised from the type.
pub(crate) fn json(r: &AbView, result: &AbResult) -> Value {
    serde_json::json!({
        "kind": super::recording::KIND_REPORT,
        "report": "ab",
        "format_version": crate::schema::FORMAT_VERSION,
        "summary": {
            "scenario": r.scenario,
            "rounds_kept": r.rounds_kept,
            "decision": r.decision.as_ref().map(|d| d.0),
            "verdicts": r.metrics.iter().map(|m| (m.key.clone(), Value::from(m.verdict.clone()))).collect::<serde_json::Map<_, _>>(),
        },
        "result": result,
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
            slug: format!("ab-rounds-{}", crate::fmt::slug(&m.key)),
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
        crate::fmt::html_inline(&intro(r))
    ));
    let class = match r.decision.as_ref().map(|d| d.0) {
        Some(Outcome::Keep) => "keep",
        Some(Outcome::Reject) => "reject",
        Some(Outcome::Inconclusive) | None => "muted",
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
    s.push_str(&format!(
        "<h2>What changed</h2>\n<p>{}</p>\n",
        crate::fmt::html_inline(&summary_text(r))
    ));
    for (part, ms) in decided_by_part(r) {
        s.push_str(&format!("<h3>{}</h3>\n", html_escape(&part)));
        s.push_str(&html_table(&summary_headers(r), &summary_rows(r, &ms)));
    }
    if !r.functions.is_empty() {
        s.push_str(&format!(
            "<h2>Functions that changed most</h2>\n<p>{}</p>\n",
            html_escape(FUNCTIONS_INTRO)
        ));
        s.push_str(&html_table(&FUNCTION_HEADERS, &function_rows(r)));
        s.push_str("<h3>Differential flame graphs</h3>\n<p class=\"muted\">B's call graph per phase (per unit of work), each frame coloured by its change against A's frame at the same stack: red grew, blue shrank, full colour at 1 % of the phase's instructions. Hover a frame for its figures.</p>\n");
        for (part, p) in r.functions.iter().filter(|(_, p)| !p.b_stacks.is_empty()) {
            let scale = if p.a_work > 0 {
                p.b_work.max(1) as f64 / p.a_work as f64
            } else {
                1.0
            };
            s.push_str(&format!(
                "<details open><summary>{}</summary>\n<figure class=\"chart flame\" id=\"flame-{}\">\n{}</figure>\n</details>\n",
                html_escape(part),
                crate::fmt::slug(part),
                crate::flame::svg(
                    &format!("{part}: B against A"),
                    &p.b_stacks,
                    Some((&p.a_stacks, scale)),
                    "instructions"
                )
            ));
        }
    }
    for c in charts.iter().filter(|c| c.slug == "ab-forest") {
        s.push_str(&super::html::figure(c)?);
    }
    if !r.exact.is_empty() {
        s.push_str("<h2>Exact keys that differ</h2>\n");
        let rows: Vec<Vec<String>> = r
            .exact
            .iter()
            .map(|(k, u, a, b)| vec![k.clone(), u.clone(), num(*a), num(*b)])
            .collect();
        s.push_str(&html_table(&["key", "unit", "A", "B"], &rows));
    }
    let undecided = undecided_rows(r);
    if !undecided.is_empty() {
        s.push_str(&format!(
            "<h2>Keys not called better or worse</h2>\n<p>{}</p>\n<details><summary>{}</summary>\n",
            html_escape(UNDECIDED_INTRO),
            html_escape(&undecided_summary(r))
        ));
        s.push_str(&html_table(&undecided_headers(r), &undecided));
        s.push_str("</details>\n");
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
        s.push_str(&format!("<li>{}</li>\n", crate::fmt::html_inline(&c)));
    }
    s.push_str("</ul>\n");
    s.push_str("<h2>Per-round values</h2>\n<p class=\"muted\">Filled markers: that build ran first in the round; hollow: it ran second. A pattern by fill is an order effect.</p>\n");
    for c in charts.iter().filter(|c| c.slug.starts_with("ab-rounds-")) {
        s.push_str(&super::html::figure(c)?);
    }
    s.push_str(super::html::TAIL);
    Ok(s)
}

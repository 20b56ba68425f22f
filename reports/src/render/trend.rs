//! The report of a `vaultbench trend detect` result: every change point with its key, kind,
//! commit range, size and interval (and, with `--bisect`, the commit bisect named); as
//! terminal text, Markdown and self-contained HTML with each changed key's history chart and
//! its points marked.

use std::collections::BTreeMap;

use contract::bisect::BisectOutcome;
use contract::history::HistoryEntry;
use contract::trend::{EntryRef, PointKind, TrendPoint, TrendResult};

use super::error::RenderError;
use crate::charts::{ChangeMark, Chart, ChartKind, TrendPoint as ChartPoint};
use crate::fmt::{html_escape, html_table, md_table};

/// At most this many charts in the HTML report (the keys with the most points first): a
/// machine change can move every timing key at once.
pub const MAX_CHARTS: usize = 24;

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// An entry as a reader finds it: its commit, else its position.
pub fn entry_label(e: &EntryRef) -> String {
    match &e.commit {
        Some(c) => format!("{} (#{})", short(c), e.index),
        None => format!("#{}", e.index),
    }
}

fn range(p: &TrendPoint) -> String {
    match p.kind {
        PointKind::Drift => format!(
            "from {} to {}",
            entry_label(&p.before),
            entry_label(&p.after)
        ),
        _ => format!("{} → {}", entry_label(&p.before), entry_label(&p.after)),
    }
}

fn kind_word(p: &TrendPoint) -> String {
    match p.kind {
        PointKind::Machine => "machine change".into(),
        k if p.worse => format!("{} (worse)", k.as_str()),
        k => format!("{} (better)", k.as_str()),
    }
}

fn note(p: &TrendPoint) -> String {
    let mut parts = Vec::new();
    if !p.channels.is_empty() {
        parts.push(p.channels.join(", "));
    }
    if let Some(b) = &p.bisect {
        let found = match (b.outcome, &b.first_bad) {
            (Some(BisectOutcome::Found), Some(c)) => format!(
                "first bad commit {} ({} commit(s) in the range{})",
                short(c),
                b.path_len,
                b.mode
                    .as_deref()
                    .map_or_else(String::new, |m| format!(", bisect in {m} mode"))
            ),
            (Some(o), _) => format!(
                "bisect over {} commit(s): {}",
                b.path_len,
                format!("{o:?}").to_lowercase()
            ),
            (None, _) => String::new(),
        };
        if !found.is_empty() {
            parts.push(found);
        }
        if let Some(n) = &b.note {
            parts.push(n.clone());
        }
    }
    parts.join("; ")
}

const HEADERS: [&str; 7] = [
    "key",
    "kind",
    "commits",
    "change",
    "95 % interval",
    "p",
    "notes",
];

fn rows(r: &TrendResult) -> Vec<Vec<String>> {
    r.points
        .iter()
        .map(|p| {
            vec![
                p.key.clone(),
                kind_word(p),
                range(p),
                format!("{:+.2} %", p.estimate_pct),
                format!("[{:+.2} %, {:+.2} %]", p.ci_pct.lo, p.ci_pct.hi),
                format!("{:.3}", p.p_value),
                note(p),
            ]
        })
        .collect()
}

/// The result in one sentence.
pub fn headline(r: &TrendResult) -> String {
    let count = |k: PointKind| r.points.iter().filter(|p| p.kind == k).count();
    let worse = r
        .points
        .iter()
        .filter(|p| p.kind != PointKind::Machine && p.worse)
        .count();
    if r.points.is_empty() {
        return format!(
            "No change point over {} entries ({} keys examined)",
            r.entries.len(),
            r.keys_examined
        );
    }
    format!(
        "{} change point(s) over {} entries ({} keys examined): {} step(s), {} drift(s), {} machine change(s); {} for the worse",
        r.points.len(),
        r.entries.len(),
        r.keys_examined,
        count(PointKind::Step),
        count(PointKind::Drift),
        count(PointKind::Machine),
        worse
    )
}

fn setup(r: &TrendResult) -> String {
    let floors: Vec<String> = r
        .settings
        .min_effect_pct
        .iter()
        .map(|(c, v)| format!("{c} {v} %"))
        .collect();
    format!(
        "Scenario {} on machine class {}. E-Divisive means, {} permutations per test, p ≤ {}, at least {} entries either side, seed {:#x}. Minimum effect per class: {} (every key: at least half its recorded spread).",
        r.scenario,
        r.machine_class,
        r.settings.permutations,
        r.settings.max_p,
        r.settings.min_segment,
        r.settings.seed,
        floors.join(", ")
    )
}

/// The terminal summary (stderr).
pub fn summary(r: &TrendResult) -> String {
    let mut s = format!("{}\n", headline(r));
    for row in rows(r) {
        s.push_str(&format!(
            "  {}  {}  {}  {} {}{}\n",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            if row[6].is_empty() {
                String::new()
            } else {
                format!("  ({})", row[6])
            }
        ));
    }
    s
}

/// The Markdown report.
pub fn markdown(r: &TrendResult) -> String {
    let mut s = format!(
        "# Trend: {} on {}\n\n**{}**\n\n{}\n",
        r.scenario,
        r.machine_class,
        headline(r),
        setup(r)
    );
    if !r.points.is_empty() {
        s.push_str("\n## Change points\n\n");
        s.push_str(&md_table(&HEADERS, &rows(r)));
    }
    s
}

/// The HTML report (self-contained), with each changed key's chart.
pub fn html(r: &TrendResult, charts: &[Chart]) -> Result<String, RenderError> {
    let mut s = format!(
        "{}<h1>Trend: {} on {}</h1>\n<p><strong>{}</strong></p>\n<p>{}</p>\n",
        super::html::head(&format!("vaultbench trend: {}", r.scenario)),
        html_escape(&r.scenario),
        html_escape(&r.machine_class),
        html_escape(&headline(r)),
        html_escape(&setup(r)),
    );
    if !r.points.is_empty() {
        s.push_str("<h2>Change points</h2>\n");
        s.push_str(&html_table(&HEADERS, &rows(r)));
    }
    if !charts.is_empty() {
        s.push_str("<h2>Histories</h2>\n");
        for c in charts {
            s.push_str(&super::html::figure(c)?);
        }
    }
    s.push_str(super::html::TAIL);
    Ok(s)
}

/// One chart per key with change points (at most [`MAX_CHARTS`]: keys with a step or drift
/// first, then those with most points): the
/// key's value at every entry with its recorded spread, and its points marked.
pub fn charts(r: &TrendResult, entries: &[HistoryEntry]) -> Vec<Chart> {
    let mut by_key: BTreeMap<&str, Vec<&TrendPoint>> = BTreeMap::new();
    for p in &r.points {
        by_key.entry(p.key.as_str()).or_default().push(p);
    }
    let mut keys: Vec<(&str, Vec<&TrendPoint>)> = by_key.into_iter().collect();
    // Steps and drifts first (what a user acts on), then the keys with most points.
    let code_change = |ps: &[&TrendPoint]| ps.iter().any(|p| p.kind != PointKind::Machine);
    keys.sort_by(|a, b| {
        code_change(&b.1)
            .cmp(&code_change(&a.1))
            .then(b.1.len().cmp(&a.1.len()))
            .then(a.0.cmp(b.0))
    });
    keys.into_iter()
        .take(MAX_CHARTS)
        .map(|(key, ps)| {
            let channel = key.strip_prefix(contract::trend::CHANNEL_PREFIX);
            let mut pos = Vec::new();
            let mut points = Vec::new();
            for (i, e) in entries.iter().enumerate() {
                let v = match channel {
                    Some(ch) => e.calibration.get(ch).map(|v| (*v, *v, *v)),
                    None => e.keys.get(key).map(|v| (v.value, v.low, v.high)),
                };
                if let Some((value, low, high)) = v {
                    pos.push(i);
                    points.push(ChartPoint {
                        label: e
                            .commit
                            .as_deref()
                            .map_or_else(|| format!("#{i}"), |c| c[..c.len().min(7)].to_owned()),
                        value,
                        low,
                        high,
                        machine_differs: false,
                    });
                }
            }
            let at = |entry: usize| pos.iter().position(|&p| p == entry).unwrap_or(0);
            let marks = ps
                .iter()
                .map(|p| ChangeMark {
                    from: at(p.before.index),
                    to: at(p.after.index),
                    kind: p.kind.as_str().to_owned(),
                })
                .collect();
            Chart {
                slug: format!("trend-{}", crate::fmt::slug(key)),
                title: format!("{key} over {} entries", points.len()),
                kind: ChartKind::Trend {
                    unit: ps[0].unit.clone(),
                    points,
                    marks,
                },
            }
        })
        .collect()
}

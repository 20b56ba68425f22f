//! The baselines history model: versions of each scenario's baseline (from git history of
//! `baselines/` or a directory of recordings), per-key trends with a noise band taken from each
//! version's raw series (min–max), and the trend charts of the headline keys.

use serde::Serialize;
use std::collections::BTreeMap;

use super::error::RenderError;
use super::recording::range;
use crate::charts::{Chart, ChartKind, TrendPoint};
use crate::schema::{Baseline, Better, MetricClass, Provenance};

/// One version of one scenario's baseline, as the caller found it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPoint {
    /// A short label for axes and columns: an abbreviated commit or a directory name.
    pub label: String,
    pub commit: Option<String>,
    /// Commit date (git) or file time, as text; metadata only.
    pub date: Option<String>,
    pub baseline: Baseline,
    /// The sidecar of the same version, when it could be read (gives the noise band).
    pub provenance: Option<Provenance>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointMeta {
    pub label: String,
    pub commit: Option<String>,
    pub date: Option<String>,
    pub recorded_at: Option<String>,
    pub samples: u32,
    /// Each calibration channel whose median differs from the newest version's beyond its
    /// default tolerance, with its ratio (`io_ms ×2.25`): this version was recorded on a
    /// machine of another speed, so its timing and resource values do not compare with the
    /// newest. Empty when they match, or when either version has no sidecar.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_differs: Vec<String>,
}

/// A key's value at one version with that version's raw min and max.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendValue {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyTrend {
    pub key: String,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
    /// One entry per version; `None` where the key did not exist yet.
    pub values: Vec<Option<TrendValue>>,
    /// Newest vs oldest version that has the key (relative).
    pub change: Option<f64>,
}

/// The versions of one scenario's baseline on one machine class: a trend only compares like
/// with like, so each class's history is drawn separately.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioHistory {
    pub scenario: String,
    /// The machine class the versions were recorded on (`contract::class`), from each
    /// version's sidecar; `None` for versions without a readable fingerprint.
    pub class: Option<String>,
    pub points: Vec<PointMeta>,
    pub keys: Vec<KeyTrend>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryReport {
    pub kind: String,
    pub report: String,
    pub format_version: u32,
    /// Where the versions came from, in words.
    pub source: String,
    pub scenarios: Vec<ScenarioHistory>,
}

impl ScenarioHistory {
    /// One sentence naming the versions whose calibration differs from the newest version's,
    /// `None` when every version's matches.
    pub fn machine_note(&self) -> Option<String> {
        let marked: Vec<String> = self
            .points
            .iter()
            .filter(|p| !p.machine_differs.is_empty())
            .map(|p| format!("{} ({})", p.label, p.machine_differs.join(", ")))
            .collect();
        (!marked.is_empty()).then(|| {
            format!(
                "Recorded on a machine of another speed than the newest version (a calibration channel beyond its tolerance; ringed in the charts): {}. Their timing and resource values do not compare with the newest; exact and cost keys do.",
                marked.join("; ")
            )
        })
    }

    /// The section heading: the scenario and its machine class.
    pub fn heading(&self) -> String {
        format!(
            "{} on machine class {}",
            self.scenario,
            self.class.as_deref().unwrap_or("unknown")
        )
    }

    /// What every trend chart slug of this history starts with.
    pub(crate) fn chart_prefix(&self) -> String {
        format!(
            "trend-{}-on-{}-",
            crate::fmt::slug(&self.scenario),
            crate::fmt::slug(self.class.as_deref().unwrap_or("unknown-machine"))
        )
    }
}

/// The machine class of a version, from its sidecar's fingerprint.
fn class_of(p: &HistoryPoint) -> Option<String> {
    p.provenance
        .as_ref()
        .and_then(|pr| contract::class::of_machine(&pr.machine))
}

/// Groups the points by scenario and machine class (keeping the caller's oldest-first order)
/// and builds trends. Fails when there is nothing to show: no points, or no group with two
/// versions.
pub fn history_report(points: &[HistoryPoint]) -> Result<HistoryReport, RenderError> {
    if points.is_empty() {
        return Err(RenderError::History("no versions of any baseline".into()));
    }
    let mut by: BTreeMap<(&str, Option<String>), Vec<&HistoryPoint>> = BTreeMap::new();
    for p in points {
        by.entry((p.baseline.scenario.as_str(), class_of(p)))
            .or_default()
            .push(p);
    }
    if by.values().all(|v| v.len() < 2) {
        let mut names: Vec<String> = by.keys().map(|(s, _)| (*s).to_owned()).collect();
        names.dedup();
        return Err(RenderError::History(format!(
            "only one version of {} so far: a trend needs two (report the baseline itself instead)",
            names.join(", ")
        )));
    }
    let scenarios = by
        .into_iter()
        .map(|((name, class), pts)| scenario_history(name, class, &pts))
        .collect();
    Ok(HistoryReport {
        kind: super::recording::KIND_REPORT.into(),
        report: "history".into(),
        format_version: crate::schema::FORMAT_VERSION,
        source: String::new(),
        scenarios,
    })
}

/// The channels in which a version's calibration differs from the newest version's.
fn machine_differs(p: &HistoryPoint, newest: Option<&Provenance>) -> Vec<String> {
    let (Some(this), Some(newest)) = (p.provenance.as_ref(), newest) else {
        return Vec::new();
    };
    let matches =
        crate::comparability::match_channels(newest, this, crate::comparability::default_tolerance);
    crate::comparability::differing(&matches, &contract::gate::KERNELS)
}

fn scenario_history(name: &str, class: Option<String>, pts: &[&HistoryPoint]) -> ScenarioHistory {
    let mut keys: BTreeMap<&str, (&str, MetricClass, Better)> = BTreeMap::new();
    for p in pts {
        for (k, m) in &p.baseline.metrics {
            keys.insert(k, (&m.unit, m.class, m.better));
        }
    }
    let trends = keys
        .into_iter()
        .map(|(key, (unit, class, better))| {
            let values: Vec<Option<TrendValue>> = pts
                .iter()
                .map(|p| {
                    let m = p.baseline.metrics.get(key)?;
                    let raw = p
                        .provenance
                        .as_ref()
                        .and_then(|pr| pr.raw.get(key))
                        .map(Vec::as_slice)
                        .unwrap_or(&[]);
                    let (low, high) = range(raw).unwrap_or((m.value, m.value));
                    Some(TrendValue {
                        value: m.value,
                        low,
                        high,
                    })
                })
                .collect();
            let present: Vec<f64> = values.iter().flatten().map(|v| v.value).collect();
            let change = match (present.first(), present.last()) {
                (Some(a), Some(b)) if present.len() >= 2 && *a != 0.0 => Some((b - a) / a.abs()),
                (Some(a), Some(b)) if present.len() >= 2 && a == b => Some(0.0),
                _ => None,
            };
            KeyTrend {
                key: key.to_owned(),
                unit: unit.to_owned(),
                class,
                better,
                values,
                change,
            }
        })
        .collect();
    ScenarioHistory {
        scenario: name.to_owned(),
        class,
        points: pts
            .iter()
            .map(|p| PointMeta {
                label: p.label.clone(),
                commit: p.commit.clone(),
                date: p.date.clone(),
                recorded_at: p.provenance.as_ref().map(|pr| pr.recorded_at.clone()),
                samples: p.baseline.samples,
                machine_differs: machine_differs(p, pts.last().and_then(|l| l.provenance.as_ref())),
            })
            .collect(),
        keys: trends,
    }
}

/// Headline keys get a trend chart: phase wall times, edit latency, server CPU and RSS,
/// fsyncs per file, and any exact key that changed (a behaviour change worth seeing).
fn headline(k: &KeyTrend) -> Option<usize> {
    const ORDER: [&str; 8] = [
        "cold_push.wall_ms",
        "cold_pull.wall_ms",
        "edit.p50_ms",
        "edit.p95_ms",
        "server.cpu_s",
        "server.peak_rss_mib",
        "cold_push.server.fsyncs_per_file",
        "cold_start.ready_ms",
    ];
    if let Some(i) = ORDER.iter().position(|o| *o == k.key) {
        return Some(i);
    }
    if k.key.ends_with(".wall_ms") {
        return Some(ORDER.len());
    }
    if k.class == MetricClass::Exact && k.change.is_some_and(|c| c != 0.0) {
        return Some(ORDER.len() + 1);
    }
    None
}

/// At most this many trend charts per scenario.
const MAX_TREND_CHARTS: usize = 12;

pub(crate) fn charts(r: &HistoryReport) -> Vec<Chart> {
    let mut out = Vec::new();
    for h in &r.scenarios {
        if h.points.len() < 2 {
            continue;
        }
        let mut keys: Vec<(usize, &KeyTrend)> = h
            .keys
            .iter()
            .filter_map(|k| headline(k).map(|i| (i, k)))
            .collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.key.cmp(&b.1.key)));
        for (_, k) in keys.into_iter().take(MAX_TREND_CHARTS) {
            let points: Vec<TrendPoint> = h
                .points
                .iter()
                .zip(&k.values)
                .filter_map(|(p, v)| {
                    v.as_ref().map(|v| TrendPoint {
                        label: p.label.clone(),
                        value: v.value,
                        low: v.low,
                        high: v.high,
                        // Exact and cost keys do not depend on the machine: never marked.
                        machine_differs: !p.machine_differs.is_empty()
                            && !crate::comparability::depends_on(k.class).is_empty(),
                    })
                })
                .collect();
            if points.len() < 2 {
                continue;
            }
            out.push(Chart {
                slug: format!("{}{}", h.chart_prefix(), crate::fmt::slug(&k.key)),
                title: format!(
                    "{} on {}: {} ({} is better)",
                    h.scenario,
                    h.class.as_deref().unwrap_or("unknown class"),
                    k.key,
                    if k.better == Better::Lower {
                        "lower"
                    } else {
                        "higher"
                    }
                ),
                kind: ChartKind::Trend {
                    unit: k.unit.clone(),
                    points,
                    marks: Vec::new(),
                },
            });
        }
    }
    out
}

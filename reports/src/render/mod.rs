//! Reports of a recording, a baselines history or an A/B result, in Markdown, self-contained
//! HTML (inline SVG charts, inline CSS, no scripts, no URLs) and JSON. One model per document
//! ([`RecordingReport`], [`HistoryReport`], the A/B document itself) feeds every format.

mod ab;
mod bisect;
mod error;
mod format;
mod history;
mod html;
mod md;
mod recording;
mod trend;

pub use bisect::summary as bisect_summary;
pub use error::RenderError;
pub use format::Format;
pub use history::{
    HistoryPoint, HistoryReport, KeyTrend, PointMeta, ScenarioHistory, TrendValue, history_report,
};
pub use recording::{
    Calibration, Cell, ChannelRow, GrowthRow, KIND_REPORT, LoadRow, PhaseRow, ProvenanceSummary,
    RecordingReport, RouteRow, Row, growth, recording_report, superlinear_samples,
};
pub use trend::{MAX_CHARTS as TREND_MAX_CHARTS, entry_label, summary as trend_summary};

use crate::charts::{Chart, ChartError};
use crate::schema::{Baseline, Provenance};

/// A document to report on.
#[derive(Debug, Clone, Copy)]
pub enum Document<'a> {
    /// A baseline and its provenance sidecar (what `record` writes).
    Recording {
        baseline: &'a Baseline,
        provenance: &'a Provenance,
    },
    /// Versions of baselines, oldest first (from git history or a results directory);
    /// `source` says where they came from, in words.
    History {
        points: &'a [HistoryPoint],
        source: &'a str,
    },
    /// An A/B result document (`kind: "vaultbench.ab"`), read through
    /// `contract::format::decode`.
    Ab(&'a crate::schema::AbResult),
    /// A bisect result document (`kind: "vaultbench.bisect"`).
    Bisect(&'a contract::bisect::BisectResult),
    /// A trend result (`kind: "vaultbench.trend"`) with the history it was found in (the
    /// charts draw its values).
    Trend {
        result: &'a contract::trend::TrendResult,
        entries: &'a [contract::history::HistoryEntry],
    },
}

impl Document<'_> {
    fn what(&self) -> &'static str {
        match self {
            Document::Recording { .. } => "a recording",
            Document::History { .. } => "a baselines history",
            Document::Ab(_) => "an a/b result",
            Document::Bisect(_) => "a bisect result",
            Document::Trend { .. } => "a trend result",
        }
    }
}

/// Renders a document in a format; the result is the whole file's text.
pub fn render(doc: &Document, format: Format) -> Result<String, RenderError> {
    match (doc, format) {
        (
            Document::Recording {
                baseline,
                provenance,
            },
            Format::Bmf,
        ) => Ok(pretty(&crate::export::bmf(baseline, Some(provenance)))),
        (
            Document::Recording {
                baseline,
                provenance,
            },
            Format::Gab,
        ) => Ok(pretty(
            &crate::export::gab(baseline, Some(provenance)).entries,
        )),
        (d, Format::Bmf | Format::Gab) => Err(RenderError::Unsupported {
            format,
            what: d.what(),
        }),
        (
            Document::Recording {
                baseline,
                provenance,
            },
            f,
        ) => {
            let r = recording_report(baseline, provenance);
            match f {
                Format::Md => Ok(md::recording(&r)),
                Format::Json => Ok(pretty(&r)),
                _ => html::recording(&r, &charts(doc)?),
            }
        }
        (Document::History { points, source }, f) => {
            let mut r = history_report(points)?;
            r.source = (*source).to_owned();
            match f {
                Format::Md => Ok(md::history(&r)),
                Format::Json => Ok(pretty(&r)),
                _ => html::history(&r, &charts(doc)?),
            }
        }
        (Document::Bisect(result), f) => match f {
            Format::Md => Ok(bisect::markdown(result)),
            Format::Json => Ok(pretty(result)),
            _ => Ok(bisect::html(result)),
        },
        (Document::Trend { result, entries }, f) => match f {
            Format::Md => Ok(trend::markdown(result)),
            Format::Json => Ok(pretty(result)),
            _ => trend::html(result, &trend::charts(result, entries)),
        },
        (Document::Ab(result), f) => {
            let r = ab::AbView::read(result);
            match f {
                Format::Md => Ok(ab::markdown(&r)),
                Format::Json => Ok(pretty(&ab::json(&r, result))),
                _ => ab::html(&r, &charts(doc)?),
            }
        }
    }
}

/// The charts of a document (what the HTML report embeds and `--png` writes).
pub fn charts(doc: &Document) -> Result<Vec<Chart>, RenderError> {
    match doc {
        Document::Recording {
            baseline,
            provenance,
        } => Ok(recording_charts(baseline, provenance)?),
        Document::History { points, .. } => Ok(history::charts(&history_report(points)?)),
        Document::Ab(result) => Ok(ab::charts(&ab::AbView::read(result))),
        Document::Bisect(_) => Ok(Vec::new()),
        Document::Trend { result, entries } => Ok(trend::charts(result, entries)),
    }
}

fn pretty<T: serde::Serialize>(v: &T) -> String {
    // Every report model is plain data (strings, numbers, maps): serialising cannot fail.
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Latency percentile plots from the sidecar's histograms (transfer phases; route load per
/// concurrency level) and the phase wall-time bars.
fn recording_charts(b: &Baseline, p: &Provenance) -> Result<Vec<Chart>, ChartError> {
    use crate::charts::{Bar, ChartKind, PercentileSeries, decode_histogram, percentile_curve};
    use contract::key::HistogramKey;
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<String, Vec<PercentileSeries>> = BTreeMap::new();
    for (key, b64) in &p.histograms {
        let h = decode_histogram(key, b64)?;
        let parsed = key.parse::<HistogramKey>().ok();
        let (group, name) = match &parsed {
            Some(HistogramKey::Level(l)) => (
                format!("route load at {} in flight", l.in_flight),
                l.route.clone(),
            ),
            _ => ("transfer phases".to_owned(), key.clone()),
        };
        // The curve should come from the sample whose p50 is the recorded median; a recording
        // made before that rule may hold another sample's: then the legend says so. For an
        // even sample count the median lies between the two middle samples, and the rule
        // takes one of them (`recording::median_histograms`): the raw p50s nearest the median.
        let p50 = h.value_at_quantile(0.5) as f64;
        let p50_key =
            parsed.map_or_else(|| format!("{key}.p50_us"), |h| h.quantile(50).to_string());
        let near = |a: f64, m: f64| (a - m).abs() <= 1e-6 * m.abs().max(1.0);
        let median_sample = match (
            b.metrics.get(&p50_key).map(|m| m.value),
            p.raw.get(&p50_key),
        ) {
            (Some(m), Some(raw)) if !raw.is_empty() => {
                let d = raw
                    .iter()
                    .map(|v| (v - m).abs())
                    .fold(f64::INFINITY, f64::min);
                raw.iter()
                    .filter(|v| near((*v - m).abs(), d))
                    .any(|v| near(p50, *v))
            }
            (Some(m), _) => near(p50, m),
            (None, _) => true,
        };
        let name = if median_sample {
            name
        } else {
            format!("{name} (not the median sample)")
        };
        groups.entry(group).or_default().push(PercentileSeries {
            name,
            points: percentile_curve(&h),
            p50: (!h.is_empty()).then_some(p50),
        });
    }
    let mut out = Vec::new();
    let ordered = groups
        .remove("transfer phases")
        .map(|g| ("transfer phases".to_owned(), g))
        .into_iter()
        .chain(groups);
    for (group, series) in ordered {
        out.push(Chart {
            slug: format!("latency-{}", crate::fmt::slug(&group)),
            title: format!(
                "{}: latency distribution, {} (median sample)",
                b.scenario, group
            ),
            kind: ChartKind::Percentiles(series),
        });
    }
    for g in recording::growth(b) {
        if g.points.len() < 2 {
            continue;
        }
        out.push(Chart {
            slug: format!(
                "growth-{}-{}",
                crate::fmt::slug(&g.phase),
                crate::fmt::slug(&g.series)
            ),
            title: format!("{}: {}", b.scenario, g.finding),
            kind: ChartKind::Growth {
                unit: match g.series.as_str() {
                    "server_cpu" => "server CPU µs per file".into(),
                    "time" => "µs per file".into(),
                    s => format!("{} lines per file", s.trim_start_matches("log.")),
                },
                points: g.points.clone(),
                exponent: g.exponent,
            },
        });
    }
    let bars: Vec<Bar> = recording::recording_report(b, p)
        .phases
        .iter()
        .filter_map(|ph| {
            ph.wall_ms.as_ref().map(|c| Bar {
                label: ph.phase.clone(),
                value: c.value,
                low: c.min,
                high: c.max,
            })
        })
        .collect();
    if !bars.is_empty() {
        out.push(Chart {
            slug: "phase-wall-time".into(),
            title: format!(
                "{}: wall time per phase (median, whiskers = raw min–max)",
                b.scenario
            ),
            kind: ChartKind::Bars {
                unit: "ms".into(),
                bars,
            },
        });
    }
    Ok(out)
}

/// Min and max of a raw series, ignoring NaN (the noise band every renderer and export uses).
pub fn range_of(xs: &[f64]) -> Option<(f64, f64)> {
    recording::range(xs)
}

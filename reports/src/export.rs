//! Exports for dashboards users already run: Bencher Metric Format (BMF) JSON and
//! github-action-benchmark's `customSmallerIsBetter` JSON.
//!
//! BMF (bencher.dev/docs/reference/bencher-metric-format): `{ "<benchmark>": { "<measure>":
//! { "value": f, "lower_value"?: f, "upper_value"?: f } } }`. One benchmark per metric key,
//! named `<scenario>/<key>`; the measure is a slug of the key's unit (`milliseconds`,
//! `microseconds`, `files-per-second`, ...), which Bencher creates on first use — the built-in
//! `latency` measure is in nanoseconds and would misread our milliseconds. `lower_value` and
//! `upper_value` are the raw series' min and max (the recording's own noise). BMF carries no
//! direction: Bencher sets it per threshold (upper or lower boundary) on a measure. Each
//! measure therefore holds keys of one direction only: `files-per-second`, `req-per-second` and
//! `checks-passed` (unit `bool`: 1 = passed, e.g. `cold_pull.byte_identical`) are
//! higher-is-better and want a lower-boundary threshold; every other measure is lower-is-better.
//!
//! github-action-benchmark `customSmallerIsBetter` (its README, "Examples"): a JSON array of
//! `{ "name", "unit", "value", "range"?, "extra"? }`. Only lower-is-better metrics belong in
//! it; higher-is-better ones (files/s, req/s) are omitted and listed in [`GabExport::omitted`]
//! rather than inverted, because an inverted throughput in a dashboard reads as a new unit.

use serde::Serialize;
use std::collections::BTreeMap;

use crate::schema::{Baseline, Better, Provenance};

/// One BMF metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BmfMetric {
    pub value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_value: Option<f64>,
}

/// A BMF document: benchmark → measure → metric.
pub type Bmf = BTreeMap<String, BTreeMap<String, BmfMetric>>;

/// The measure slug of a unit.
pub fn measure_slug(unit: &str) -> String {
    match unit {
        "ms" => "milliseconds".into(),
        "us" | "µs" => "microseconds".into(),
        "ns" => "nanoseconds".into(),
        "s" => "seconds".into(),
        "MiB" => "mebibytes".into(),
        "bytes" => "bytes".into(),
        "count" => "count".into(),
        // A passed check (1 = passed): higher is better, unlike every other unit-named measure.
        "bool" => "checks-passed".into(),
        other => {
            let s = other
                .replace('/', "-per-")
                .replace(' ', "-")
                .to_ascii_lowercase();
            let s = s.replace("-per-s", "-per-second");
            if s.is_empty() { "value".into() } else { s }
        }
    }
}

fn raw_range(p: Option<&Provenance>, key: &str) -> Option<(f64, f64)> {
    crate::stats::range(p?.raw.get(key)?)
}

/// The BMF export of a recording.
pub fn bmf(b: &Baseline, p: Option<&Provenance>) -> Bmf {
    let mut out = Bmf::new();
    for (key, m) in &b.metrics {
        let r = raw_range(p, key);
        let metric = BmfMetric {
            value: m.value,
            lower_value: r.map(|r| r.0),
            upper_value: r.map(|r| r.1),
        };
        out.entry(format!("{}/{key}", b.scenario))
            .or_default()
            .insert(measure_slug(&m.unit), metric);
    }
    out
}

/// One github-action-benchmark entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GabEntry {
    pub name: String,
    pub unit: String,
    pub value: f64,
    /// `± half the raw min–max`, the action's range notation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
}

/// The `customSmallerIsBetter` export and the keys left out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct GabExport {
    pub entries: Vec<GabEntry>,
    /// Higher-is-better keys, which do not belong in a smaller-is-better series.
    pub omitted: Vec<String>,
}

/// The github-action-benchmark export of a recording.
pub fn gab(b: &Baseline, p: Option<&Provenance>) -> GabExport {
    let mut entries = Vec::new();
    let mut omitted = Vec::new();
    for (key, m) in &b.metrics {
        if m.better == Better::Higher {
            omitted.push(key.clone());
            continue;
        }
        let r = raw_range(p, key);
        let n = p.and_then(|p| p.raw.get(key)).map_or(0, Vec::len);
        entries.push(GabEntry {
            name: format!("{}/{key}", b.scenario),
            unit: m.unit.clone(),
            value: m.value,
            range: r
                .filter(|r| r.1 > r.0)
                .map(|r| format!("± {}", trim((r.1 - r.0) / 2.0))),
            extra: Some(match r {
                Some((lo, hi)) => format!(
                    "{:?} class, median of {n} samples, raw min {} max {}",
                    m.class,
                    trim(lo),
                    trim(hi)
                )
                .to_lowercase(),
                None => {
                    format!("{:?} class, median of {} samples", m.class, b.samples).to_lowercase()
                }
            }),
        });
    }
    GabExport { entries, omitted }
}

/// A compact number for the text fields (no trailing zeros).
fn trim(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_become_slugs() {
        assert_eq!(measure_slug("files/s"), "files-per-second");
        assert_eq!(measure_slug("req/s"), "req-per-second");
        assert_eq!(measure_slug("fsyncs/file"), "fsyncs-per-file");
        assert_eq!(measure_slug("ms"), "milliseconds");
        assert_eq!(measure_slug("bool"), "checks-passed");
    }

    #[test]
    fn trim_drops_trailing_zeros() {
        assert_eq!(trim(1.5), "1.5");
        assert_eq!(trim(2.0), "2");
        assert_eq!(trim(0.0), "0");
    }
}

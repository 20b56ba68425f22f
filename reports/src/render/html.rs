//! Self-contained HTML: inline CSS, charts as inline SVG, no scripts, no external references
//! and no URLs except one `data:` URI, the charts' font (an `@font-face` in the page's style,
//! shared by every chart); the SVG namespace attribute is dropped: inline SVG in HTML needs none.

use super::error::RenderError;
use super::history::HistoryReport;
use super::md::{history_rows, recording_sections};
use super::recording::RecordingReport;
use crate::charts::Chart;
use crate::fmt::{html_escape, html_inline, html_table};

const CSS: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.4}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.6em 0;font-size:.85em}\
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}\
td:first-child{white-space:nowrap}\
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}\
tbody tr:nth-child(even){background:#fafafa}.chart{margin:1em 0}.chart svg{max-width:100%;height:auto}\
.flame svg{max-width:100%;height:auto}.flame text{pointer-events:none}\
.notes li{margin:.3em 0}.muted{color:#666}.keep{color:#007a4d;font-weight:bold}.reject{color:#b34700;font-weight:bold}";

/// Opens a page.
pub(crate) fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{}{CSS}</style>\n</head>\n<body>\n",
        html_escape(title),
        crate::charts::font_face_css()
    )
}

pub(crate) const TAIL: &str = "</body>\n</html>\n";

/// A chart as inline SVG in a figure.
pub(crate) fn figure(c: &Chart) -> Result<String, RenderError> {
    let svg = c.svg_without_font()?;
    let svg = svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
    Ok(format!(
        "<figure class=\"chart\" id=\"{}\">\n{}\n</figure>\n",
        html_escape(&c.slug),
        svg.trim()
    ))
}

pub fn recording(r: &RecordingReport, charts: &[Chart]) -> Result<String, RenderError> {
    let mut s = head(&format!("vaultbench recording: {}", r.scenario));
    s.push_str(&format!(
        "<h1>vaultbench recording: {}</h1>\n<p>Profile {}, seed {}, median of {} samples, recorded {}.</p>\n",
        html_escape(&r.scenario),
        html_escape(&r.profile),
        html_escape(&r.seed),
        r.samples,
        html_escape(&r.recorded_at)
    ));
    s.push_str("<h2>Charts</h2>\n<p class=\"muted\">Latency distributions are percentile plots from HdrHistograms: each curve comes from the sample whose p50 for that route is the recording's median p50 (a legend entry says so when it does not), and the ring on each curve marks that median. The x axis spreads the tail (90%, 99%, 99.9% are evenly spaced); both axes are logarithmic. A phase chart whose bars differ more than 30-fold uses a log axis (its axis title says so).</p>\n");
    for c in charts {
        s.push_str(&figure(c)?);
    }
    for sec in recording_sections(r) {
        if sec.heading == "All metrics" {
            s.push_str("<h2>What these numbers are not</h2>\n<ul class=\"notes\">\n");
            for c in &r.not_claims {
                s.push_str(&format!("<li>{}</li>\n", html_inline(c)));
            }
            s.push_str("</ul>\n");
        }
        if sec.rows.is_empty() {
            continue;
        }
        s.push_str(&format!("<h2>{}</h2>\n", html_escape(sec.heading)));
        if !sec.intro.is_empty() {
            s.push_str(&format!("<p>{}</p>\n", html_inline(&sec.intro)));
        }
        s.push_str(&html_table(&sec.headers, &sec.rows));
        if sec.heading == "Top functions per phase" {
            s.push_str(&recording_flames(r));
        }
    }
    s.push_str(TAIL);
    Ok(s)
}

/// A flame graph per part of a `--cost` recording, each in an open `<details>`.
fn recording_flames(r: &RecordingReport) -> String {
    let mut s = String::from(
        "<h3>Flame graphs</h3>\n<p class=\"muted\">One per phase, from the cost sample's callgrind call graph: a frame's width is its instructions including what it called; hover a frame for its name and count. Callgrind counts calls per caller–callee pair, not per whole stack, so below the first level a function's time is split among its callers in proportion to their calls' cost.</p>\n",
    );
    for (part, p) in r.functions.iter().filter(|(_, p)| !p.stacks.is_empty()) {
        s.push_str(&format!(
            "<details open><summary>{}</summary>\n<figure class=\"chart flame\" id=\"flame-{}\">\n{}</figure>\n</details>\n",
            html_escape(part),
            crate::fmt::slug(part),
            crate::flame::svg(part, &p.stacks, None, "instructions")
        ));
    }
    s
}

pub fn history(r: &HistoryReport, charts: &[Chart]) -> Result<String, RenderError> {
    let mut s = head("vaultbench baselines history");
    s.push_str(&format!(
        "<h1>vaultbench baselines history</h1>\n<p>{}</p>\n",
        html_escape(&r.source)
    ));
    for h in &r.scenarios {
        s.push_str(&format!("<h2>{}</h2>\n", html_escape(&h.heading())));
        let prefix = h.chart_prefix();
        s.push_str("<p class=\"muted\">Each point is a baseline's median; the shaded band is that version's raw min–max over its samples. A move inside the band is not a trend.</p>\n");
        if let Some(note) = h.machine_note() {
            s.push_str(&format!("<p class=\"note\">{}</p>\n", html_escape(&note)));
        }
        for c in charts.iter().filter(|c| c.slug.starts_with(&prefix)) {
            s.push_str(&figure(c)?);
        }
        if h.points.len() >= 2 {
            let (headers, rows) = history_rows(h);
            let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
            s.push_str(&html_table(&hs, &rows));
        } else {
            s.push_str("<p>One version only: no trend yet.</p>\n");
        }
    }
    s.push_str(TAIL);
    Ok(s)
}

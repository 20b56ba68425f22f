//! Charts with plotters: latency percentile plots (log axes, from the recordings' HdrHistograms),
//! phase bars with their raw spread, A/B forest plots and per-round values, and baseline trends
//! with a noise band. SVG for the self-contained HTML report, PNG on request.
//!
//! Text is drawn with an embedded DejaVu Sans (`assets/DejaVuSans.ttf`, Bitstream Vera licence
//! beside it) through plotters' `ab_glyph` feature, so labels render on a machine with no font
//! packages at all (without a font feature, plotters' PNG backend panics and fontconfig is
//! needed). PNG text is rasterised by `glyphs.rs` with the font's bearings and kerning. An SVG
//! carries a subset of the same font (`assets/DejaVuSans-subset.ttf`, made by
//! `scripts/subset-font.sh`) as an `@font-face` data URI, so a browser draws the text with the
//! metrics the layout was computed with; the HTML report carries that face once for all charts.
//!
//! Log axes put their ticks on 1-2-5 values and label times in the unit that reads best
//! (`200 µs`, `1.5 ms`, `2 s`). Percentile plots mark the median (p50) on every curve; a phase
//! bar chart whose bars span more than [`LOG_BARS_RATIO`] switches to a log axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::sync::Once;

use crate::glyphs::FONT;
/// The subset an SVG embeds (Latin-1, punctuation, arrows, math signs, µ; see
/// `scripts/subset-font.sh`): 39 KB instead of 760 KB.
static FONT_SUBSET: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
/// The family name charts ask for: registered to the embedded font for plotters, and declared
/// by the SVG's `@font-face` for browsers.
const FAMILY: &str = "DejaVu Sans";

/// Bars spanning more than this ratio (largest / smallest) get a log axis: at 30x a linear
/// axis leaves the smallest bar under 3 % of the plot height, about 10 px, and its whisker
/// and label unreadable.
pub const LOG_BARS_RATIO: f64 = 30.0;

/// Chart size in pixels (SVG user units and PNG pixels alike).
pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 440;

/// Colours with enough contrast on white (Okabe–Ito palette, safe for colour-blind readers).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(150, 150, 150),
];

/// A chart could not be drawn or a histogram could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("chart {chart}: {detail}")]
    Draw { chart: String, detail: String },
    #[error("histogram {key}: {detail}")]
    Histogram { key: String, detail: String },
}

/// One named series of (percentile as a fraction, latency in µs) points.
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileSeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// The median (p50) in µs, marked on the curve.
    pub p50: Option<f64>,
}

/// A bar with the spread of its raw series.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// One row of a forest plot: an estimated change (percent) with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestRow {
    pub label: String,
    pub estimate_pct: f64,
    pub low_pct: f64,
    pub high_pct: f64,
    /// `better`, `worse`, `no change`, `inconclusive` (colours the row).
    pub verdict: String,
}

/// One trend point: the median and its noise band.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    pub label: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// The point's calibration differs from the newest version's beyond the tolerance (a
    /// machine of another speed): drawn as a hollow red ring, not as a filled dot.
    pub machine_differs: bool,
}

/// A change point on a trend chart, between point indices: a step or a machine change is a
/// vertical line between `from` and `to` (neighbours); a drift shades `from..=to`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeMark {
    pub from: usize,
    pub to: usize,
    /// `step`, `drift` or `machine change` (colours the mark and names it in the legend).
    pub kind: String,
}

/// One A/B round: the A and B values and which ran first.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundPoint {
    pub round: usize,
    pub a: f64,
    pub b: f64,
    pub a_first: bool,
}

/// What a chart shows.
#[derive(Debug, Clone, PartialEq)]
pub enum ChartKind {
    Percentiles(Vec<PercentileSeries>),
    Bars {
        unit: String,
        bars: Vec<Bar>,
    },
    Forest(Vec<ForestRow>),
    Trend {
        unit: String,
        points: Vec<TrendPoint>,
        /// Change points to mark (empty in a baselines history).
        marks: Vec<ChangeMark>,
    },
    Rounds {
        unit: String,
        rounds: Vec<RoundPoint>,
    },
    /// A per-file series against the vault size, both axes logarithmic, with its fitted
    /// power line (`reports::growth`).
    Growth {
        unit: String,
        /// (files on the server, the window's midpoint; cost per file).
        points: Vec<(f64, f64)>,
        /// The fitted exponent, where the series has a fit.
        exponent: Option<f64>,
    },
}

/// A chart: a file-name slug, a title and its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub slug: String,
    pub title: String,
    pub kind: ChartKind,
}

/// The CSS `@font-face` rule that gives browsers the charts' font (the subset, as a data URI).
/// A page with several inline SVG charts carries it once.
pub fn font_face_css() -> String {
    format!(
        "@font-face{{font-family:'{FAMILY}';src:url(data:font/ttf;base64,{}) format('truetype')}}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, FONT_SUBSET)
    )
}

/// Registers the embedded font once per process; plotters' `ab_glyph` text needs it.
pub fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The font is compiled in and parsed by a test: failure here is a build defect.
            let _ = plotters::style::register_font(FAMILY, style, FONT);
        }
    });
}

impl Chart {
    /// Height in pixels: a forest plot grows with its rows so labels stay readable.
    pub fn height(&self) -> u32 {
        match &self.kind {
            ChartKind::Forest(rows) => HEIGHT.max(100 + 24 * rows.len() as u32),
            _ => HEIGHT,
        }
    }

    /// The chart as a standalone SVG document, its font embedded.
    pub fn svg(&self) -> Result<String, ChartError> {
        let svg = self.svg_without_font()?;
        let style = format!("<defs><style>{}</style></defs>", font_face_css());
        // After the opening tag: the first '>' ends `<svg ...>` (plotters writes no prolog).
        Ok(match svg.find('>') {
            Some(i) => format!("{}{style}{}", &svg[..=i], &svg[i + 1..]),
            None => svg,
        })
    }

    /// The chart as SVG that relies on its page for the font ([`font_face_css`]).
    pub fn svg_without_font(&self) -> Result<String, ChartError> {
        register_fonts();
        let mut out = String::new();
        {
            let backend = crate::glyphs::Text {
                inner: SVGBackend::with_string(&mut out, (WIDTH, self.height())),
                raster: false,
            };
            let root = backend.into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(|e| self.err(e))?;
        }
        Ok(out)
    }

    /// The chart as PNG bytes.
    pub fn png(&self) -> Result<Vec<u8>, ChartError> {
        register_fonts();
        let height = self.height();
        let mut rgb = vec![0u8; (WIDTH * height * 3) as usize];
        {
            let backend = crate::glyphs::Text {
                inner: BitMapBackend::with_buffer(&mut rgb, (WIDTH, height)),
                raster: true,
            };
            let root = backend.into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(|e| self.err(e))?;
        }
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, WIDTH, height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(|e| self.err(e))?;
            w.write_image_data(&rgb).map_err(|e| self.err(e))?;
        }
        Ok(out)
    }

    fn err(&self, e: impl std::fmt::Display) -> ChartError {
        ChartError::Draw {
            chart: self.slug.clone(),
            detail: e.to_string(),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), ChartError> {
        root.fill(&WHITE).map_err(|e| self.err(e))?;
        let r = match &self.kind {
            ChartKind::Percentiles(series) => draw_percentiles(root, &self.title, series),
            ChartKind::Bars { unit, bars } => draw_bars(root, &self.title, unit, bars),
            ChartKind::Forest(rows) => draw_forest(root, &self.title, rows),
            ChartKind::Trend {
                unit,
                points,
                marks,
            } => draw_trend(root, &self.title, unit, points, marks),
            ChartKind::Rounds { unit, rounds } => draw_rounds(root, &self.title, unit, rounds),
            ChartKind::Growth {
                unit,
                points,
                exponent,
            } => draw_growth(root, &self.title, unit, points, *exponent),
        };
        r.map_err(|detail| ChartError::Draw {
            chart: self.slug.clone(),
            detail,
        })
    }
}

/// Decodes a persisted histogram (base64 of HdrHistogram V2 + DEFLATE, values in µs).
pub fn decode_histogram(key: &str, b64: &str) -> Result<hdrhistogram::Histogram<u64>, ChartError> {
    contract::histogram::decode(b64).map_err(|e| ChartError::Histogram {
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

/// The percentile curve of a histogram: quantiles spaced evenly on the "nines" axis
/// (1/(1−q)), from 0 to the last quantile the count can support (1 − 1/count), ending at max.
pub fn percentile_curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    // 20 steps per decade of 1/(1-q), up to 99.99 % (four nines).
    let q_max = (1.0 - 1.0 / n as f64).min(0.9999);
    let mut out = Vec::new();
    for step in 0..=80 {
        let q = 1.0 - 10f64.powf(-(step as f64) / 20.0);
        if q > q_max {
            break;
        }
        out.push((q, h.value_at_quantile(q) as f64));
    }
    if q_max > 0.0 {
        out.push((q_max, h.max() as f64));
    }
    out
}

type DrawResult = Result<(), String>;

fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn percentile_label(x: f64) -> String {
    let p = (1.0 - 1.0 / x) * 100.0;
    // Up to three decimals (99.99 %), trailing zeros dropped: 0%, 90%, 99%, 99.9%.
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The segmented axis of `n` categories (plotters' integer ranges include their end).
fn categories(n: usize) -> std::ops::Range<usize> {
    0..n.saturating_sub(1).max(1)
}

fn short(v: f64) -> String {
    crate::fmt::num(v)
}

/// Microseconds per unit for the time units keys use; `None` for other units.
fn us_per(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-3),
        "us" | "µs" => Some(1.0),
        "ms" => Some(1e3),
        "s" => Some(1e6),
        _ => None,
    }
}

/// A number with at most three significant decimals, trailing zeros dropped.
fn plain(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A duration given in µs, in the unit that reads best: `200 µs`, `1.5 ms`, `2 s`.
pub fn time_label_us(us: f64) -> String {
    let (v, unit) = if us.abs() >= 1e6 {
        (us / 1e6, "s")
    } else if us.abs() >= 1e3 {
        (us / 1e3, "ms")
    } else {
        (us, "µs")
    };
    format!("{} {unit}", plain(v))
}

/// An axis label for a value in `unit`: times in their best unit, anything else as a number.
fn value_label(unit: &str, v: f64) -> String {
    match us_per(unit) {
        Some(f) => time_label_us(v * f),
        None => short(v),
    }
}

/// Tick values for a log axis over `lo..=hi` (positive): 1-2-5 per decade, denser mantissas
/// when that gives fewer than four ticks, only powers of ten when it gives more than twelve.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let ticks = |mantissas: &[f64]| {
        let mut out = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi {
            let p = 10f64.powi(e);
            out.extend(
                mantissas
                    .iter()
                    .map(|m| m * p)
                    .filter(|v| *v >= lo && *v <= hi),
            );
            e += 1;
        }
        out
    };
    let t = ticks(&[1.0, 2.0, 5.0]);
    if t.len() > 12 {
        return ticks(&[1.0]);
    }
    if t.len() >= 4 {
        return t;
    }
    let t = ticks(&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]);
    if t.len() >= 4 {
        return t;
    }
    ticks(&[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

/// The percentiles a percentile plot labels, as positions on its 1/(1−q) axis, up to `x_max`.
fn percentile_ticks(x_max: f64) -> Vec<f64> {
    [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999]
        .iter()
        .map(|q| 1.0 / (1.0 - q))
        .filter(|x| *x <= x_max)
        .collect()
}

fn draw_percentiles<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[PercentileSeries],
) -> DrawResult {
    let all = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| *v > 0.0);
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if hi > 0.0 {
        (lo * 0.8, hi * 1.25)
    } else {
        (1.0, 10.0)
    };
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| 1.0 / (1.0 - p.0)))
        .fold(10.0f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(
            (1.0f64..x_max)
                .log_scale()
                .with_key_points(percentile_ticks(x_max)),
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
        )
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .bold_line_style(RGBColor(225, 225, 225))
        .x_desc("percentile (log of 1/(1-q): 90%, 99%, 99.9% evenly spaced)")
        .y_desc("latency (log scale)")
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|y| time_label_us(*y))
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    // The median: a dashed vertical line at 50 %, and a ring on every curve at its p50.
    let grey = RGBColor(110, 110, 110);
    chart
        .draw_series(DashedLineSeries::new(
            [(2.0, lo), (2.0, hi)],
            6,
            4,
            grey.stroke_width(1),
        ))
        .map_err(e2s)?;
    chart
        .draw_series(std::iter::once(Text::new(
            "median",
            (2.0 * 1.04, hi / 1.04),
            (FAMILY, 13)
                .into_font()
                .color(&grey)
                .pos(Pos::new(HPos::Left, VPos::Top)),
        )))
        .map_err(e2s)?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|p| (1.0 / (1.0 - p.0), p.1))
            .collect();
        // A dot at the end marks the maximum, and keeps a one-request series visible.
        let last = pts.last().copied();
        chart
            .draw_series(last.map(|p| Circle::new(p, 3, color.filled())))
            .map_err(e2s)?;
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(e2s)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
        chart
            .draw_series(
                s.p50
                    .filter(|v| *v > 0.0)
                    .map(|v| Circle::new((2.0, v), 5, color.stroke_width(2))),
            )
            .map_err(e2s)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}

fn value_range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let (lo, hi) = if from_zero {
        (lo.min(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    };
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
    (
        if from_zero && lo >= 0.0 {
            0.0
        } else {
            lo - pad
        },
        hi + pad,
    )
}

fn segment_label(labels: &[String], v: &SegmentValue<usize>) -> String {
    match v {
        SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    bars: &[Bar],
) -> DrawResult {
    let (_, hi) = value_range(bars.iter().flat_map(|b| [b.value, b.high]), true);
    let positive = bars
        .iter()
        .flat_map(|b| [b.value, b.low])
        .filter(|v| *v > 0.0);
    let smallest = positive.fold(f64::INFINITY, f64::min);
    let largest = bars.iter().map(|b| b.value).fold(0.0f64, f64::max);
    if smallest.is_finite() && largest / smallest > LOG_BARS_RATIO {
        // Log axis: bars rise from below the smallest value; values sit above the whiskers.
        let (lo, top) = (smallest / 2.0, hi * 3.0);
        let y = (lo..top).log_scale().with_key_points(log_ticks(lo, top));
        let desc = format!("{unit}, log scale");
        bars_on(root, title, &desc, unit, bars, y, lo, &|high| high * 1.12)
    } else {
        let top = hi * 1.06;
        let label_at = move |high: f64| high + hi * 0.03;
        bars_on(root, title, unit, unit, bars, 0.0..top, 0.0, &label_at)
    }
}

/// Phase bars on a given value axis (linear from zero, or log); `label_at` places each bar's
/// value above its whisker.
#[allow(clippy::too_many_arguments)]
fn bars_on<DB: DrawingBackend, Y>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    unit: &str,
    bars: &[Bar],
    y: Y,
    base: f64,
    label_at: &dyn Fn(f64) -> f64,
) -> DrawResult
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let n = bars.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(categories(n).into_segmented(), y)
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| segment_label(&labels, v))
        .y_label_formatter(&|y| value_label(unit, *y))
        .y_desc(y_desc)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), base),
                    (SegmentValue::Exact(i + 1), b.value.max(base)),
                ],
                PALETTE[0].mix(0.8).filled(),
            );
            r.set_margin(0, 0, 18, 18);
            r
        }))
        .map_err(e2s)?;
    // Whiskers: the raw series' min-max (the noise this recording's own samples show).
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), b.low.max(base)),
                    (SegmentValue::CenterOf(i), b.high.max(base)),
                ],
                BLACK.stroke_width(2),
            )
        }))
        .map_err(e2s)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            // Above the whisker, so the number never sits on the bar's edge.
            Text::new(
                value_label(unit, b.value),
                (SegmentValue::CenterOf(i), label_at(b.high.max(base))),
                (FAMILY, 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))
        .map_err(e2s)?;
    Ok(())
}

fn verdict_color(v: &str) -> RGBColor {
    match v {
        "better" => PALETTE[2],
        "worse" => PALETTE[1],
        "no change" | "no_change" => PALETTE[0],
        _ => PALETTE[7],
    }
}

fn draw_forest<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[ForestRow],
) -> DrawResult {
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    // Intervals of a few rounds can reach +1000 %: clamp the axis to what the estimates need
    // (at least ±10 %, at most −100 %..+300 %) and let wider intervals run to the edge.
    let est_lo = rows.iter().map(|r| r.estimate_pct).fold(0.0f64, f64::min);
    let est_hi = rows.iter().map(|r| r.estimate_pct).fold(0.0f64, f64::max);
    let span = (est_hi - est_lo).max(10.0);
    let (lo_cap, hi_cap) = ((est_lo - span).max(-100.0), (est_hi + span).min(300.0));
    let clamp = |v: f64| v.clamp(lo_cap, hi_cap);
    let (lo, hi) = value_range(
        rows.iter()
            .flat_map(|r| [clamp(r.low_pct), clamp(r.high_pct), 0.0]),
        false,
    );
    let n = rows.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(280)
        .build_cartesian_2d(lo..hi, categories(n).into_segmented())
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| segment_label(&labels, v))
        .x_label_formatter(&|x| format!("{x:+.1}%"))
        .x_desc("change B vs A (%, Hodges–Lehmann estimate and 95% interval)")
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, SegmentValue::Exact(0)), (0.0, SegmentValue::Exact(n))],
            BLACK.stroke_width(1),
        )))
        .map_err(e2s)?;
    for (i, r) in rows.iter().enumerate() {
        let c = verdict_color(&r.verdict);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (clamp(r.low_pct), SegmentValue::CenterOf(i)),
                    (clamp(r.high_pct), SegmentValue::CenterOf(i)),
                ],
                c.stroke_width(3),
            )))
            .map_err(e2s)?;
        chart
            .draw_series(std::iter::once(Circle::new(
                (clamp(r.estimate_pct), SegmentValue::CenterOf(i)),
                5,
                c.filled(),
            )))
            .map_err(e2s)?;
    }
    Ok(())
}

fn draw_trend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    points: &[TrendPoint],
    marks: &[ChangeMark],
) -> DrawResult {
    let labels: Vec<String> = points.iter().map(|p| p.label.clone()).collect();
    let (lo, hi) = value_range(points.iter().flat_map(|p| [p.low, p.high, p.value]), false);
    let n = points.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(categories(n).into_segmented(), lo..hi)
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .x_labels(n.min(12))
        .x_label_formatter(&|v| segment_label(&labels, v))
        .y_label_formatter(&|y| short(*y))
        .y_desc(unit)
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    let color = PALETTE[0];
    // The noise band: each point's raw min..max.
    let mut band: Vec<(SegmentValue<usize>, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| (SegmentValue::CenterOf(i), p.high))
        .collect();
    band.extend(
        points
            .iter()
            .enumerate()
            .rev()
            .map(|(i, p)| (SegmentValue::CenterOf(i), p.low)),
    );
    chart
        .draw_series(std::iter::once(Polygon::new(
            band,
            color.mix(0.18).filled(),
        )))
        .map_err(e2s)?
        .label("raw min–max (noise band)")
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.mix(0.18).filled())
        });
    chart
        .draw_series(LineSeries::new(
            points
                .iter()
                .enumerate()
                .map(|(i, p)| (SegmentValue::CenterOf(i), p.value)),
            color.stroke_width(2),
        ))
        .map_err(e2s)?
        .label("median")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3)));
    chart
        .draw_series(
            points
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.machine_differs)
                .map(|(i, p)| Circle::new((SegmentValue::CenterOf(i), p.value), 4, color.filled())),
        )
        .map_err(e2s)?;
    if points.iter().any(|p| p.machine_differs) {
        let mark = PALETTE[1];
        chart
            .draw_series(
                points
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.machine_differs)
                    .map(|(i, p)| {
                        Circle::new(
                            (SegmentValue::CenterOf(i), p.value),
                            6,
                            mark.stroke_width(2),
                        )
                    }),
            )
            .map_err(e2s)?
            .label("calibration differs from the newest version's: not comparable")
            .legend(move |(x, y)| Circle::new((x + 9, y), 5, mark.stroke_width(2)));
    }
    // Change points: a step is a vertical line between its two neighbours in the palette's
    // vermilion, a machine change the same in grey, a drift a shaded span; each kind is named
    // once in the legend.
    for (kind, color) in [
        ("step", PALETTE[1]),
        ("machine change", PALETTE[7]),
        ("drift", PALETTE[5]),
    ] {
        let of_kind: Vec<&ChangeMark> = marks.iter().filter(|m| m.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let series = chart.draw_series(of_kind.iter().map(|m| {
            if kind == "drift" {
                Rectangle::new(
                    [
                        (SegmentValue::CenterOf(m.from), lo),
                        (SegmentValue::CenterOf(m.to), hi),
                    ],
                    color.mix(0.22).filled(),
                )
            } else {
                // A one-pixel-wide rectangle: a vertical line at the boundary of `to`.
                Rectangle::new(
                    [
                        (SegmentValue::Exact(m.to), lo),
                        (SegmentValue::Exact(m.to), hi),
                    ],
                    color.stroke_width(2),
                )
            }
        }));
        let label = format!("change point: {kind}");
        series
            .map_err(e2s)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}

fn draw_growth<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    points: &[(f64, f64)],
    exponent: Option<f64>,
) -> DrawResult {
    let pos: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(n, y)| *n > 0.0 && *y > 0.0 && y.is_finite())
        .collect();
    let range = |f: fn(&(f64, f64)) -> f64| {
        let (lo, hi) = pos
            .iter()
            .map(f)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if hi > 0.0 {
            (lo * 0.8, hi * 1.25)
        } else {
            (1.0, 10.0)
        }
    };
    let (xlo, xhi) = range(|p| p.0);
    let (ylo, yhi) = range(|p| p.1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(
            (xlo..xhi).log_scale().with_key_points(log_ticks(xlo, xhi)),
            (ylo..yhi).log_scale().with_key_points(log_ticks(ylo, yhi)),
        )
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| short(*y))
        .x_desc("files on the server (log)")
        .y_desc(format!("{unit} (log)"))
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    let color = PALETTE[0];
    chart
        .draw_series(pos.iter().map(|&p| Circle::new(p, 4, color.filled())))
        .map_err(e2s)?
        .label("per checkpoint window")
        .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
    if let Some(k) = exponent.filter(|k| k.is_finite())
        && pos.len() >= 2
    {
        // The least-squares line on log axes: through the mean of ln n and ln y.
        let m = pos.len() as f64;
        let mx = pos.iter().map(|p| p.0.ln()).sum::<f64>() / m;
        let my = pos.iter().map(|p| p.1.ln()).sum::<f64>() / m;
        let at = |n: f64| (my + k * (n.ln() - mx)).exp();
        let (a, b) = (pos[0].0, pos[pos.len() - 1].0);
        let fit = PALETTE[1];
        chart
            .draw_series(LineSeries::new(
                (0..=40).map(|i| {
                    let n = a * (b / a).powf(f64::from(i) / 40.0);
                    (n, at(n).clamp(ylo, yhi))
                }),
                fit.stroke_width(2),
            ))
            .map_err(e2s)?
            .label(format!("fit: ∝ n^{k:.2}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], fit.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}

fn draw_rounds<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    rounds: &[RoundPoint],
) -> DrawResult {
    let (lo, hi) = value_range(rounds.iter().flat_map(|r| [r.a, r.b]), false);
    let n = rounds.iter().map(|r| r.round + 1).max().unwrap_or(1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, lo..hi)
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .x_desc("round")
        .y_desc(unit)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{}", x.round() as i64 + 1)
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| short(*y))
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    let (a_col, b_col) = (PALETTE[0], PALETTE[1]);
    // Filled markers: the arm ran first in that round; hollow: it ran second.
    for (arm, col, dx) in [("A", a_col, -0.12), ("B", b_col, 0.12)] {
        let pick = |r: &RoundPoint| if arm == "A" { r.a } else { r.b };
        let first = |r: &RoundPoint| (arm == "A") == r.a_first;
        chart
            .draw_series(
                rounds
                    .iter()
                    .filter(|r| first(r))
                    .map(|r| Circle::new((r.round as f64 + dx, pick(r)), 5, col.filled())),
            )
            .map_err(e2s)?
            .label(format!("{arm}, ran first"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, col.filled()));
        chart
            .draw_series(
                rounds
                    .iter()
                    .filter(|r| !first(r))
                    .map(|r| Circle::new((r.round as f64 + dx, pick(r)), 5, col.stroke_width(2))),
            )
            .map_err(e2s)?
            .label(format!("{arm}, ran second"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, col.stroke_width(2)));
    }
    chart
        .draw_series(rounds.iter().map(|r| {
            PathElement::new(
                vec![(r.round as f64 - 0.12, r.a), (r.round as f64 + 0.12, r.b)],
                PALETTE[7].stroke_width(1),
            )
        }))
        .map_err(e2s)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_parses() {
        assert!(ab_glyph_parses(FONT));
    }

    fn ab_glyph_parses(bytes: &'static [u8]) -> bool {
        plotters::style::register_font("vaultbench-test", FontStyle::Normal, bytes).is_ok()
    }

    #[test]
    fn the_svg_font_subset_parses_and_has_the_label_characters() {
        use ab_glyph::Font;
        let f = ab_glyph::FontRef::try_from_slice(FONT_SUBSET).unwrap();
        for c in "Az09%µ–−±×≤≥…→".chars() {
            assert_ne!(f.glyph_id(c).0, 0, "{c} is missing from the subset");
        }
    }

    #[test]
    fn log_axes_label_times_below_a_millisecond_in_microseconds() {
        assert_eq!(time_label_us(200.0), "200 µs");
        assert_eq!(time_label_us(1500.0), "1.5 ms");
        assert_eq!(time_label_us(2_000_000.0), "2 s");
        assert_eq!(value_label("ms", 0.5), "500 µs");
        assert_eq!(value_label("count", 3.0), short(3.0));
        // 300 µs .. 4 ms: ticks below 1 ms exist, 1-2-5 spaced.
        assert_eq!(
            log_ticks(300.0, 4000.0),
            vec![300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0]
        );
        // Many decades: powers of ten only.
        assert_eq!(log_ticks(1.0, 1e7).len(), 8);
    }

    #[test]
    fn percentile_labels_read_as_nines() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(10000.0), "99.99%");
    }

    #[test]
    fn a_histogram_round_trips_into_a_curve() {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let b64 = contract::histogram::encode(&h).unwrap();
        let back = decode_histogram("k", &b64).unwrap();
        let curve = percentile_curve(&back);
        assert_eq!(curve.first().unwrap().0, 0.0);
        // 1000 values support quantiles up to 99.9 %; the curve ends at the max.
        assert!((curve.last().unwrap().0 - 0.999).abs() < 1e-12);
        assert_eq!(curve.last().unwrap().1, back.max() as f64);
        let p50 = curve.iter().find(|p| (p.0 - 0.5).abs() < 0.2).unwrap();
        assert!(p50.1 > 3000.0 && p50.1 < 8000.0, "{p50:?}");
        assert!(
            decode_histogram("bad", "not base64!")
                .unwrap_err()
                .to_string()
                .contains("bad")
        );
    }

    fn bars(values: &[f64]) -> Chart {
        Chart {
            slug: "bars".into(),
            title: "Phase wall time".into(),
            kind: ChartKind::Bars {
                unit: "ms".into(),
                bars: values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Bar {
                        label: format!("phase{i}"),
                        value: *v,
                        low: v * 0.9,
                        high: v * 1.1,
                    })
                    .collect(),
            },
        }
    }

    #[test]
    fn a_phase_300_times_another_gets_a_log_axis() {
        let svg = bars(&[1.0, 300.0, 40.0]).svg_without_font().unwrap();
        assert!(
            svg.contains("ms, log scale"),
            "the axis says it is logarithmic"
        );
        // The 1 ms bar's value and a sub-millisecond tick are labelled.
        assert!(svg.contains("\n1 ms\n"), "{svg}");
        assert!(svg.contains("\n500 µs\n"), "a tick below 1 ms, in µs");
        let linear = bars(&[10.0, 30.0]).svg_without_font().unwrap();
        assert!(!linear.contains("log scale"));
    }

    #[test]
    fn charts_render_svg_with_text_and_png_with_ink() {
        let chart = Chart {
            slug: "bars".into(),
            title: "Phase wall time".into(),
            kind: ChartKind::Bars {
                unit: "ms".into(),
                bars: vec![Bar {
                    label: "cold_push".into(),
                    value: 10.0,
                    low: 9.0,
                    high: 12.0,
                }],
            },
        };
        let svg = chart.svg().unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("Phase wall time") && svg.contains("cold_push")
        );
        // The standalone SVG carries its font; the text asks for it by name.
        assert!(svg.contains("@font-face{font-family:'DejaVu Sans';src:url(data:font/ttf;base64,"));
        assert!(svg.contains("font-family=\"DejaVu Sans\""));
        assert!(!chart.svg_without_font().unwrap().contains("@font-face"));
        let png = chart.png().unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}

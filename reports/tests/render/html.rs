//! The HTML report is self-contained (no URLs, scripts or external references) and embeds
//! its charts as SVG with readable text; PNG charts decode and carry ink.

use reports::charts::Chart;
use reports::render::{Document, Format, charts, render};

use crate::fixtures::small;

/// Everything that would make a page fetch something, or point somewhere. The one URL
/// allowed is the embedded font's `data:` URI, once.
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in ["http://", "https://", "<script", "<link", "@import"] {
        assert!(!lower.contains(bad), "the HTML contains {bad:?}");
    }
    // `src=` only inside the @font-face rule (`src:` there), never as an attribute.
    assert!(!lower.contains(" src="), "the HTML has a src attribute");
    let urls: Vec<&str> = lower.split("url(").skip(1).collect();
    assert_eq!(urls.len(), 1, "one url(): the font");
    assert!(
        urls[0].starts_with("data:font/ttf;base64,"),
        "{}",
        &urls[0][..40]
    );
}

#[test]
fn recording_html_is_self_contained_and_has_charts() {
    let (b, p) = small();
    let html = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Html,
    )
    .unwrap();
    assert_self_contained(&html);
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Transfer phases, route load at 1 and at 4 in flight, and the phase bars.
    assert_eq!(html.matches("<svg").count(), 4, "four charts");
    assert!(html.contains("latency distribution, transfer phases"));
    assert!(html.contains("route load at 4 in flight"));
    assert!(html.contains("wall time per phase"));
    // Axis labels are text, percentiles on the x axis.
    assert!(html.contains("99.9%\n"), "a percentile tick label");
    assert!(html.contains("What these numbers are not"));
}

#[test]
fn charts_render_as_png_with_ink_in_the_title() {
    let (b, p) = small();
    let all: Vec<Chart> = charts(&Document::Recording {
        baseline: &b,
        provenance: &p,
    })
    .unwrap();
    assert_eq!(all.len(), 4);
    let bytes = all[0].png().unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(
        (info.width, info.height),
        (reports::charts::WIDTH, reports::charts::HEIGHT)
    );
    // The caption band (top 30 rows): text drawn with the embedded font leaves dark pixels.
    let row = info.width as usize * 3;
    let dark = buf[..row * 30]
        .chunks(3)
        .filter(|px| px.iter().all(|c| *c < 100))
        .count();
    assert!(
        dark > 200,
        "only {dark} dark pixels in the title band: text did not render"
    );
}

#[test]
fn write_a_sample_page_when_asked() {
    // For looking at by eye (headless Chromium): VAULTBENCH_WRITE_HTML=r.html.
    if let Some(path) = std::env::var_os("VAULTBENCH_WRITE_HTML") {
        let (b, p) = small();
        std::fs::write(
            path,
            render(
                &Document::Recording {
                    baseline: &b,
                    provenance: &p,
                },
                Format::Html,
            )
            .unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn a_sparse_sidecar_still_renders() {
    // An older or partial sidecar: no histograms, no gate verdict, no machine fingerprint.
    let (b, mut p) = small();
    p.histograms.clear();
    p.gate = None;
    p.machine = contract::machine::Fingerprint::default();
    let doc = Document::Recording {
        baseline: &b,
        provenance: &p,
    };
    let html = render(&doc, Format::Html).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        1,
        "only the phase bars remain"
    );
    let md = render(&doc, Format::Md).unwrap();
    assert!(
        md.contains("Recorded on unknown"),
        "the claims say what is unknown"
    );
    assert!(!md.contains("## Calibration"), "no empty calibration table");
    // A histogram that is not one is named.
    p.histograms
        .insert("cold_push.put-chunk".into(), "bm90IGEgaGlzdG9ncmFt".into());
    let e = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Html,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("histogram cold_push.put-chunk: not an HdrHistogram"),
        "{e}"
    );
}

/// A percentile curve is labelled "not the median sample" only when it is not the sample the
/// recording rule picks: with an even sample count the median lies between the middle two
/// samples, and the curve of either is the median sample's.
#[test]
fn a_curve_is_flagged_only_when_it_is_not_the_median_sample() {
    let (mut b, mut p) = small();
    let key = "cold_push.put-chunk";
    // The fixture's curves are its median samples' (as a recording's are): none is flagged.
    assert!(
        !render(
            &Document::Recording {
                baseline: &b,
                provenance: &p,
            },
            Format::Html,
        )
        .unwrap()
        .contains("not the median sample")
    );
    let h = reports::charts::decode_histogram(key, &p.histograms[key]).unwrap();
    let x = h.value_at_quantile(0.5) as f64;
    let p50_key = format!("{key}.p50_us");
    let flagged = |b: &reports::schema::Baseline, p: &reports::schema::Provenance| {
        render(
            &Document::Recording {
                baseline: b,
                provenance: p,
            },
            Format::Html,
        )
        .unwrap()
        .contains(&format!("{key} (not the median sample)"))
    };
    let mut set = |raw: Vec<f64>, median: f64| {
        b.samples = raw.len() as u32;
        p.raw.insert(p50_key.clone(), raw);
        b.metrics.insert(
            p50_key.clone(),
            reports::schema::Metric::new(
                median,
                "us",
                reports::schema::MetricClass::Timing,
                reports::schema::Better::Lower,
            ),
        );
        (b.clone(), p.clone())
    };
    // Five samples, this curve's p50 is the median: no flag.
    let (b5, p5) = set(vec![x - 10.0, x + 20.0, x, x + 30.0, x - 5.0], x);
    assert!(!flagged(&b5, &p5));
    // Four samples: the median is between this curve's p50 and the next; still the median sample.
    let (b4, p4) = set(vec![x - 10.0, x, x + 20.0, x + 30.0], x + 10.0);
    assert!(
        !flagged(&b4, &p4),
        "a middle sample of an even count is the median sample"
    );
    // Its p50 is no middle sample's: the legend says so.
    let (bo, po) = set(vec![x + 100.0, x + 110.0, x + 120.0, x + 130.0], x + 115.0);
    assert!(flagged(&bo, &po));
}

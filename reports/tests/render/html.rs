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
    // For looking at by eye (headless Chromium): VAULTBENCH_WRITE_HTML=/tmp/r.html.
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

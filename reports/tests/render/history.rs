//! The baselines history: trends per key with each version's noise band.

use reports::render::{Document, Format, HistoryPoint, charts, history_report, render};

use crate::fixtures::small;

pub fn versions() -> Vec<HistoryPoint> {
    (0..3)
        .map(|i| {
            let (mut b, mut p) = small();
            // Each version 10 % slower on cold push, and one more journal fsync per version.
            let f = 1.0 + 0.1 * f64::from(i);
            for x in p.raw.get_mut("cold_push.wall_ms").unwrap() {
                *x *= f;
            }
            b.metrics.get_mut("cold_push.wall_ms").unwrap().value *= f;
            b.metrics
                .get_mut("cold_push.server.fsyncs.journal")
                .unwrap()
                .value += f64::from(i);
            HistoryPoint {
                label: format!("v{i}"),
                commit: Some(format!("{i:040}")),
                date: Some(format!("2026-11-2{i}")),
                baseline: b,
                provenance: Some(p),
            }
        })
        .collect()
}

#[test]
fn trends_carry_values_bands_and_change() {
    let r = history_report(&versions()).unwrap();
    assert_eq!(r.scenarios.len(), 1);
    let h = &r.scenarios[0];
    assert_eq!(h.points.len(), 3);
    let wall = h
        .keys
        .iter()
        .find(|k| k.key == "cold_push.wall_ms")
        .unwrap();
    let v = wall
        .values
        .iter()
        .map(|v| v.as_ref().unwrap())
        .collect::<Vec<_>>();
    assert!(
        v[0].low < v[0].value && v[0].value < v[0].high,
        "a noise band from the raw series"
    );
    assert!((wall.change.unwrap() - 0.2).abs() < 1e-9);
}

#[test]
fn history_renders_with_trend_charts_for_headline_keys() {
    let pts = versions();
    let doc = Document::History {
        points: &pts,
        source: "git history of baselines/",
    };
    let cs = charts(&doc).unwrap();
    // One history per scenario and machine class: the slugs name both.
    let class = contract::class::of_machine(&pts[0].provenance.as_ref().unwrap().machine).unwrap();
    let prefix = format!("trend-small-on-{class}-");
    let slugs: Vec<&str> = cs.iter().map(|c| c.slug.as_str()).collect();
    assert!(
        slugs.contains(&format!("{prefix}cold-push-wall-ms").as_str()),
        "{slugs:?}"
    );
    assert!(
        slugs.contains(&format!("{prefix}cold-push-server-fsyncs-journal").as_str()),
        "a changed exact key gets a chart: {slugs:?}"
    );
    let html = render(&doc, Format::Html).unwrap();
    assert!(
        html.contains("<svg")
            && html.contains("git history of baselines/")
            && !html.contains("http")
    );
    let md = render(&doc, Format::Md).unwrap();
    assert!(md.contains("| cold_push.wall_ms | ms |"), "{md}");
    assert!(md.contains("+20.0%"));
}

#[test]
fn one_version_is_not_a_history() {
    let pts = &versions()[..1];
    let e = render(
        &Document::History {
            points: pts,
            source: "x",
        },
        Format::Md,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "baselines history: only one version of small so far: a trend needs two (report the baseline itself instead)"
    );
    let e = render(
        &Document::History {
            points: &[],
            source: "x",
        },
        Format::Md,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "baselines history: no versions of any baseline");
}

/// A version recorded on a machine whose fsync path was ×2.4 slower than the newest version's
/// is marked: named with the channel's ratio in the model and the Markdown, ringed in its
/// timing charts; the versions on the newest's machine are not.
#[test]
fn versions_whose_calibration_differs_from_the_newest_are_marked() {
    let mut pts = versions();
    for s in &mut pts[0].provenance.as_mut().unwrap().samples {
        for r in &mut s.calibration {
            r.io_ms *= 2.4;
        }
    }
    let r = history_report(&pts).unwrap();
    let h = &r.scenarios[0];
    assert_eq!(h.points[0].machine_differs, ["io_ms ×2.40"]);
    assert!(h.points[1].machine_differs.is_empty());
    assert!(h.points[2].machine_differs.is_empty());
    let note = h.machine_note().unwrap();
    assert!(note.contains("v0 (io_ms ×2.40)"), "{note}");
    let doc = Document::History {
        points: &pts,
        source: "git history of baselines/",
    };
    let md = render(&doc, Format::Md).unwrap();
    assert!(md.contains("v0 (io_ms ×2.40)"), "{md}");
    let html = render(&doc, Format::Html).unwrap();
    assert!(html.contains("ringed in the charts"), "the note");
    // Without a difference there is no note.
    assert_eq!(
        history_report(&versions()).unwrap().scenarios[0].machine_note(),
        None
    );
}

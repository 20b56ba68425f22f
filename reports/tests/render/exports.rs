//! The exports validate against their formats' documented shapes: BMF's JSON schema
//! (bencher.dev/bmf.json: object of objects of `{value, lower_value?, upper_value?}` numbers)
//! and github-action-benchmark's customSmallerIsBetter (array of `{name, unit, value, range?,
//! extra?}`, strings and a number).

use reports::render::{Document, Format, render};
use serde_json::Value;

use crate::fixtures::small;

#[test]
fn bmf_matches_the_bencher_schema() {
    let (b, p) = small();
    let text = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Bmf,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let benchmarks = v.as_object().expect("BMF is an object of benchmarks");
    assert_eq!(benchmarks.len(), b.metrics.len(), "one benchmark per key");
    for (name, measures) in benchmarks {
        assert!(
            !name.is_empty() && name.len() <= 1024,
            "benchmark name length"
        );
        let measures = measures
            .as_object()
            .expect("a benchmark is an object of measures");
        assert!(!measures.is_empty());
        for (slug, metric) in measures {
            assert!(
                slug.len() <= 64 && slug.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "measure slug {slug:?}"
            );
            let m = metric.as_object().unwrap();
            assert!(m["value"].is_number(), "value is required and a number");
            for k in m.keys() {
                assert!(
                    ["value", "lower_value", "upper_value"].contains(&k.as_str()),
                    "unexpected field {k}"
                );
                assert!(m[k].is_number());
            }
            if let (Some(lo), Some(hi)) = (m.get("lower_value"), m.get("upper_value")) {
                let (lo, hi, val) = (
                    lo.as_f64().unwrap(),
                    hi.as_f64().unwrap(),
                    m["value"].as_f64().unwrap(),
                );
                assert!(lo <= val && val <= hi, "{name}: {lo} <= {val} <= {hi}");
            }
        }
    }
    let wall = &v["small/cold_push.wall_ms"]["milliseconds"];
    assert_eq!(
        wall["value"].as_f64().unwrap(),
        b.metrics["cold_push.wall_ms"].value
    );
}

#[test]
fn gab_is_a_smaller_is_better_array() {
    let (b, p) = small();
    let text = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Gab,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let entries = v.as_array().expect("customSmallerIsBetter is an array");
    let higher = b
        .metrics
        .values()
        .filter(|m| m.better == reports::schema::Better::Higher)
        .count();
    assert!(higher > 0, "the fixture has throughput keys");
    assert_eq!(
        entries.len(),
        b.metrics.len() - higher,
        "higher-is-better keys are left out"
    );
    for e in entries {
        let o = e.as_object().unwrap();
        assert!(o["name"].is_string() && o["unit"].is_string() && o["value"].is_number());
        for k in o.keys() {
            assert!(
                ["name", "unit", "value", "range", "extra"].contains(&k.as_str()),
                "unexpected field {k}"
            );
        }
        if let Some(r) = o.get("range") {
            assert!(r.as_str().unwrap().starts_with("± "));
        }
        assert!(
            !o["name"].as_str().unwrap().contains("files_per_s"),
            "throughput is higher-is-better"
        );
    }
}

#[test]
fn exports_refuse_documents_that_are_not_recordings() {
    let v = crate::fixtures::ab();
    let err = render(&Document::Ab(&v), Format::Bmf)
        .unwrap_err()
        .to_string();
    assert_eq!(err, "--format bmf exports a recording, not an a/b result");
}

/// BMF has no direction field: Bencher reads a direction from the threshold set on a measure,
/// so no measure may mix lower- and higher-is-better keys. A pass/fail key is higher-is-better
/// in BMF and left out of the smaller-is-better gab series, so corruption never reads as an
/// improvement.
#[test]
fn each_bmf_measure_has_one_direction_and_pass_fail_keys_are_higher_is_better() {
    let (b, p) = small();
    let mut directions: std::collections::BTreeMap<String, reports::schema::Better> =
        std::collections::BTreeMap::new();
    for m in b.metrics.values() {
        let slug = reports::export::measure_slug(&m.unit);
        let d = *directions.entry(slug.clone()).or_insert(m.better);
        assert_eq!(d, m.better, "measure {slug} mixes directions");
    }
    assert_eq!(
        directions.get("checks-passed"),
        Some(&reports::schema::Better::Higher)
    );
    let doc = Document::Recording {
        baseline: &b,
        provenance: &p,
    };
    let bmf: Value = serde_json::from_str(&render(&doc, Format::Bmf).unwrap()).unwrap();
    assert_eq!(
        bmf["small/cold_pull.byte_identical"]["checks-passed"]["value"],
        1.0
    );
    let gab = reports::export::gab(&b, Some(&p));
    assert!(
        gab.omitted.contains(&"cold_pull.byte_identical".to_owned()),
        "a pass/fail key is not smaller-is-better"
    );
    assert!(
        gab.entries
            .iter()
            .any(|e| e.name == "small/route.changes.c1.errors" && e.unit == "count"),
        "an error count stays in the smaller-is-better series"
    );
    assert_eq!(
        b.metrics["route.changes.c1.errors"].class,
        reports::schema::MetricClass::Exact
    );
}

//! insta snapshots of the recording report in Markdown and JSON. The recording timestamp is
//! redacted; every other figure comes from the seeded fixture, so a change in a snapshot is a
//! change in what the report says. CI runs with CI=true: a missing snapshot fails.

use reports::render::{Document, Format, recording_report, render};

use crate::fixtures::{RECORDED_AT, small};

#[test]
fn markdown_recording_report() {
    let (b, p) = small();
    let md = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Md,
    )
    .unwrap();
    insta::assert_snapshot!("recording_md", md.replace(RECORDED_AT, "[timestamp]"));
}

#[test]
fn json_recording_report() {
    let (b, p) = small();
    let r = recording_report(&b, &p);
    insta::assert_json_snapshot!("recording_json", r, {
        ".recorded_at" => "[timestamp]",
        // Durations: what a re-recording changes. Their formatting is pinned by the Markdown
        // snapshot; the JSON snapshot pins structure, exact counts and the generated claims.
        ".phases[].wall_ms" => "[duration]",
        ".phases[].p50_ms" => "[duration]",
        ".phases[].p95_ms" => "[duration]",
        ".phase_routes[].p50_us" => "[duration]",
        ".phase_routes[].p95_us" => "[duration]",
        ".phase_routes[].p99_us" => "[duration]",
        ".route_load[].p50_us" => "[duration]",
        ".route_load[].p99_us" => "[duration]",
    });
    // The rendered JSON is the same model.
    let text = render(
        &Document::Recording {
            baseline: &b,
            provenance: &p,
        },
        Format::Json,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "vaultbench.report");
    assert_eq!(v["report"], "recording");
}

#[test]
fn the_report_carries_every_required_part() {
    let (b, p) = small();
    let r = recording_report(&b, &p);
    // Per-phase table with fsyncs per note, per-route table with p50/p95/p99, route load.
    let push = r.phases.iter().find(|x| x.phase == "cold_push").unwrap();
    assert_eq!(push.fsyncs_per_file.as_ref().unwrap().value, 8.41);
    assert_eq!(push.fsyncs, Some(180.0 + 180.0 + 100.0 + 381.0));
    let order: Vec<&str> = r.phases.iter().map(|x| x.phase.as_str()).collect();
    assert_eq!(
        order,
        [
            "cold_start",
            "cold_push",
            "cold_pull",
            "idle_resync",
            "edit",
            "folder_rename"
        ]
    );
    let put = r
        .phase_routes
        .iter()
        .find(|x| x.phase == "cold_push" && x.route == "put-chunk")
        .unwrap();
    assert!(put.p50_us.is_some() && put.p95_us.is_some() && put.p99_us.is_some());
    assert_eq!(put.requests.as_ref().unwrap().value, 180.0);
    assert_eq!(r.route_load.len(), 10);
    // Calibration shares come from the gate's verdict; the io share equals cv / bound.
    let io = r
        .calibration
        .channels
        .iter()
        .find(|c| c.channel == "io_ms")
        .unwrap();
    assert!((io.cv_share.unwrap() - io.cv.unwrap() / 0.45).abs() < 1e-12);
    // The generated section names the machine, the scale, the sample count and the refusal.
    let claims = r.not_claims.join("\n");
    for needle in [
        "AMD EPYC 7B13",
        "2 logical CPUs",
        "100 files",
        "median of 5",
        "1 refused",
        "2 attempts",
    ] {
        assert!(claims.contains(needle), "missing {needle:?} in {claims}");
    }
}

#[test]
fn a_loosened_gate_and_unsteady_exact_keys_are_called_out() {
    let (b, mut p) = small();
    let r = recording_report(&b, &p);
    assert!(
        !r.not_claims
            .iter()
            .any(|c| c.contains("loosened") || c.contains("deterministic"))
    );
    let verdict = p.gate.as_mut().and_then(|g| g.verdict.as_mut()).unwrap();
    verdict.channels.get_mut("io_ms").unwrap().bounds.max_cv = 5.0;
    p.raw.insert(
        "cold_push.requests".into(),
        vec![380.0, 381.0, 381.0, 382.0, 381.0],
    );
    let r = recording_report(&b, &p);
    let claims = r.not_claims.join("\n");
    assert!(claims.contains("io_ms cv 5 (default 0.7000)"), "{claims}");
    assert!(
        claims.contains("1 exact-class key varied across samples (e.g. cold_push.requests)"),
        "{claims}"
    );
}

//! tus imports, recorded (slow: a real `@tus/server` from `tools/tus`, installed by `npm ci
//! --prefix tools/tus`, so `#[ignore]`d): `record import-tus-small` against the `tus-node`
//! preset imports every note in one round trip, reads every upload back byte-identical, and
//! its `tus_resume` phase cuts 20 uploads part-way through the seeded hop; every one resumes
//! and reads back byte-identical, and exactly the bytes the cuts withheld are sent again.
//! `verify` accepts the recording.

use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

fn value(b: &Value, k: &str) -> f64 {
    b["metrics"][k]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{k} missing: {}", b["metrics"]))
}

#[test]
#[ignore = "slow: real servers"]
fn import_tus_small_reads_back_and_resumes_twenty_cut_uploads() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    record_loose(
        home.path(),
        &["import-tus-small", "--target", "tus-node", "--samples", "1"],
    )
    .arg("--out")
    .arg(&out)
    .arg("--work-dir")
    .arg(home.path().join("work"))
    .timeout(std::time::Duration::from_secs(900))
    .assert()
    .success();
    let file = out.join("import-tus-small.json");
    vb!(home.path()).arg("verify").arg(&file).assert().success();
    let b: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // @tus/server offers creation-with-upload: one POST per note.
    assert_eq!(value(&b, "cold_push.round_trips_per_note"), 1.0);
    assert_eq!(value(&b, "cold_pull.byte_identical"), 1.0);
    assert_eq!(value(&b, "cold_push.resumes"), 0.0);
    // The cut uploads: POST without a body, the cut PATCH, HEAD, the resuming PATCH.
    assert_eq!(value(&b, "tus.resumed_byte_identical"), 1.0);
    assert_eq!(value(&b, "tus.cut_uploads"), 20.0);
    assert_eq!(value(&b, "tus.resumed_uploads"), 20.0);
    assert_eq!(value(&b, "tus.resumes"), 20.0);
    assert_eq!(value(&b, "tus.round_trips_per_note"), 4.0);
    assert_eq!(value(&b, "tus.answers_460"), 0.0);
    let (withheld, resent) = (
        value(&b, "tus.bytes_withheld"),
        value(&b, "tus.resent_bytes"),
    );
    assert!(withheld > 0.0 && resent >= withheld, "{withheld} {resent}");
    assert!(value(&b, "tus.wall_ms") > 0.0);
}

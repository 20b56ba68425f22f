//! S3 as Remotely Save uses it, against real servers (slow, so `#[ignore]`d; `.ci/run`
//! installs moto with `bash tools/moto/install.sh` and s3rver with `npm ci --prefix
//! tools/s3rver`): `record small-s3` against both presets, byte-identical and verified, and
//! against an S3 server typed as a command line with its own credentials; an access key the
//! server does not know fails the sample in one line.

use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

/// Records `small-s3` (one sample, loose gate) with `args`; returns the recording's metrics
/// after `verify` accepted it.
fn record_small_s3(args: &[&str]) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    let mut all = vec!["small-s3", "--samples", "1"];
    all.extend(args);
    record_loose(home.path(), &all)
        .arg("--out-dir")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success();
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let b: Value =
        serde_json::from_slice(&std::fs::read(out.join("small-s3.json")).unwrap()).unwrap();
    b["metrics"].clone()
}

fn value(m: &Value, what: &str, k: &str) -> f64 {
    m[k]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {k} missing"))
}

#[test]
#[ignore = "slow: real servers"]
fn small_s3_records_byte_identical_against_both_presets() {
    for preset in ["moto-s3", "s3rver"] {
        let m = record_small_s3(&["--target", preset]);
        let v = |k: &str| value(&m, preset, k);
        assert_eq!(v("cold_pull.byte_identical"), 1.0, "{preset}");
        assert_eq!(v("cold_push.files"), 100.0, "{preset}");
        // The plugin heads every object it writes; the pull lists once, then gets each.
        assert_eq!(v("cold_push.requests.put-object"), 100.0, "{preset}");
        assert_eq!(v("cold_push.requests.head-object"), 100.0, "{preset}");
        assert_eq!(v("cold_pull.requests.get-object"), 100.0, "{preset}");
        assert_eq!(v("idle_resync.mismatched"), 0.0, "{preset}");
        assert_eq!(v("idle_resync.requests"), 1.0, "{preset}");
        assert_eq!(v("edit.poll_interval_ms"), 100.0, "{preset}");
        assert!(v("folder_rename.objects_moved") > 0.0, "{preset}");
        for key in [
            "route.put-object.c1.p50_us",
            "route.get-object.c4.p50_us",
            "route.head-object.c1.p50_us",
            "route.list-objects.c4.p50_us",
            "cold_push.server.cpu_ms",
            "edit.p50_ms",
        ] {
            assert!(v(key) > 0.0, "{preset}: {key}");
        }
    }
}

#[test]
#[ignore = "slow: real servers"]
fn an_s3_server_typed_as_a_command_line_records_byte_identical() {
    // s3rver is no preset here: a command line, its protocol, its key pair and a readiness
    // check, as a user would type them for any S3 server.
    let m = record_small_s3(&[
        "--protocol",
        "s3",
        "--auth",
        "S3RVER:S3RVER",
        "--ready",
        "GET / any",
        "--target",
        "s3rver --directory {data} --address {host} --port {port} --silent",
    ]);
    assert_eq!(value(&m, "command line", "cold_pull.byte_identical"), 1.0);
    assert_eq!(value(&m, "command line", "cold_push.errors"), 0.0);
}

#[test]
#[ignore = "slow: real servers"]
fn an_unknown_access_key_fails_the_sample_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let res = record_loose(
        home.path(),
        &[
            "small-s3",
            "--samples",
            "1",
            "--retries",
            "0",
            "--target",
            "s3rver",
            "--auth",
            "NOT-S3RVER:S3RVER",
        ],
    )
    .arg("--out-dir")
    .arg(home.path().join("out"))
    .arg("--work-dir")
    .arg(home.path().join("work"))
    .timeout(std::time::Duration::from_secs(300))
    .assert()
    .get_output()
    .clone();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(3), "{err}");
    assert!(err.contains("403"), "{err}");
    assert!(err.contains("Access Key Id"), "{err}");
}

//! Per-phase server cost end to end: `/proc` cost keys in every timing sample, and `record
//! --cost`'s cost sample, whose syscall counts by name must match the reference server's own
//! `/metrics` fsync counters of the same run exactly.

use serde_json::Value;

use crate::common::{loose_files, record_loose, vb};

/// A push of `small`, then 300 version posts at 1 in flight (fixed work).
const PUSH_AND_POSTS: &str = "name = \"push-posts\"\ndoc = \"test\"\nprofile = \"small\"\nsamples = 1\n\
    [[phase]]\nkind = \"cold_start\"\n[[phase]]\nkind = \"cold_push\"\n\
    [[phase]]\nkind = \"route_load\"\nroutes = [\"post-version\"]\nin_flight = [1]\nrequests = 300\n";

#[test]
#[ignore = "slow: a real recording with a cost sample under valgrind and strace"]
fn cost_sample_syscalls_match_the_servers_own_fsync_counters() {
    let home = tempfile::tempdir().unwrap();
    let (_, scen) = loose_files(home.path());
    std::fs::write(&scen, PUSH_AND_POSTS).unwrap();
    let out = home.path().join("out");
    record_loose(home.path(), &["--cost", "--samples", "1"])
        .arg("--scenario-file")
        .arg(&scen)
        .arg("--out")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success();
    let base: Value =
        serde_json::from_slice(&std::fs::read(out.join("push-posts.json")).unwrap()).unwrap();
    let side: Value =
        serde_json::from_slice(&std::fs::read(out.join("push-posts.provenance.json")).unwrap())
            .unwrap();
    let m = &base["metrics"];
    let cost = &side["cost"];
    assert!(
        cost["instructions_source"]
            .as_str()
            .unwrap()
            .starts_with("valgrind-callgrind "),
        "{cost}"
    );
    assert!(
        cost["syscalls_source"]
            .as_str()
            .unwrap()
            .starts_with("strace ")
    );

    // The strace run's syscalls by name against the same run's /metrics, per phase.
    let c = &cost["metrics"];
    let v = |k: &str| c[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {c}"));
    let metrics_fsyncs: f64 = c
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("cold_push.server.fsyncs."))
        .map(|(_, x)| x.as_f64().unwrap())
        .sum();
    assert!(metrics_fsyncs > 0.0, "{c}");
    // The data fsyncs (chunk file and chunk directory: `fsync`) are exact.
    assert_eq!(
        v("cold_push.server.syscalls.fsync"),
        v("cold_push.server.fsyncs.chunk_file") + v("cold_push.server.fsyncs.chunk_dir"),
        "{c}"
    );
    // The journal and nonce log use `fdatasync`. The uploader's own long poll is re-armed with
    // a signed request (one nonce-log flush) whenever it is answered, so one such flush can
    // straddle the phase boundary: the strace split by time and the /metrics scrape then
    // disagree by that one flush, never more.
    let logs = v("cold_push.server.fsyncs.journal") + v("cold_push.server.fsyncs.nonce_log");
    let traced = v("cold_push.server.syscalls.fdatasync");
    assert!(
        (traced - logs).abs() <= 1.0,
        "fdatasync {traced} vs /metrics {logs}: {c}"
    );
    // The push made one chunk directory per new directory and renamed each chunk into place.
    assert!(v("cold_push.server.syscalls.rename") > 0.0, "{c}");

    // Cost keys in the baseline, with their classes.
    for (key, class) in [
        ("cold_push.server.instructions", "cost"),
        ("cold_push.server.instructions_per_file", "cost"),
        (
            "route.post-version.c1.server.instructions_per_request",
            "cost",
        ),
        ("cold_push.server.syscalls.fdatasync", "exact"),
        ("cold_push.server.cpu_us_per_file", "resource"),
        ("cold_push.server.write_bytes_per_file", "resource"),
        (
            "route.post-version.c1.server.cpu_us_per_request",
            "resource",
        ),
        ("route.post-version.c1.requests", "exact"),
    ] {
        assert_eq!(m[key]["class"], class, "{key}: {}", m[key]);
    }
    assert_eq!(m["route.post-version.c1.requests"]["value"], 300.0);
    assert!(
        m.get("route.post-version.c1.rps").is_none(),
        "fixed work has no throughput"
    );
    let ipr = m["route.post-version.c1.server.instructions_per_request"]["value"]
        .as_f64()
        .unwrap();
    // The study measured about 167,000 instructions per signed post; a factor-of-three band
    // catches a part attributed to the wrong phase without tying the test to a build.
    assert!((50_000.0..500_000.0).contains(&ipr), "{ipr}");
    vb(home.path()).arg("verify").arg(&out).assert().success();
}

#[test]
fn cost_without_the_tools_names_the_packages() {
    let home = tempfile::tempdir().unwrap();
    let (_, scen) = loose_files(home.path());
    // A PATH without valgrind or strace (the test binary itself is found by path).
    let out = record_loose(home.path(), &["--cost"])
        .env("PATH", home.path())
        .arg("--scenario-file")
        .arg(&scen)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    // The identity line comes first (printed before any sample); then the one-line error.
    let err: Vec<&str> = err.lines().filter(|l| !l.starts_with("target: ")).collect();
    assert_eq!(err.len(), 1, "{err:?}");
    let err = err[0];
    assert!(err.contains("valgrind") && err.contains("strace"), "{err}");
    assert!(err.contains("apt-get install"), "{err}");
}

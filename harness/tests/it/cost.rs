//! Per-phase server cost end to end: `/proc` cost keys in every timing sample, and `record
//! --cost`'s cost sample, whose syscall counts by name must match the reference server's own
//! `/metrics` fsync counters of the same run exactly.

use serde_json::Value;
use testkit::vb;

use crate::common::{loose_files, record_loose};

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
    let kept = home.path().join("profiles");
    record_loose(home.path(), &["--cost", "--samples", "1"])
        .arg("--keep-profiles")
        .arg(&kept)
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
    vb!(home.path()).arg("verify").arg(&out).assert().success();

    // Where the time goes. The reference server flushes every chunk, journal frame and nonce
    // record before it answers: fsync + fdatasync are the largest share of cold_push's
    // blocked time.
    let blocked = &cost["blocked"]["cold_push"];
    let calls = blocked["syscalls"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocked time: {cost}"));
    let time = |n: &str| {
        calls
            .iter()
            .filter(|c| c["name"] == n)
            .map(|c| c["time_us"].as_f64().unwrap())
            .sum::<f64>()
    };
    let flush = time("fsync") + time("fdatasync");
    let other = calls
        .iter()
        .filter(|c| c["name"] != "fsync" && c["name"] != "fdatasync")
        .map(|c| c["time_us"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        flush > other,
        "flush {flush} µs vs the largest other {other} µs: {blocked}"
    );
    assert!(blocked["wall_ms"].as_f64().unwrap() > 0.0);
    assert!(
        blocked["threads"].as_array().is_some_and(|t| !t.is_empty()),
        "{blocked}"
    );
    // The top functions per phase, demangled, with a flame graph's stacks.
    let post = &cost["functions"]["route.post-version.c1"];
    let fns = post["functions"].as_array().unwrap();
    assert!(fns.len() >= 10, "{post}");
    assert_eq!(post["work"], 300);
    assert!(
        fns.iter()
            .any(|f| f["name"].as_str().unwrap().starts_with("sha2::")),
        "the signature's hashing leads a post's self instructions: {post}"
    );
    assert!(
        post["stacks"].as_array().is_some_and(|s| s
            .iter()
            .any(|s| s["frames"].as_str().unwrap().contains(";refserver::api::"))),
        "{post}"
    );
    assert!(
        fns.iter().all(|f| {
            let n = f["name"].as_str().unwrap();
            // No mangled name, and no legacy Rust hash segment (`::h0123456789abcdef`).
            !n.starts_with("_ZN")
                && !n.starts_with("_R")
                && !n.split("::").any(|seg| {
                    seg.len() == 17
                        && seg.starts_with('h')
                        && seg[1..].chars().all(|c| c.is_ascii_hexdigit())
                })
        }),
        "{post}"
    );
    assert!(post["stacks"].as_array().is_some_and(|s| !s.is_empty()));
    // The raw profiles, kept when asked.
    let dirs: Vec<_> = std::fs::read_dir(&kept).unwrap().collect();
    assert_eq!(dirs.len(), 1, "one cost sample");
    let dir = dirs.into_iter().next().unwrap().unwrap().path();
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.iter().any(|f| f.starts_with("callgrind.out.")),
        "{files:?}"
    );
    assert!(files.contains(&"strace.log".to_owned()), "{files:?}");
    // The reports show them.
    let md = vb!(home.path())
        .args(["report", "--format", "md"])
        .arg(out.join("push-posts.json"))
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("## Top functions per phase"), "{md}");
    assert!(md.contains("## Blocked time per syscall"), "{md}");
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

/// A checkpointed push of `small` at one file in flight, a checkpoint every 10 files.
const CHECKPOINTED: &str = "name = \"cp-push\"\ndoc = \"test\"\nprofile = \"small\"\nsamples = 1\n\
    [[phase]]\nkind = \"cold_start\"\n[[phase]]\nkind = \"cold_push\"\nin_flight = 1\ncheckpoint_every = 10\n";

#[test]
#[ignore = "slow: a real recording with a cost sample under valgrind and strace"]
fn a_cost_sample_reads_instructions_and_syscalls_per_checkpoint_window() {
    let home = tempfile::tempdir().unwrap();
    let (_, scen) = loose_files(home.path());
    std::fs::write(&scen, CHECKPOINTED).unwrap();
    let out = home.path().join("out");
    // Every version post re-reads every stored version: the server's work per file grows
    // with the files already pushed.
    let res = record_loose(
        home.path(),
        &[
            "--cost",
            "--samples",
            "1",
            "--target",
            "ref --inject-reindex",
        ],
    )
    .arg("--scenario-file")
    .arg(&scen)
    .arg("--out-dir")
    .arg(&out)
    .timeout(std::time::Duration::from_secs(1200))
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{err}");
    let side: Value =
        serde_json::from_slice(&std::fs::read(out.join("cp-push.provenance.json")).unwrap())
            .unwrap();
    let c = side["cost"]["metrics"].as_object().unwrap();
    let series = |stat: &str| -> Vec<(u64, f64)> {
        let mut v: Vec<(u64, f64)> = c
            .iter()
            .filter_map(|(k, x)| {
                let rest = k.strip_prefix("cold_push.checkpoint.")?;
                let (files, s) = rest.split_once('.')?;
                (s == stat).then(|| (files.parse().unwrap(), x.as_f64().unwrap()))
            })
            .collect();
        v.sort_by_key(|p| p.0);
        v
    };
    let ins = series("server_instructions_per_file");
    let sys = series("server_syscalls_per_file");
    assert!(ins.len() >= 5, "{ins:?}\n{err}");
    assert_eq!(
        ins.iter().map(|p| p.0).collect::<Vec<_>>(),
        sys.iter().map(|p| p.0).collect::<Vec<_>>()
    );
    assert!(ins.iter().all(|p| p.1 > 0.0), "{ins:?}");
    // The re-reads open every stored version: the last window's traced calls per file are
    // several times the first's, and both series are fitted as growing.
    let (first, last) = (sys[0].1, sys[sys.len() - 1].1);
    assert!(last > 3.0 * first, "{sys:?}");
    assert!(ins[ins.len() - 1].1 > ins[0].1, "{ins:?}");
    let e = |s: &str| {
        c[&format!("cold_push.growth.{s}.import_exponent")]
            .as_f64()
            .unwrap_or_else(|| panic!("no {s} exponent: {err}"))
    };
    // Per file: the re-reads grow as n plus a constant part (the post's own fsyncs and
    // writes), so over 10 to 110 files the whole import's exponent lies between 1 and 2.
    assert!(e("server_syscalls") > 1.2, "{}", e("server_syscalls"));
    assert!(
        e("server_instructions") > 1.1,
        "{}",
        e("server_instructions")
    );
    for series in ["server instructions", "server syscalls (traced)"] {
        assert!(
            err.contains(&format!("growth: cold_push: {series} per file grows as")),
            "{err}"
        );
    }
}

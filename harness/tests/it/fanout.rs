//! The long-polling scenario steps end to end: `record fanout-small` against the reference
//! server (fan-out, RSS and CPU per 1,000 held devices, journal flushes per post at D = 1, 4
//! and 16), and a server whose open-file limit caps its connections below the waiting devices
//! (refusals counted as refusals, the recording accepted).

use serde_json::Value;
use testkit::vb;

fn metrics(path: &std::path::Path) -> Value {
    let b: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    b["metrics"].clone()
}

fn value(m: &Value, key: &str) -> f64 {
    m[key]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {m}"))
}

#[test]
#[ignore = "slow: records fanout-small against the reference server (fresh subprocesses)"]
fn record_measures_the_fan_out_and_several_devices_pushing_at_once() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    crate::common::record_loose(home.path(), &["fanout-small", "--samples", "1"])
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let m = metrics(&out.join("fanout-small.json"));
    assert_eq!(value(&m, "fanout.waiters"), 200.0);
    assert_eq!(value(&m, "fanout.held"), 200.0);
    assert_eq!(value(&m, "fanout.refused"), 0.0);
    assert_eq!(value(&m, "fanout.posts"), 10.0);
    assert_eq!(value(&m, "fanout.deliveries"), 2000.0);
    let (p50, p99) = (
        value(&m, "fanout.fanout_p50_ms"),
        value(&m, "fanout.fanout_p99_ms"),
    );
    assert!(p50 > 0.0 && p99 >= p50 && p99 < 30_000.0, "{p50} {p99}");
    for key in [
        "fanout.server.rss_kib_per_1000_held",
        "fanout.server.cpu_pct_per_1000_held",
        "fanout.generator.rss_kib_per_1000_held",
        "fanout.server.cpu_ms",
    ] {
        assert!(value(&m, key) >= 0.0, "{key}");
        assert_eq!(m[key]["class"], "resource", "{key}");
    }
    // Holding 200 polls costs the server memory: more than nothing, less than 1 MiB each.
    let rss = value(&m, "fanout.server.rss_kib_per_1000_held");
    assert!(rss > 0.0 && rss < 1_000_000.0, "{rss}");
    // The reference server without group commit flushes its journal once per post at every
    // level: an exact key.
    for d in [1, 4, 16] {
        let k = format!("push_d{d}.server.journal_flushes_per_post");
        assert_eq!(value(&m, &k), 1.0, "{k}");
        assert_eq!(m[&k]["class"], "exact", "{k}");
        assert_eq!(value(&m, &format!("push_d{d}.posts")), 48.0);
        assert_eq!(value(&m, &format!("push_d{d}.pushers")), d as f64);
        assert_eq!(value(&m, &format!("push_d{d}.deliveries")), 48.0 * 20.0);
        assert!(value(&m, &format!("push_d{d}.posts_per_s")) > 0.0);
    }
}

#[test]
#[ignore = "slow: records against a reference server whose open-file limit caps its connections"]
fn waiters_over_the_servers_connection_cap_are_refusals_not_errors() {
    let home = tempfile::tempdir().unwrap();
    let scenario = home.path().join("capped.toml");
    std::fs::write(
        &scenario,
        "name = \"capped\"\ndoc = \"test\"\nprofile = \"small\"\ndevices = 2\n\
         [[phase]]\nkind = \"long_poll_fanout\"\nwaiters = 60\npushers = 1\nposts = 2\n\
         interval_ms = 100\nwait_s = 5\nsettle_ms = 500\n",
    )
    .unwrap();
    // (100 - 64 reserved) / 2 descriptors a connection: the server admits 18 at once.
    let exe = env!("CARGO_BIN_EXE_vaultbench");
    let target =
        format!("prlimit --nofile=100 -- {exe} serve-ref --listen {{addr}} --data {{data}}");
    let out = home.path().join("out");
    crate::common::record_loose(home.path(), &["--samples", "1"])
        .arg("--scenario-file")
        .arg(&scenario)
        .args(["--target", &target, "--out"])
        .arg(&out)
        .assert()
        .success();
    let m = metrics(&out.join("capped.json"));
    let (held, refused) = (value(&m, "fanout.held"), value(&m, "fanout.refused"));
    assert_eq!(held + refused, 60.0);
    assert!(refused >= 60.0 - 18.0, "held {held}, refused {refused}");
    assert!(held >= 1.0, "held {held}");
    assert_eq!(value(&m, "fanout.deliveries"), held * 2.0);
}

/// Two `load fanout` shards at once against one server: each counts exactly its own posts at
/// each of its own waiters (their notes never share a path), and nothing is refused.
#[test]
fn fanout_shards_count_only_their_own_posts() {
    let data = tempfile::tempdir().unwrap();
    let srv = refserver::TestServer::start(refserver::ServerConfig::new(data.path())).unwrap();
    let home = tempfile::tempdir().unwrap();
    let token = data.path().join("setup-token");
    let shard = |s: &str| {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"));
        c.env("XDG_STATE_HOME", home.path().join("state-home"))
            .args(["load", "fanout", "--url", &srv.url()])
            .args(["--waiters", "4", "--pushers", "1", "--posts", "3"])
            .args(["--interval", "100ms", "--wait", "5s", "--settle", "1s"])
            .args(["--json", "--shard", s, "--work-dir"])
            .arg(home.path())
            .arg("--state")
            .arg(home.path().join("state.json"))
            .arg("--setup-token-file")
            .arg(&token)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().unwrap()
    };
    let children = [shard("0/2"), shard("1/2")];
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &doc["report"];
        assert_eq!(doc["held"], 4, "{doc}");
        assert_eq!(r["posts"], 3, "{doc}");
        assert_eq!(r["deliveries"], 12, "{doc}");
        assert_eq!(r["expected_deliveries"], 12, "{doc}");
        assert_eq!(r["errors"], serde_json::json!({}), "{doc}");
    }
}

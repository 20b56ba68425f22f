//! Paired client mode (`ab --paired` with the scenario's own client), end to end: rclone as
//! the client of two WebDAV servers up at once in each sample, its runs alternated between the
//! arms phase by phase, every phase the client runs paired, each arm's pull byte-identical,
//! each arm's proxy and server-cost keys kept; and an A/A run of one server against itself.

use std::path::Path;

use serde_json::Value;
use testkit::{procs_with, vb};

use crate::own_client::scenario;

/// rclone's `[client]` flags: a config written into `{state}` by the setup, `rclone sync`
/// each way.
const RCLONE: [&str; 8] = [
    "--client-setup",
    "rclone config create vb webdav url={url} vendor=other user={auth_user} pass={auth_pass} --config {state}/rclone.conf",
    "--client-push",
    "rclone sync {dir} vb: --config {state}/rclone.conf",
    "--client-pull",
    "rclone sync vb: {dir} --config {state}/rclone.conf",
    "--client-timeout",
    "2m",
];

/// The phases rclone runs, as their keys name them.
const PHASES: [&str; 5] = [
    "cold_push",
    "cold_pull",
    "idle_resync",
    "edit",
    "folder_rename",
];

/// Runs `vaultbench ab --paired` (loose gate, `rounds` rounds, no pre-check) with `args` in
/// `home`; the A/B result and the stderr.
fn paired_ab(home: &Path, rounds: u32, args: &[&str]) -> (Value, String) {
    let gate = home.join("gate.toml");
    std::fs::write(&gate, testkit::LOOSE_GATE).unwrap();
    let res = home.join("ab.json");
    let o = vb!(home)
        .args(["ab", "--paired", "--pre-check", "0s", "--rounds"])
        .arg(rounds.to_string())
        .args(args)
        .arg("--gate-config")
        .arg(&gate)
        .arg("--out")
        .arg(&res)
        .arg("--work-dir")
        .arg(home.join("work"))
        .timeout(std::time::Duration::from_secs(1200))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    // 0 or 1: a decision either way; a failed sample or a refusal is not.
    assert!(o.status.code().is_some_and(|c| c <= 1), "{err}");
    assert!(
        procs_with(&home.join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
    (
        serde_json::from_slice(&std::fs::read(&res).unwrap()).unwrap(),
        err,
    )
}

/// What every paired client-mode result of `rounds` rounds must hold: every phase's client
/// wall time paired (one pair a phase and round; `edit.p50_ms` a pair per edit round), a
/// verdict from the paired blocks for each, both arms' proxy counts and server cost analysed,
/// no phase skipped, and every round one sample process holding both servers.
fn assert_paired_client(doc: &Value, rounds: usize, edit_rounds: u64) {
    let p = &doc["paired"];
    let metrics = doc["metrics"].as_object().unwrap();
    assert_eq!(p["skipped_phases"], serde_json::json!([]), "{p}");
    for phase in PHASES {
        for key in [
            format!("{phase}.client.wall_ms"),
            format!("{phase}.server.cpu_ms"),
        ] {
            assert!(metrics.contains_key(&key), "{key}: {:?}", metrics.keys());
        }
        let key = format!("{phase}.client.wall_ms");
        assert_eq!(
            p["keys"][&key]["pairs"],
            serde_json::json!(vec![1; rounds]),
            "{key}: {p}"
        );
        assert_eq!(metrics[&key]["interval_method"], "paired_blocks", "{key}");
        assert!(metrics[&key]["verdict"].is_string(), "{key}");
    }
    for key in [
        "cold_push.wall_ms",
        "cold_pull.wall_ms",
        "idle_resync.wall_ms",
        "folder_rename.wall_ms",
        "folder_rename.propagate_ms",
        "edit.p50_ms",
    ] {
        assert_eq!(metrics[key]["interval_method"], "paired_blocks", "{key}");
        assert!(metrics[key]["verdict"].is_string(), "{key}");
    }
    assert_eq!(
        p["keys"]["edit.p50_ms"]["pairs"],
        serde_json::json!(vec![edit_rounds; rounds]),
        "{p}"
    );
    // The proxy's counts are facts of each arm: rclone sends one PUT a file to either server.
    let same: Vec<&str> = doc["exact_same"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        same.contains(&"cold_push.proxy.PUT_{path}.requests"),
        "{same:?}"
    );
    assert!(same.contains(&"cold_pull.byte_identical"), "{same:?}");
    for r in doc["rounds"].as_array().unwrap() {
        assert_eq!(r["a"]["pid"], r["b"]["pid"], "one sample process a round");
        assert_ne!(r["a"]["server_pid"], r["b"]["server_pid"], "two servers");
    }
}

/// rclone against Apache (A) and nginx (B) on `small-webdav`: the route loads are left out
/// (a client cannot run them), every other phase is paired.
#[test]
#[ignore = "slow: paired A/B rounds of rclone against two real WebDAV servers"]
fn rclone_paired_between_apache_and_nginx_pairs_every_phase() {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--a",
        "apache-webdav",
        "--b",
        "nginx-webdav",
        "--scenario",
        "small-webdav",
    ];
    args.extend(RCLONE);
    let (doc, err) = paired_ab(home.path(), 3, &args);
    assert!(err.contains("route left out"), "{err}");
    assert_paired_client(&doc, 3, 20);
}

/// A/A: Apache against itself through the same client, six rounds (the fewest that give a
/// key of one pair a round the six blocks its interval needs): every phase's client wall time
/// gets a paired interval, not the too-few-blocks verdict of a shorter run.
#[test]
#[ignore = "slow: paired A/A rounds of rclone against a real WebDAV server"]
fn rclone_paired_aa_of_apache_gives_every_phase_a_paired_interval() {
    let home = tempfile::tempdir().unwrap();
    let f = scenario(home.path(), "small", "webdav", 4, "push = \"true\"");
    let mut args = vec![
        "--aa",
        "--a",
        "apache-webdav",
        "--b",
        "apache-webdav",
        "--scenario-file",
        &f,
    ];
    args.extend(RCLONE);
    let (doc, _) = paired_ab(home.path(), 6, &args);
    assert_paired_client(&doc, 6, 4);
    for phase in PHASES {
        let wall = &doc["metrics"][format!("{phase}.client.wall_ms")];
        let reason = wall["reason"].as_str().unwrap();
        assert!(!reason.contains("give no interval"), "{phase}: {wall}");
        assert!(
            reason.contains("paired interval over 6 blocks"),
            "{phase}: {wall}"
        );
    }
}

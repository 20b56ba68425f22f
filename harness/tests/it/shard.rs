//! `load --shard I/N` and `hlog merge`: shards started together against one reference server
//! enrol disjoint devices under one state file, send disjoint chunks and nonces, and their
//! interval logs merge into one whose counts are their sum.

use std::path::Path;
use std::process::{Command, Stdio};

use testkit::server;

use crate::common::{hlog_merge, json_of};

fn shard_cmd(home: &Path, url: &str, token: &Path, shard: &str, log: &Path) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"));
    c.env("XDG_STATE_HOME", home.join("state-home"))
        .args(["load", "--url", url, "--route", "put-chunk"])
        .args([
            "--in-flight",
            "2",
            "--devices",
            "2",
            "--max-requests",
            "200",
        ])
        .args(["--duration", "10s", "--json", "--shard", shard])
        .arg("--state")
        .arg(home.join("state.json"))
        .arg("--setup-token-file")
        .arg(token)
        .arg("--hdr-log")
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Two shards at once: each enrols its own range (the second waits for the first under the
/// state file's lock), every chunk is new to the server (201: no shard repeats another's
/// bodies), no nonce is refused as replayed, and `hlog merge` sums the two logs exactly.
#[test]
fn two_shards_are_disjoint_and_their_logs_merge() {
    let (srv, data) = server();
    let url = srv.url();
    let home = tempfile::tempdir().unwrap();
    let token = data.path().join("setup-token");
    let logs = [home.path().join("s0.hlog"), home.path().join("s1.hlog")];
    let children: Vec<_> = ["0/2", "1/2"]
        .iter()
        .zip(&logs)
        .map(|(s, log)| {
            shard_cmd(home.path(), &url, &token, s, log)
                .spawn()
                .unwrap()
        })
        .collect();
    let mut counts = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let status = &doc["report"]["stats"]["status"];
        assert_eq!(status.as_object().unwrap().len(), 1, "{status}");
        assert_eq!(status["201"], 200, "{status}");
        counts.push(doc["report"]["requests"].as_u64().unwrap());
    }
    let st = contract::state::LoadState::from_json(
        &std::fs::read(home.path().join("state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(st.devices.len(), 4, "one state file, both ranges");
    let ids: std::collections::BTreeSet<_> = st.devices.iter().map(|d| &d.device_id).collect();
    assert_eq!(ids.len(), 4);

    let merged = home.path().join("m.hlog");
    let doc = json_of(hlog_merge(
        home.path(),
        &logs,
        &merged,
        &["--json", "--max-start-skew", "5s"],
    ));
    assert_eq!(doc["correction"], "none");
    assert_eq!(
        doc["tags"]["put-chunk"]["count"].as_u64().unwrap(),
        counts.iter().sum::<u64>()
    );
    let back = loadgen::read_interval_log(&std::fs::read(&merged).unwrap(), "m").unwrap();
    assert_eq!(back["put-chunk"].len(), 400);
    srv.shutdown();
}

/// A refusal is exit 3 with one line naming both files; a log that is not one is exit 2.
#[test]
fn misaligned_logs_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let a = home.path().join("a.hlog");
    let b = home.path().join("b.hlog");
    let head = "#[StartTime: 1700000000.000 (seconds since epoch)]\n#[BaseTime: 1700000000.000 (seconds since epoch)]\n";
    // One empty-histogram interval is enough to align against; the text is a real log.
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    h.record(100).unwrap();
    let enc = contract::histogram::encode(&h).unwrap();
    std::fs::write(
        &a,
        format!("{head}#[Correction: none]\nTag=x,0.000,1.000,0.1,{enc}\n"),
    )
    .unwrap();
    std::fs::write(
        &b,
        format!("{head}#[Correction: intended-send-time]\nTag=x,0.000,1.000,0.1,{enc}\n"),
    )
    .unwrap();
    let out = hlog_merge(home.path(), &[&a, &b], &home.path().join("m.hlog"), &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("a.hlog") && err.contains("b.hlog"), "{err}");
    assert!(!home.path().join("m.hlog").exists());
    std::fs::write(&b, "not a log\n").unwrap();
    let out = hlog_merge(home.path(), &[&a, &b], &home.path().join("m.hlog"), &[]);
    assert_eq!(out.status.code(), Some(2));
}

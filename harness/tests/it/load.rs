//! The `vaultbench load` CLI driven in-process: refusals, state file reuse, interval log.

use clap::Parser;
use harness::commands::load::{LoadArgs, run};
use testkit::{server, tree, write_small_vault};

use crate::common::json_of;

fn parse(args: &[&str]) -> Result<LoadArgs, clap::Error> {
    let argv = ["vaultbench", "load"]
        .into_iter()
        .chain(args.iter().copied());
    harness::Cli::try_parse_from(argv).map(|c| match c.command {
        harness::Command::Load(l) => l,
        other => panic!("parsed as {other:?}"),
    })
}

fn err_of(args: &[&str]) -> String {
    format!("{:#}", run(parse(args).unwrap()).unwrap_err())
}

#[test]
fn remote_target_refused_without_flag() {
    let e = err_of(&[
        "--url",
        "http://10.20.30.40:8080",
        "--route",
        "livez",
        "--in-flight",
        "1",
    ]);
    assert!(
        e.contains("http://10.20.30.40:8080") && e.contains("--allow-remote"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

#[test]
fn bad_input_gets_one_line_errors() {
    let e = parse(&[
        "--url",
        "http://127.0.0.1:1",
        "--route",
        "livez",
        "--in-flight",
        "1",
        "--duration",
        "10",
    ])
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("no unit"), "{e}");
    let e = err_of(&[
        "--url",
        "http://127.0.0.1:1",
        "--route",
        "livez",
        "--in-flight",
        "0",
    ]);
    assert_eq!(e, "--in-flight 0: must be at least 1");
    let e = err_of(&[
        "--url",
        "http://127.0.0.1:1",
        "--route",
        "livez",
        "--rate",
        "0",
    ]);
    assert!(e.starts_with("--rate 0"), "{e}");
    let e = err_of(&["--url", "http://127.0.0.1:1", "--route", "livez"]);
    assert!(e.contains("--in-flight") && e.contains("--rate"), "{e}");
    assert!(
        parse(&[
            "--url",
            "x",
            "--route",
            "livez",
            "--in-flight",
            "1",
            "--rate",
            "5"
        ])
        .is_err()
    );
    let e = err_of(&[
        "push",
        "--url",
        "http://127.0.0.1:1",
        "--vault",
        "/nonexistent/vault",
    ]);
    assert!(e.contains("/nonexistent/vault"), "{e}");
    let state = tempfile::tempdir().unwrap();
    let sp = state.path().join("s.json");
    let e = err_of(&[
        "--url",
        "http://127.0.0.1:1",
        "--route",
        "livez",
        "--in-flight",
        "1",
        "--state",
        sp.to_str().unwrap(),
    ]);
    assert!(e.contains("--setup-token-file"), "{e}");
}

#[test]
fn push_and_pull_in_separate_invocations_share_a_state_file() {
    let (srv, data) = server();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let token = data.path().join("setup-token");
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    std::fs::create_dir(&src).unwrap();
    write_small_vault(&src);
    let s = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let common = ["--url".to_owned(), url.clone(), "--state".into(), s(&state)];
    let mut push: Vec<String> = vec![
        "push".into(),
        "--vault".into(),
        s(&src),
        "--setup-token-file".into(),
        s(&token),
    ];
    push.extend(common.iter().cloned());
    let push: Vec<&str> = push.iter().map(String::as_str).collect();
    assert_eq!(run(parse(&push).unwrap()).unwrap(), 0);
    let st = contract::state::LoadState::from_json(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(st.devices.len(), 1);
    // The second invocation pairs device 1 and pulls with it (a new nonce session).
    let mut pull: Vec<String> = vec!["pull".into(), "--vault".into(), s(&dst)];
    pull.extend(common.iter().cloned());
    let pull: Vec<&str> = pull.iter().map(String::as_str).collect();
    assert_eq!(run(parse(&pull).unwrap()).unwrap(), 0);
    assert_eq!(tree(&src), tree(&dst));
    let st = contract::state::LoadState::from_json(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(st.devices.len(), 2);
    assert_eq!(st.session, 1);

    // A route load through the CLI with an interval log, reusing the same devices.
    let log = dir.path().join("run.hlog");
    let mut rl: Vec<String> = [
        "--route",
        "chunks-exists",
        "--rate",
        "100",
        // The duration bounds preparation too; in this busy test binary 300 ms was not
        // always enough to prepare, so give it 3 s and end the run by request count.
        "--duration",
        "3s",
        "--max-requests",
        "60",
        "--devices",
        "2",
        "--hdr-log",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    rl.push(s(&log));
    rl.extend(common.iter().cloned());
    let rl: Vec<&str> = rl.iter().map(String::as_str).collect();
    assert_eq!(run(parse(&rl).unwrap()).unwrap(), 0);
    let text = std::fs::read(&log).unwrap();
    let h = loadgen::read_interval_log(&text, "run.hlog").unwrap();
    assert!(
        h["chunks-exists"].len() >= 20,
        "{}",
        h["chunks-exists"].len()
    );
    assert!(h.contains_key("chunks-exists-uncorrected"));
}

/// A fake obsync-v1 server on 127.0.0.1:0 whose changes feed never ends: `/readyz` and
/// `/v1/setup` answer as a real server's, every feed page lists one new entry under a rising
/// `seq` with `head_seq` always ahead, anything else is `404`. Returns its URL and the count
/// of feed requests; it stops accepting after a minute.
fn endless_feed_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    l.set_nonblocking(true).unwrap();
    let feeds = std::sync::Arc::new(AtomicU64::new(0));
    let counted = feeds.clone();
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let Some((req, _)) = testkit::read_request(&mut s, Vec::new()) else {
                continue;
            };
            let pq = req.target;
            let (status, body) = if pq == "/readyz" {
                (200, r#"{"ready":true,"seq":0}"#.to_owned())
            } else if pq == "/v1/setup" {
                let r = format!(
                    r#"{{"account_id":"a","device_id":"{}","device_secret":"{}"}}"#,
                    "01".repeat(16),
                    "02".repeat(32)
                );
                (201, r)
            } else if pq.starts_with("/v1/changes") {
                counted.fetch_add(1, Ordering::SeqCst);
                let since: u64 = pq
                    .split(['?', '&'])
                    .find_map(|kv| kv.strip_prefix("since="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                // A deletion of a file never listed: a new entry that needs no manifest.
                let seq = since + 1;
                let change = serde_json::json!({
                    "seq": seq, "file_id": format!("{seq:032x}"), "domain_id": "d",
                    "version_id": format!("v{seq}"), "parents": [], "sids": [], "bytes": 0,
                    "manifest_ct": "", "manifest_nonce": "00", "device_id": "ff".repeat(16),
                    "ts": 0, "deleted": true, "heads": [], "conflicted": false,
                });
                let page =
                    serde_json::json!({"seq": seq, "head_seq": u64::MAX, "changes": [change]});
                (200, page.to_string())
            } else {
                (404, "{}".to_owned())
            };
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    (url, feeds)
}

/// `load pull` from a server whose feed never ends stops at `--feed-max-pages` (20 here), well
/// within 60 s, after exactly that many feed requests: exit 2 and one line naming the
/// server's behaviour and the flag, an empty vault, and nothing written beside it.
#[test]
fn load_pull_stops_a_feed_that_never_ends_at_its_bound() {
    let (url, feeds) = endless_feed_server();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t").unwrap();
    let vault = dir.path().join("vault");
    let started = std::time::Instant::now();
    let out = testkit::vb!(dir.path())
        .args(["load", "pull", "--device", "0", "--feed-max-pages", "20"])
        .args(["--url", &url, "--vault"])
        .arg(&vault)
        .arg("--setup-token-file")
        .arg(&token)
        .arg("--state")
        .arg(dir.path().join("state.json"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err.trim().lines().last().unwrap_or_default();
    assert!(
        line.ends_with(
            "GET /v1/changes: server's changes feed went on past 20 pages in one walk (bound --feed-max-pages)"
        ),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(feeds.load(std::sync::atomic::Ordering::SeqCst), 20);
    assert_eq!(tree(&vault), Default::default(), "an empty vault");
    let mut beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(
        beside,
        ["state.json", "state.json.lock", "token", "vault"],
        "nothing written beside the vault"
    );
}

/// `load bench-peer` end to end against wrk (installed by `.ci/run`) at one connection, where
/// the generator runs a blocking worker thread: both generators answer, and every figure the
/// book quotes (docs/src/measured.md) is a positive number.
#[test]
#[ignore = "slow: runs wrk and the generator against a fresh reference server (needs wrk)"]
fn bench_peer_runs_both_generators_at_one_connection() {
    let v = json_of(
        std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args(["load", "bench-peer", "--in-flight", "1", "--rounds", "2"])
            .args(["--duration", "1s", "--held", "300", "--json"])
            .output()
            .unwrap(),
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{v}");
    for g in ["vaultbench", "wrk"] {
        let mine: Vec<_> = runs.iter().filter(|r| r["generator"] == g).collect();
        assert_eq!(mine.len(), 2, "{g}: {v}");
        for r in mine {
            assert!(r["requests"].as_u64().unwrap() > 100, "{g}: {r}");
            let cpu = r["cpu_us_per_request"].as_f64().unwrap();
            assert!(cpu > 0.0 && cpu < 10_000.0, "{g}: {r}");
        }
    }
    for k in [
        "ratio_median",
        "vaultbench_cpu_us_per_request",
        "wrk_cpu_us_per_request",
        "signing_mean_us",
    ] {
        let x = v[k].as_f64().unwrap();
        assert!(x > 0.0 && x.is_finite(), "{k}: {v}");
    }
    // Held connections side by side: each generator's RSS grows by something per held
    // connection, and a held device is not heavier than wrk's connection twice over.
    let held = &v["held"];
    assert_eq!(held["connections"], 300, "{v}");
    let (vb, wrk) = (
        held["vaultbench_kib_per_connection"].as_f64().unwrap(),
        held["wrk_kib_per_connection"].as_f64().unwrap(),
    );
    assert!(vb > 0.0 && wrk > 0.0, "{held}");
    assert!(
        vb < 2.0 * wrk,
        "a held device costs {vb} KiB, wrk's connection {wrk}: {held}"
    );
}

/// What varies by protocol comes from the registry: the routes a refusal lists, the protocol
/// a mismatched target is found to speak, and which protocols have devices to hold.
#[test]
fn protocol_refusals_name_what_the_registry_says() {
    let e = err_of(&[
        "--url",
        "http://127.0.0.1:1",
        "--protocol",
        "couchdb",
        "--route",
        "put-chunk",
        "--in-flight",
        "1",
    ]);
    assert!(
        e.starts_with("--route: unknown couchdb route \"put-chunk\"") && e.contains("bulk-docs"),
        "{e}"
    );
    let e = err_of(&["--url", "http://127.0.0.1:1", "--protocol", "webdav"]);
    assert!(
        e.contains("--route is required") && e.contains("propfind-depth1"),
        "{e}"
    );
    let e = err_of(&[
        "fanout",
        "--url",
        "http://127.0.0.1:1",
        "--protocol",
        "webdav",
    ]);
    assert!(
        e.contains("only obsync-v1 targets") && e.contains("webdav cannot"),
        "{e}"
    );
    let (srv, _data) = server();
    let url = srv.url();
    let e = err_of(&[
        "--url",
        &url,
        "--protocol",
        "webdav",
        "--route",
        "get-file",
        "--in-flight",
        "1",
        "--max-requests",
        "1",
    ]);
    assert_eq!(
        e,
        format!(
            "protocol mismatch: --protocol webdav but target {url} speaks obsync-v1 (its readiness probe answers): drop --protocol webdav"
        )
    );
}

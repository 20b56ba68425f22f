//! MCP servers over a vault, recorded (slow: real server processes, so `#[ignore]`d;
//! `.ci/run` installs the reference server with `npm ci --prefix tools/mcp`): `record
//! small-mcp` against the `mcp-filesystem` preset gives the cold boot's steps, the listing,
//! per-tool latencies at 1 and 8 in flight, the server's CPU, RSS and threads and its
//! shutdown; against a test server that speaks only the 2026-07-28 revision, the recording
//! names that era. Against the `obsidian-mcp` preset (`bash tools/obsidian-mcp/install.sh`),
//! its search scored through the preset's `[mcp]` search tool, the indexing keys of its
//! SQLite index, and its shutdown ended by SIGTERM after the preset's grace. Over Streamable HTTP: the `mcp-everything` preset (the reference test
//! server, its `echo` and `get-sum` tools) and a typed command line of the HTTP test server
//! (`{port}` makes it an HTTP target) give the same boot keys, per-tool keys, and the
//! session's DELETE as the shutdown key. `growth-mcp-small` against `mcp-filesystem` gives
//! each size's keys and the fitted exponents, and finds the server's `search_files` (a walk
//! of the whole tree) growing with the vault. `verify` accepts every recording.

use std::path::Path;

use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

/// Records `small-mcp` (one sample) against `target` with `extra` arguments: the baseline.
fn record_small_mcp(home: &Path, target: &str, extra: &[&str]) -> Value {
    let out = home.join("out");
    record_loose(home, &["small-mcp", "--target", target, "--samples", "1"])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.join("work"))
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success();
    vb!(home)
        .arg("verify")
        .arg(out.join("small-mcp.json"))
        .assert()
        .success();
    serde_json::from_slice(&std::fs::read(out.join("small-mcp.json")).unwrap()).unwrap()
}

fn value(b: &Value, k: &str) -> f64 {
    b["metrics"][k]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{k} missing: {}", b["metrics"]))
}

#[test]
#[ignore = "slow: real servers"]
fn small_mcp_records_the_reference_filesystem_server() {
    let home = tempfile::tempdir().unwrap();
    let b = record_small_mcp(home.path(), "mcp-filesystem", &[]);
    // 2026.8.31 lists 14 tools in one page.
    assert_eq!(value(&b, "mcp_boot.tools"), 14.0);
    assert_eq!(value(&b, "mcp_boot.list_pages"), 1.0);
    assert!(value(&b, "mcp_boot.list_bytes") > 1000.0);
    assert_eq!(value(&b, "mcp_boot.era.handshake"), 1.0);
    assert_eq!(value(&b, "mcp_boot.protocol.2025-11-25"), 1.0);
    let (first, shake, list) = (
        value(&b, "mcp_boot.first_byte_us"),
        value(&b, "mcp_boot.handshake_us"),
        value(&b, "mcp_boot.first_list_us"),
    );
    assert!(
        0.0 < first && first <= shake && shake <= list && list < 30e6,
        "{first} {shake} {list}"
    );
    assert!(value(&b, "mcp_list_warm.p50_us") > 0.0);
    for n in [1, 8] {
        let p = format!("mcp_calls_c{n}");
        for tool in [
            "read_text_file",
            "read_multiple_files",
            "list_directory",
            "search_files",
        ] {
            assert_eq!(value(&b, &format!("{p}.calls.{tool}")), 20.0, "{p} {tool}");
            let (p50, p99) = (
                value(&b, &format!("{p}.{tool}.p50_us")),
                value(&b, &format!("{p}.{tool}.p99_us")),
            );
            assert!(0.0 < p50 && p50 <= p99 && p99 < 10e6, "{p} {tool}");
        }
        // The same latencies by the workload's op, whatever the tool is called.
        for (op, tool) in [
            ("read_note", "read_text_file"),
            ("read_several", "read_multiple_files"),
            ("list_folder", "list_directory"),
            ("search", "search_files"),
        ] {
            for q in ["p50_us", "p99_us"] {
                assert_eq!(
                    value(&b, &format!("{p}.op_{op}.{q}")),
                    value(&b, &format!("{p}.{tool}.{q}")),
                    "{p} {op}"
                );
            }
        }
        assert_eq!(value(&b, &format!("{p}.tool_errors")), 0.0, "{p}");
        assert_eq!(value(&b, &format!("{p}.protocol_errors")), 0.0, "{p}");
        assert!(
            value(&b, &format!("{p}.server.cpu_us_per_call")) > 0.0,
            "{p}"
        );
        assert!(value(&b, &format!("{p}.server.cpu_ms")) > 0.0, "{p}");
    }
    let exit = value(&b, "mcp_shutdown.exit_us");
    assert!(0.0 < exit && exit < 5e6, "{exit}");
    // It exits when its stdin closes: no signal.
    assert_eq!(value(&b, "mcp_shutdown.ended_by.stdin"), 1.0);
    assert!(b["metrics"].get("mcp_shutdown.ended_by.sigterm").is_none());
    // No index declared: no indexing keys.
    assert!(b["metrics"].get("mcp_index.first_results_us").is_none());
    // A Node server: tens of MiB resident, several threads, CPU spent booting.
    let rss = value(&b, "server.peak_rss_mib");
    assert!((10.0..4096.0).contains(&rss), "{rss}");
    assert!(value(&b, "server.threads") >= 2.0);
    assert!(value(&b, "mcp_boot.server.cpu_ms") > 1.0);
    assert!(value(&b, "server.cpu_s") > 0.0);
    // Its search_files is a glob over names: no content search, no scores.
    assert_eq!(value(&b, "mcp_quality.content_search"), 0.0);
    assert!(b["metrics"].get("mcp_quality.recall_at_10").is_none());
}

#[test]
#[ignore = "slow: real servers"]
fn small_mcp_scores_mcpvaults_search_on_the_planted_queries() {
    let home = tempfile::tempdir().unwrap();
    let b = record_small_mcp(home.path(), "mcpvault", &[]);
    assert!(value(&b, "mcp_boot.tools") > 0.0);
    assert_eq!(value(&b, "mcp_quality.content_search"), 1.0);
    // small-queries plants 8 queries.
    assert_eq!(value(&b, "mcp_quality.queries"), 8.0);
    assert_eq!(value(&b, "mcp_quality.failed_queries"), 0.0);
    for k in ["recall_at_10", "ndcg_at_10", "mrr_at_10"] {
        let v = value(&b, &format!("mcp_quality.{k}"));
        assert!((0.0..=1.0).contains(&v), "{k} {v}");
        assert_eq!(
            b["metrics"][format!("mcp_quality.{k}")]["class"].as_str(),
            Some("exact"),
            "{k}"
        );
    }
    // The phrase's three words are rare and every relevant note holds all three: a BM25
    // search finds some of them.
    assert!(value(&b, "mcp_quality.recall_at_10") > 0.0);
    for n in [1, 8] {
        let p = format!("mcp_calls_c{n}");
        assert_eq!(value(&b, &format!("{p}.calls.search_notes")), 20.0, "{p}");
        assert_eq!(value(&b, &format!("{p}.protocol_errors")), 0.0, "{p}");
    }
    assert!(value(&b, "mcp_shutdown.exit_us") > 0.0);
}

#[test]
#[ignore = "slow: real servers"]
fn small_mcp_records_obsidian_mcp_with_its_index_and_its_sigterm() {
    let home = tempfile::tempdir().unwrap();
    let b = record_small_mcp(home.path(), "obsidian-mcp", &[]);
    // 2.1.6 lists 27 tools, in the handshake era.
    assert_eq!(value(&b, "mcp_boot.tools"), 27.0);
    assert_eq!(value(&b, "mcp_boot.era.handshake"), 1.0);
    let (first, shake, list) = (
        value(&b, "mcp_boot.first_byte_us"),
        value(&b, "mcp_boot.handshake_us"),
        value(&b, "mcp_boot.first_list_us"),
    );
    assert!(
        0.0 < first && first <= shake && shake <= list && list < 30e6,
        "{first} {shake} {list}"
    );
    // Its note tools, with vault-relative paths and `directory`, answer without errors.
    for n in [1, 8] {
        let p = format!("mcp_calls_c{n}");
        for tool in ["read_note_tool", "list_notes_tool", "search_notes_tool"] {
            assert_eq!(value(&b, &format!("{p}.calls.{tool}")), 20.0, "{p} {tool}");
            let (p50, p99) = (
                value(&b, &format!("{p}.{tool}.p50_us")),
                value(&b, &format!("{p}.{tool}.p99_us")),
            );
            assert!(0.0 < p50 && p50 <= p99 && p99 < 10e6, "{p} {tool}");
        }
        assert_eq!(value(&b, &format!("{p}.tool_errors")), 0.0, "{p}");
        assert_eq!(value(&b, &format!("{p}.protocol_errors")), 0.0, "{p}");
    }
    // Its search, the preset's `search_notes_tool`, scored on the 8 planted queries: a
    // substring match of the whole phrase finds the notes that hold it.
    assert_eq!(value(&b, "mcp_quality.content_search"), 1.0);
    assert_eq!(value(&b, "mcp_quality.queries"), 8.0);
    assert_eq!(value(&b, "mcp_quality.failed_queries"), 0.0);
    assert!(value(&b, "mcp_quality.recall_at_10") > 0.0);
    assert!(value(&b, "mcp_quality.ndcg_at_10") > 0.0);
    // The index: its first useful answer after the boot, its rate over the 100 notes, its
    // size on disk, and a second start that answers from the index it finds.
    let ready = value(&b, "mcp_index.first_results_us");
    assert!(list < ready && ready < 60e6, "{list} {ready}");
    assert_eq!(value(&b, "mcp_index.notes"), 100.0);
    let rate = value(&b, "mcp_index.notes_per_s");
    assert!((rate - 100.0 / (ready / 1e6)).abs() < 1e-4 * rate, "{rate}");
    assert!(value(&b, "mcp_index.size_bytes") > 4096.0);
    let (wl, wr) = (
        value(&b, "mcp_index.warm_first_list_us"),
        value(&b, "mcp_index.warm_first_results_us"),
    );
    assert!(
        value(&b, "mcp_index.warm_handshake_us") <= wl && wl <= wr,
        "{wl} {wr}"
    );
    assert_eq!(value(&b, "mcp_index.warm_ended_by.sigterm"), 1.0);
    // It does not exit when its stdin closes (its index's worker thread lives on): SIGTERM
    // after the preset's 2 s grace ends it, and the exit is timed to the end.
    assert_eq!(value(&b, "mcp_shutdown.ended_by.sigterm"), 1.0);
    assert_eq!(value(&b, "mcp_shutdown.grace_ms"), 2000.0);
    let exit = value(&b, "mcp_shutdown.exit_us");
    assert!((2e6..7e6).contains(&exit), "{exit}");
    assert!(value(&b, "server.peak_rss_mib") > 10.0);
}

#[test]
#[ignore = "slow: real servers"]
fn a_stateless_only_server_is_recorded_in_its_era() {
    let home = tempfile::tempdir().unwrap();
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../loadgen/tests/it/mcp/fake_server.py");
    let target = format!("python3 {} stateless {{data}}", fake.display());
    let b = record_small_mcp(home.path(), &target, &["--protocol", "mcp"]);
    assert_eq!(value(&b, "mcp_boot.era.stateless"), 1.0);
    assert_eq!(value(&b, "mcp_boot.protocol.2026-07-28"), 1.0);
    assert!(b["metrics"].get("mcp_boot.era.handshake").is_none());
    // The fake pages its four tools two at a time.
    assert_eq!(value(&b, "mcp_boot.tools"), 4.0);
    assert_eq!(value(&b, "mcp_boot.list_pages"), 2.0);
    for n in [1, 8] {
        assert_eq!(
            value(&b, &format!("mcp_calls_c{n}.calls.read_text_file")),
            20.0
        );
        assert_eq!(value(&b, &format!("mcp_calls_c{n}.protocol_errors")), 0.0);
    }
    assert!(value(&b, "mcp_shutdown.exit_us") > 0.0);
}

/// What an HTTP recording shows beside the calls: the boot steps in order, the transport, and
/// the session's DELETE as its shutdown (no process exit is timed).
fn check_http(b: &Value) {
    assert_eq!(value(b, "mcp_boot.transport.http"), 1.0);
    // An HTTP server has a readiness probe (its port), a stdio one has none.
    assert!(value(b, "cold_start.ready_ms") > 0.0);
    let (first, shake, list) = (
        value(b, "mcp_boot.first_byte_us"),
        value(b, "mcp_boot.handshake_us"),
        value(b, "mcp_boot.first_list_us"),
    );
    assert!(
        0.0 < first && first <= shake && shake <= list && list < 30e6,
        "{first} {shake} {list}"
    );
    let delete = value(b, "mcp_shutdown.delete_us");
    assert!(0.0 < delete && delete < 5e6, "{delete}");
    assert!(b["metrics"].get("mcp_shutdown.exit_us").is_none());
    assert!(b["metrics"].get("mcp_boot.transport.stdio").is_none());
}

#[test]
#[ignore = "slow: real servers"]
fn small_mcp_records_the_reference_test_server_over_http() {
    let home = tempfile::tempdir().unwrap();
    let b = record_small_mcp(home.path(), "mcp-everything", &[]);
    check_http(&b);
    assert_eq!(value(&b, "mcp_boot.era.handshake"), 1.0);
    assert!(value(&b, "mcp_boot.tools") >= 2.0);
    for n in [1, 8] {
        let p = format!("mcp_calls_c{n}");
        for tool in ["echo", "get-sum"] {
            assert_eq!(value(&b, &format!("{p}.calls.{tool}")), 20.0, "{p} {tool}");
            let (p50, p99) = (
                value(&b, &format!("{p}.{tool}.p50_us")),
                value(&b, &format!("{p}.{tool}.p99_us")),
            );
            assert!(0.0 < p50 && p50 <= p99 && p99 < 10e6, "{p} {tool}");
        }
        assert_eq!(value(&b, &format!("{p}.tool_errors")), 0.0, "{p}");
        assert_eq!(value(&b, &format!("{p}.protocol_errors")), 0.0, "{p}");
    }
    let rss = value(&b, "server.peak_rss_mib");
    assert!((10.0..4096.0).contains(&rss), "{rss}");
}

#[test]
#[ignore = "slow: real servers"]
fn a_typed_http_server_is_recorded_over_sse() {
    let home = tempfile::tempdir().unwrap();
    let fake =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../loadgen/tests/it/mcp/fake_http_server.py");
    let target = format!("python3 {} sse {{data}} {{port}}", fake.display());
    let b = record_small_mcp(home.path(), &target, &["--protocol", "mcp"]);
    check_http(&b);
    assert_eq!(value(&b, "mcp_boot.protocol.2025-11-25"), 1.0);
    assert_eq!(value(&b, "mcp_boot.tools"), 4.0);
    assert_eq!(value(&b, "mcp_boot.list_pages"), 2.0);
    for n in [1, 8] {
        assert_eq!(
            value(&b, &format!("mcp_calls_c{n}.calls.read_text_file")),
            20.0
        );
        assert_eq!(value(&b, &format!("mcp_calls_c{n}.protocol_errors")), 0.0);
    }
    // Every answer's stream carried a progress notification.
    assert!(value(&b, "mcp_traffic.notifications") > 0.0);
}

/// `ab --paired` of the reference filesystem server against itself: both servers up in each
/// round, every warm listing and every call at 1 in flight sent to both in turn. The per-tool
/// and listing keys are judged on their pairs, every timing key gets a verdict, and the
/// boot's timings and the 8-in-flight level are named as not paired. How often an A/A calls
/// a key is a rate, measured on a quiet machine and stated in the book's measured chapter (0
/// of 10 runs), not asserted here: on a loaded test machine one run may call one tool's p50.
#[test]
#[ignore = "slow: paired A/A rounds against real servers"]
fn a_paired_a_a_run_of_the_filesystem_server_judges_every_tool_on_its_pairs() {
    let home = tempfile::tempdir().unwrap();
    let (gate, _) = crate::common::loose_files(home.path());
    let res = home.path().join("ab.json");
    vb!(home.path())
        .args([
            "ab",
            "--paired",
            "--aa",
            "--a",
            "mcp-filesystem",
            "--b",
            "mcp-filesystem",
            "--scenario",
            "small-mcp",
            "--rounds",
            "6",
        ])
        .arg("--gate-config")
        .arg(&gate)
        .arg("--out")
        .arg(&res)
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&std::fs::read(&res).unwrap()).unwrap();
    let p = &doc["paired"];
    for key in [
        "mcp_list_warm.p50_us",
        "mcp_calls_c1.read_text_file.p50_us",
        "mcp_calls_c1.search_files.p50_us",
    ] {
        assert_eq!(
            doc["metrics"][key]["interval_method"], "paired_blocks",
            "{key}: {}",
            doc["metrics"][key]
        );
        assert!(
            p["keys"][key]["pairs"][0].as_u64().unwrap() >= 5,
            "{key}: {p}"
        );
    }
    let metrics = doc["metrics"].as_object().unwrap();
    let timing: Vec<(&String, &Value)> = metrics
        .iter()
        .filter(|(k, _)| k.starts_with("mcp_") && (k.ends_with("_us") || k.ends_with("_ms")))
        .collect();
    assert!(timing.len() >= 5, "{}", doc["metrics"]);
    for (k, m) in timing {
        let verdict = m["verdict"].as_str().unwrap_or_default();
        assert!(
            ["better", "worse", "no_change", "inconclusive"].contains(&verdict),
            "{k}: {m}"
        );
    }
    let skipped = p["skipped_phases"].as_array().unwrap();
    for phase in ["mcp_boot", "mcp_calls_c8"] {
        assert!(skipped.iter().any(|s| s == phase), "{phase}: {skipped:?}");
    }
}

#[test]
#[ignore = "slow: real servers"]
fn growth_mcp_small_fits_the_filesystem_servers_search_against_the_vault_size() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    record_loose(
        home.path(),
        &[
            "growth-mcp-small",
            "--target",
            "mcp-filesystem",
            "--samples",
            "1",
        ],
    )
    .arg("--out")
    .arg(&out)
    .arg("--work-dir")
    .arg(home.path().join("work"))
    .timeout(std::time::Duration::from_secs(900))
    .assert()
    .success();
    let file = out.join("growth-mcp-small.json");
    vb!(home.path()).arg("verify").arg(&file).assert().success();
    let b: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // Each size: its notes, a booted server, every tool's latency at both levels.
    for n in [100u32, 300, 1000] {
        let s = format!("n{n:05}");
        assert_eq!(value(&b, &format!("mcp_{s}.notes")), f64::from(n));
        assert_eq!(value(&b, &format!("mcp_boot_{s}.tools")), 14.0);
        assert!(value(&b, &format!("mcp_{s}.server.peak_rss_kib")) > 1000.0);
        assert!(value(&b, &format!("mcp_shutdown_{s}.exit_us")) > 0.0);
        for c in [1, 8] {
            let p = format!("mcp_calls_c{c}_{s}");
            for tool in ["read_text_file", "list_directory", "search_files"] {
                assert_eq!(value(&b, &format!("{p}.calls.{tool}")), 10.0, "{p} {tool}");
                assert!(value(&b, &format!("{p}.{tool}.p50_us")) > 0.0, "{p} {tool}");
            }
            assert_eq!(value(&b, &format!("{p}.protocol_errors")), 0.0, "{p}");
        }
    }
    // The fitted exponents, each with its interval around it.
    let g = |k: &str| value(&b, &format!("mcp_growth.{k}"));
    for series in [
        "mcp_calls_c1.search_files",
        "mcp_calls_c8.search_files",
        "mcp_calls_c1.read_text_file",
        "mcp_calls_c1.server_cpu_per_call",
        "mcp_boot.first_list",
        "peak_rss",
    ] {
        let (e, lo, hi) = (
            g(&format!("{series}.exponent")),
            g(&format!("{series}.exponent_lo")),
            g(&format!("{series}.exponent_hi")),
        );
        assert!(lo <= e && e <= hi, "{series}: {lo} {e} {hi}");
    }
    // server-filesystem's search_files walks the whole tree: it grows with n, a read of
    // one note does not grow as much.
    let search = g("mcp_calls_c1.search_files.exponent");
    assert!(
        search > 0.3 && g("mcp_calls_c1.search_files.exponent_lo") > 0.0,
        "{search}"
    );
    assert!(
        search > g("mcp_calls_c1.read_text_file.exponent") + 0.2,
        "search {search} against read {}",
        g("mcp_calls_c1.read_text_file.exponent")
    );
}

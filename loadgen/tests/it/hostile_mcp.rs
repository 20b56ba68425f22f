//! The MCP client against stdio servers that misbehave (the test server beside this file in
//! its hostile modes): one that never answers, one that writes a line that is not JSON, a
//! line of 1 GiB, answers with ids no request had, results nested 100,000 deep, and a
//! `tools/list` whose every page has a `nextCursor`. Each ends within its deadline with a
//! one-line error naming what the server did, and the server is gone afterwards (killed and
//! reaped: no process with its pid is left).

use std::time::{Duration, Instant};

use loadgen::protocols::mcp::run::run;

use crate::mcp_e2e::{fake, vault};

/// Runs `mode` with a 4 s boot bound and a 1 s probe (a Python start on a loaded machine
/// can take most of a second); the error line, and how long it took.
fn fails(mode: &str) -> (String, Duration) {
    let v = vault();
    let pid_file = v.path().join(".pid");
    let mut cfg = fake(mode, v.path(), &[]);
    cfg.probe = Duration::from_secs(1);
    cfg.boot = Duration::from_secs(4);
    cfg.stdio
        .env
        .insert("FAKE_MCP_PID_FILE".into(), pid_file.display().to_string());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = Instant::now();
    let e = rt.block_on(run(&cfg)).unwrap_err().to_string();
    let took = t.elapsed();
    drop(rt);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{mode}: the server {pid} is still there"
    );
    assert!(!e.contains('\n'), "{mode}: {e}");
    assert!(e.len() < 1000, "{mode}: {} bytes", e.len());
    (e, took)
}

use std::path::Path;

#[test]
fn a_server_that_never_answers_fails_at_the_boot_bound() {
    let (e, took) = fails("silent");
    assert!(e.starts_with("initialize: no answer within"), "{e}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn a_line_that_is_not_json_is_one_quoted_line() {
    let (e, took) = fails("nonjson");
    assert!(
        e.contains("not a JSON-RPC message") && e.contains("Starting server on stdio"),
        "{e}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn a_line_of_a_gigabyte_is_refused_at_the_line_bound() {
    let (e, took) = fails("hugeline");
    assert!(e.contains("wrote a line longer than 16777216 bytes"), "{e}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn answers_with_unknown_ids_are_counted_and_end_at_the_deadline() {
    let (e, took) = fails("unknown-ids");
    assert!(
        e.starts_with("initialize: no answer within") && e.contains("ids no request had"),
        "{e}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn a_result_nested_too_deep_is_refused() {
    let (e, took) = fails("deep");
    assert!(
        e.contains("not a JSON-RPC message") && e.contains("recursion"),
        "{e}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn an_endless_next_cursor_stops_at_the_page_bound() {
    let (e, took) = fails("endless-cursor");
    assert!(
        e.starts_with("tools/list: still gave a nextCursor after 100 pages"),
        "{e}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
}

//! The MCP client over Streamable HTTP: the test server beside this file
//! (`mcp/fake_http_server.py`, standard-library Python, on 127.0.0.1 port 0) answering in JSON,
//! in SSE streams, and in the stateless revision, then in its hostile modes: an SSE stream
//! that trickles a byte at a time and never answers, a line of 1 GiB, and answers with ids no
//! request had. Each good run measures the cold boot, the listing over its pages, the seeded
//! workload at 1 and 8 in flight (concurrent POSTs) and the session's DELETE; each hostile one
//! ends within its deadline with a one-line error. The server is this test's child, killed and
//! reaped whatever happens.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use loadgen::protocols::mcp::http::{HttpConfig, HttpConn};
use loadgen::protocols::mcp::run::{Report, RunConfig, run_over};
use loadgen::protocols::mcp::session::Era;

use crate::mcp_e2e::vault;

fn fake_http_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/fake_http_server.py")
}

/// The fake server, killed and reaped on drop.
struct Server {
    child: Child,
    port: u16,
    spawned: Instant,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(mode: &str, vault: &Path) -> Server {
    let port_file = vault.join(".port");
    let spawned = Instant::now();
    let child = Command::new("python3")
        .arg(fake_http_server())
        .arg(mode)
        .arg(vault)
        .arg(&port_file)
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        port: 0,
        spawned,
    };
    let by = Instant::now() + Duration::from_secs(20);
    while Instant::now() < by {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            server.port = p.trim().parse().unwrap();
            return server;
        }
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "the fake server exited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the fake server did not write its port within 20 s");
}

fn cfg(vault: &Path) -> RunConfig {
    let mut cfg = RunConfig::new(Vec::new(), std::fs::canonicalize(vault).unwrap());
    cfg.calls_per_op = 10;
    cfg.warm_lists = 3;
    cfg.probe = Duration::from_secs(2);
    cfg.boot = Duration::from_secs(10);
    cfg
}

fn conn(s: &Server, http: impl FnOnce(&mut HttpConfig)) -> HttpConn {
    let mut c = HttpConfig::new(HttpConfig::endpoint(
        ([127, 0, 0, 1], s.port).into(),
        Some("/mcp/"),
    ));
    http(&mut c);
    HttpConn::new(c, s.child.id(), s.spawned).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn measured(mode: &str) -> Report {
    let v = vault();
    let s = start(mode, v.path());
    let cfg = cfg(v.path());
    let r = rt()
        .block_on(run_over(conn(&s, |_| {}), &cfg))
        .unwrap_or_else(|e| panic!("{mode}: {e}"));
    assert_eq!(r.transport, "http");
    assert_eq!(r.tools, 4, "{mode}: two pages of two");
    assert_eq!(r.list_pages, 2);
    for (n, l) in &r.levels {
        assert_eq!(l.calls, 40, "{mode} level {n}");
        assert_eq!(l.protocol_errors, 0, "{mode} level {n}");
    }
    assert_eq!(r.levels.keys().copied().collect::<Vec<_>>(), vec![1, 8]);
    assert_eq!(r.traffic.unknown_ids, 0);
    let b = r.boot;
    assert!(
        b.first_byte <= b.handshake && b.handshake <= b.first_list,
        "{b:?}"
    );
    r
}

#[test]
fn a_handshake_server_answering_json_is_measured_with_its_session() {
    let r = measured("json");
    assert_eq!(r.negotiated.era, Era::Handshake);
    assert_eq!(r.negotiated.version, "2025-11-25");
    assert!(r.shutdown.is_some(), "the session's DELETE was answered");
    let keys: Vec<String> = r.keys().into_iter().map(|k| k.key).collect();
    assert!(
        keys.contains(&"mcp_shutdown.delete_us".to_owned()),
        "{keys:?}"
    );
    assert!(!keys.contains(&"mcp_shutdown.exit_us".to_owned()));
    assert!(keys.contains(&"mcp_calls_c8.read_text_file.p99_us".to_owned()));
}

#[test]
fn answers_in_sse_streams_are_read_past_priming_events_and_notifications() {
    let r = measured("sse");
    assert_eq!(r.negotiated.era, Era::Handshake);
    assert!(r.shutdown.is_some());
    // A progress notification on every request's stream.
    assert!(r.traffic.notifications >= 80, "{:?}", r.traffic);
}

#[test]
fn a_stateless_server_over_http_is_measured_without_a_session() {
    let r = measured("stateless");
    assert_eq!(r.negotiated.era, Era::Stateless);
    assert_eq!(r.negotiated.version, "2026-07-28");
    assert!(r.negotiated.discovered);
    // No session, so no DELETE: no shutdown figure.
    assert_eq!(r.shutdown, None);
}

/// Runs a hostile `mode` with a 3 s boot bound: the error line and how long it took.
fn fails(mode: &str, http: impl FnOnce(&mut HttpConfig)) -> (String, Duration) {
    let v = vault();
    let s = start(mode, v.path());
    let mut cfg = cfg(v.path());
    cfg.boot = Duration::from_secs(3);
    cfg.probe = Duration::from_secs(1);
    let c = conn(&s, http);
    let t = Instant::now();
    let e = rt().block_on(run_over(c, &cfg)).unwrap_err().to_string();
    let took = t.elapsed();
    assert!(!e.contains('\n'), "{mode}: {e}");
    assert!(e.len() < 1000, "{mode}: {} bytes", e.len());
    (e, took)
}

#[test]
fn an_sse_stream_that_trickles_ends_at_the_boot_bound() {
    let (e, took) = fails("trickle", |_| {});
    assert!(
        e.starts_with("initialize: no answer within") && e.contains("bytes)"),
        "{e}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn an_sse_stream_that_goes_silent_ends_at_the_trickle_bound() {
    // The trickle mode's comment bytes come every 50 ms: a bound below that is a silence.
    let (e, took) = fails("trickle", |c| c.trickle = Duration::from_millis(10));
    assert!(e.contains("went silent for"), "{e}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn an_sse_line_of_a_gigabyte_is_refused_at_the_line_bound() {
    let (e, took) = fails("hugeline", |c| c.max_line = 1 << 20);
    assert!(e.contains("SSE line longer than 1048576 bytes"), "{e}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn sse_answers_with_unknown_ids_are_counted_and_refused() {
    let (e, took) = fails("unknown-ids", |_| {});
    assert!(e.contains("with an id no request had"), "{e}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

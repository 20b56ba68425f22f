//! The MCP client end to end over stdio: the test server beside this file
//! (`mcp/fake_server.py`, standard-library Python) in each era, and the reference
//! filesystem server from `tools/mcp` (`#[ignore = "slow: ..."]`, installed by `.ci/run`).
//! Each run measures the cold boot step by step, the listing (followed over its pages), the
//! seeded workload at 1 and 8 in flight and the shutdown, and names the era it found.

use std::path::{Path, PathBuf};
use std::time::Duration;

use contract::schema::MetricClass;
use loadgen::protocols::mcp::run::{Report, RunConfig, run};
use loadgen::protocols::mcp::session::Era;

pub fn fake_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/fake_server.py")
}

/// A vault of a few notes in folders, and a picture.
pub fn vault() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (rel, body) in [
        ("inbox/apple pie.md", "# Apple pie\nflour, apples\n"),
        ("inbox/pear.md", "# Pear\n"),
        ("projects/garden/plan.md", "# Plan\n[[pear]]\n"),
        ("projects/garden/seeds.md", "# Seeds\n"),
        ("daily/2026-12-01.md", "# Monday\n"),
        ("assets/photo.png", "\u{89}PNG"),
    ] {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    d
}

pub fn fake(mode: &str, vault: &Path, extra: &[&str]) -> RunConfig {
    let mut argv = vec![
        "python3".to_owned(),
        fake_server().display().to_string(),
        mode.to_owned(),
        vault.display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let mut cfg = RunConfig::new(argv, std::fs::canonicalize(vault).unwrap());
    cfg.calls_per_op = 10;
    cfg.warm_lists = 3;
    cfg
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What every complete run must show, whatever the server.
fn check_report(r: &Report, want_calls_per_level: u64) {
    let b = r.boot;
    assert!(
        b.first_byte <= b.handshake && b.handshake <= b.first_list,
        "{b:?}"
    );
    assert!(r.tools > 0 && r.list_bytes > 0, "{r:?}");
    assert_eq!(r.levels.len(), 2);
    for (n, l) in &r.levels {
        assert_eq!(l.calls, want_calls_per_level, "level {n}");
        assert_eq!(l.protocol_errors, 0, "level {n}");
        assert_eq!(
            l.latency_us.values().map(Vec::len).sum::<usize>() as u64,
            l.calls
        );
    }
    assert!(r.shutdown.is_some());
    assert_eq!(
        r.shutdown_by,
        Some(loadgen::protocols::mcp::stdio::EndedBy::Stdin),
        "it exits when stdin closes"
    );
    assert!(r.peak_rss_kib > 0);
    assert_eq!(r.traffic.unknown_ids, 0);
    let keys = r.keys();
    let get = |k: &str| {
        keys.iter()
            .find(|kv| kv.key == k)
            .unwrap_or_else(|| panic!("no key {k} in {keys:?}"))
    };
    assert_eq!(get("mcp_boot.tools").value, r.tools as f64);
    assert_eq!(get("mcp_boot.tools").class, MetricClass::Exact);
    assert_eq!(get("mcp_boot.first_list_us").class, MetricClass::Timing);
    for kv in &keys {
        let parsed: contract::key::MetricKey = kv.key.parse().unwrap();
        assert_eq!(parsed.to_string(), kv.key);
    }
}

#[test]
fn a_server_of_the_stateless_revision_is_measured_and_named() {
    let v = vault();
    let cfg = fake("stateless", v.path(), &[]);
    let r = rt().block_on(run(&cfg)).unwrap();
    assert_eq!(r.negotiated.era, Era::Stateless);
    assert_eq!(r.negotiated.version, "2026-07-28");
    assert!(r.negotiated.discovered);
    assert_eq!(r.negotiated.server_name, "fake-stateless");
    // Four tools, two a page: the cursor was followed.
    assert_eq!((r.tools, r.list_pages), (4, 2));
    // Every op has a tool: 4 ops × 10 calls at each level.
    check_report(&r, 40);
    let keys = r.keys();
    for tool in [
        "read_text_file",
        "read_multiple_files",
        "list_directory",
        "search_files",
    ] {
        for k in [
            format!("mcp_calls_c1.{tool}.p50_us"),
            format!("mcp_calls_c8.{tool}.p99_us"),
        ] {
            assert!(keys.iter().any(|kv| kv.key == k), "{k}");
        }
    }
    // The seeded paths exist: no read failed.
    assert_eq!(r.levels[&1].tool_errors, 0);
    assert_eq!(
        loadgen::protocols::mcp::run::era_line(&r.negotiated),
        "stateless 2026-07-28"
    );
}

#[test]
fn a_handshake_server_answering_the_older_revision_is_measured_in_it() {
    let v = vault();
    let cfg = fake("legacy", v.path(), &["2025-06-18"]);
    let r = rt().block_on(run(&cfg)).unwrap();
    assert_eq!(r.negotiated.era, Era::Handshake);
    assert_eq!(r.negotiated.version, "2025-06-18");
    assert!(!r.negotiated.discovered);
    check_report(&r, 40);
}

#[test]
fn a_handshake_server_that_ignores_the_probe_is_found_after_the_probe_bound() {
    let v = vault();
    let mut cfg = fake("legacy-mute", v.path(), &[]);
    cfg.probe = Duration::from_millis(300);
    let r = rt().block_on(run(&cfg)).unwrap();
    assert_eq!(
        (r.negotiated.era, r.negotiated.version.as_str()),
        (Era::Handshake, "2025-11-25")
    );
    assert!(
        r.boot.handshake >= Duration::from_millis(300),
        "{:?}",
        r.boot
    );
    check_report(&r, 40);
}

#[test]
fn a_stateless_server_slower_than_the_probe_is_found_by_its_refusal_of_initialize() {
    let v = vault();
    let mut cfg = fake("stateless", v.path(), &[]);
    // No Python answers within a millisecond of its spawn.
    cfg.probe = Duration::from_millis(1);
    let r = rt().block_on(run(&cfg)).unwrap();
    assert_eq!(
        (r.negotiated.era, r.negotiated.discovered),
        (Era::Stateless, false)
    );
    assert_eq!(r.traffic.late, 1, "the discover answer came after its wait");
    check_report(&r, 40);
}

/// The reference filesystem server (`tools/mcp`, pinned by its lock file).
#[test]
#[ignore = "slow: real servers (npm ci --prefix tools/mcp)"]
fn the_reference_filesystem_server_is_measured() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools/mcp/node_modules/.bin/mcp-server-filesystem");
    assert!(
        bin.exists(),
        "{} is missing: run npm ci --prefix tools/mcp",
        bin.display()
    );
    let v = vault();
    let root = std::fs::canonicalize(v.path()).unwrap();
    let mut cfg = RunConfig::new(
        vec![bin.display().to_string(), root.display().to_string()],
        root,
    );
    cfg.calls_per_op = 10;
    let r = rt().block_on(run(&cfg)).unwrap();
    assert_eq!(r.negotiated.era, Era::Handshake);
    assert_eq!(r.negotiated.version, "2025-11-25");
    assert_eq!(r.negotiated.server_name, "secure-filesystem-server");
    assert!(r.tools >= 10, "{}", r.tools);
    assert_eq!(
        r.tool_map.read.as_deref(),
        Some("read_text_file"),
        "{:?}",
        r.tool_map
    );
    check_report(&r, 40);
    assert_eq!(r.levels[&1].tool_errors, 0, "{:?}", r.levels[&1]);
    // Node answers on its main thread: its CPU moves with every call.
    for l in r.levels.values() {
        assert!(l.cpu_us > 0, "{l:?}");
    }
    eprintln!("{:#?}", r.keys());
}

//! CouchDB replication as Self-hosted LiveSync uses it, against the real pouchdb-server
//! (slow: a real server, so `#[ignore]`d; `.ci/run` installs it with `npm ci --prefix
//! tools/pouchdb`): `load push --protocol couchdb` leaves LiveSync's documents in the
//! database, checked by reading `_all_docs` straight from the server, and `load pull` brings
//! the vault back byte for byte; `record small-couchdb` against both presets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;

use loadgen::protocols::webdav::ServerCommand;
use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

/// A free loopback address (the port is taken back by the server a moment later).
fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// `GET path` on `addr` with a plain socket (not the adapter): the body as JSON.
fn get_json(addr: SocketAddr, path: &str) -> Value {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an answer head");
    let head = String::from_utf8_lossy(&all[..at]);
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    serde_json::from_slice(&all[at + 4..]).unwrap()
}

fn write(dir: &Path, rel: &str, body: &[u8]) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
#[ignore = "slow: real servers"]
fn a_pushed_vault_is_livesync_documents_on_the_server_and_pulls_back_identical() {
    let home = tempfile::tempdir().unwrap();
    let vault = home.path().join("vault");
    let note: String = (0..300).map(|i| format!("line {i} of a note\n")).collect();
    write(&vault, "Notes/one.md", note.as_bytes());
    write(&vault, "Copies/same as one.md", note.as_bytes());
    write(
        &vault,
        "_private/underscore.md",
        b"a path LiveSync prefixes\n",
    );
    write(
        &vault,
        "Notes/Caf\u{e9}.md",
        "caf\u{e9} cr\u{e8}me \u{1f642}\n".as_bytes(),
    );
    let png: Vec<u8> = (0..40_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    write(&vault, "Assets/img.png", &png);

    let def = loadgen::protocols::preset("pouchdb-memory").unwrap();
    let addr = free_addr();
    let server = ServerCommand::prepare(&def, &home.path().join("server"), addr)
        .unwrap()
        .start()
        .unwrap();
    let url = format!("http://{addr}/vault");
    vb!(home.path())
        .args([
            "load",
            "push",
            "--protocol",
            "couchdb",
            "--url",
            &url,
            "--vault",
        ])
        .arg(&vault)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();

    let all = get_json(addr, "/vault/_all_docs?include_docs=true");
    let rows = all["rows"].as_array().unwrap();
    let docs: Vec<&Value> = rows.iter().map(|r| &r["doc"]).collect();
    let chunks: std::collections::BTreeMap<&str, &Value> = docs
        .iter()
        .filter(|d| d["_id"].as_str().unwrap().starts_with("h:"))
        .map(|d| (d["_id"].as_str().unwrap(), *d))
        .collect();
    assert!(!chunks.is_empty());
    for (id, c) in &chunks {
        assert_eq!(c["type"], "leaf", "{id}");
        assert!(c["data"].is_string(), "{id}");
        assert!(!id.starts_with("h:+"), "unencrypted chunks: {id}");
    }
    let files: Vec<&Value> = docs
        .iter()
        .filter(|d| matches!(d["type"].as_str(), Some("plain" | "newnote")))
        .copied()
        .collect();
    assert_eq!(files.len(), 5, "{files:?}");
    let mut by_path = std::collections::BTreeMap::new();
    for f in &files {
        let path = f["path"].as_str().unwrap();
        let children = f["children"].as_array().unwrap();
        assert!(!children.is_empty(), "{path}");
        for c in children {
            assert!(
                chunks.contains_key(c.as_str().unwrap()),
                "{path}: chunk {c} missing"
            );
        }
        let on_disk = std::fs::read(vault.join(path)).unwrap();
        assert_eq!(f["size"].as_u64(), Some(on_disk.len() as u64), "{path}");
        assert!(f["ctime"].is_u64() && f["mtime"].is_u64(), "{path}");
        let want = if path.ends_with(".md") {
            "plain"
        } else {
            "newnote"
        };
        assert_eq!(f["type"], want, "{path}");
        by_path.insert(path.to_owned(), *f);
    }
    // LiveSync's ids: lower-cased paths, `/` before a leading `_`.
    assert_eq!(
        by_path["_private/underscore.md"]["_id"],
        "/_private/underscore.md"
    );
    assert_eq!(by_path["Notes/one.md"]["_id"], "notes/one.md");
    // Duplicate bodies share their chunks.
    assert_eq!(
        by_path["Notes/one.md"]["children"],
        by_path["Copies/same as one.md"]["children"]
    );
    // Text chunks hold the text, binary chunks base64 of the bytes.
    let first = by_path["Notes/one.md"]["children"][0].as_str().unwrap();
    assert!(note.starts_with(chunks[first]["data"].as_str().unwrap()));
    let version = get_json(addr, "/vault/obsydian_livesync_version");
    assert_eq!(version["type"], "versioninfo");
    let milestone = get_json(addr, "/vault/_local/obsydian_livesync_milestone");
    assert_eq!(milestone["type"], "milestoneinfo");

    let back = home.path().join("back");
    vb!(home.path())
        .args([
            "load",
            "pull",
            "--protocol",
            "couchdb",
            "--url",
            &url,
            "--vault",
        ])
        .arg(&back)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    for p in by_path.keys() {
        assert_eq!(
            std::fs::read(back.join(p)).unwrap(),
            std::fs::read(vault.join(p)).unwrap(),
            "{p}"
        );
    }
    drop(server);
}

#[test]
fn a_couchdb_target_without_a_database_is_refused_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let out = vb!(home.path())
        .args([
            "load",
            "push",
            "--protocol",
            "couchdb",
            "--url",
            "http://127.0.0.1:9/",
            "--vault",
        ])
        .arg(home.path())
        .assert()
        .failure()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains("names no database"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
#[ignore = "slow: real servers"]
fn small_couchdb_records_byte_identical_against_both_presets() {
    for preset in ["pouchdb-memory", "pouchdb-server"] {
        let home = tempfile::tempdir().unwrap();
        let out = home.path().join("out");
        // Where the user runs it: nothing of the server's may land here (pouchdb-server
        // writes `_users/` and `pouch__all_dbs__/` where it runs).
        let cwd = home.path().join("cwd");
        std::fs::create_dir(&cwd).unwrap();
        record_loose(
            home.path(),
            &["small-couchdb", "--target", preset, "--samples", "1"],
        )
        .current_dir(&cwd)
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success();
        let b: Value =
            serde_json::from_slice(&std::fs::read(out.join("small-couchdb.json")).unwrap())
                .unwrap();
        let value = |k: &str| {
            b["metrics"][k]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{preset}: {k} missing: {}", b["metrics"]))
        };
        let left: Vec<_> = std::fs::read_dir(&cwd)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            left.is_empty(),
            "{preset} wrote into the working directory: {left:?}"
        );
        assert_eq!(value("cold_pull.byte_identical"), 1.0, "{preset}");
        assert_eq!(value("cold_push.files"), 100.0, "{preset}");
        assert_eq!(value("idle_resync.mismatched"), 0.0, "{preset}");
        assert!(value("cold_push.docs_written") > 100.0, "{preset}");
        assert!(value("folder_rename.revisions") > 0.0, "{preset}");
        for key in [
            "route.bulk-docs.c1.p50_us",
            "route.changes.c4.p50_us",
            "route.revs-diff.c1.p50_us",
            "route.bulk-get.c4.p50_us",
            "route.all-docs-keys.c1.p50_us",
            "cold_push.server.cpu_ms",
            "edit.p50_ms",
        ] {
            assert!(value(key) > 0.0, "{preset}: {key}");
        }
    }
}

//! Recording and A/B against the real third-party WebDAV servers (slow: real servers, so
//! `#[ignore]`d; `.ci/run` installs the servers and runs them): a `small-webdav` recording
//! against `rclone-webdav` that `verify` accepts and an A/B between two presets at R = 2; and
//! the refusals of a protocol mismatch (fast: checked before any server starts).

use std::path::Path;

use serde_json::Value;
use testkit::{procs_with, vb};

use crate::common::{LOOSE_GATE, record_loose};

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
#[ignore = "slow: real servers"]
fn small_webdav_against_rclone_records_and_verifies() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    record_loose(
        home.path(),
        &[
            "small-webdav",
            "--target",
            "rclone-webdav",
            "--samples",
            "2",
        ],
    )
    .arg("--out")
    .arg(&out)
    .arg("--work-dir")
    .arg(home.path().join("work"))
    .timeout(std::time::Duration::from_secs(600))
    .assert()
    .success();
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let b = read(&out.join("small-webdav.json"));
    let value = |k: &str| {
        b["metrics"][k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {}", b["metrics"]))
    };
    assert_eq!(value("cold_pull.byte_identical"), 1.0);
    assert_eq!(value("cold_push.files"), 100.0);
    assert_eq!(value("idle_resync.mismatched"), 0.0);
    // A Depth 1 walk is one PROPFIND per folder plus the root.
    assert_eq!(
        value("idle_resync.requests"),
        value("cold_push.requests.mkcol") + 1.0
    );
    assert_eq!(value("edit.poll_interval_ms"), 100.0);
    assert_eq!(value("folder_rename.requests"), 1.0);
    for key in [
        "route.propfind-depth1.c4.p50_us",
        "route.put-file.c1.p50_us",
        "route.get-file.c4.rps",
        "route.move.c1.p99_us",
        "server.cpu_s",
        "server.peak_rss_mib",
        // Per-phase server cost over the preset's process tree, the obsync phases' keys.
        "cold_push.server.cpu_ms",
        "cold_push.server.cpu_us_per_file",
        "cold_pull.server.cpu_us_per_file",
        "idle_resync.server.cpu_us_per_request",
        "idle_resync.server.syscalls_per_request",
        "edit.server.cpu_us_per_request",
        "route.get-file.c1.server.cpu_us_per_request",
    ] {
        assert!(value(key) > 0.0, "{key}");
    }
    assert!(
        b["metrics"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("cold_push.server.thread_cpu_ms.")),
        "thread keys"
    );
    let prov = read(&out.join("small-webdav.provenance.json"));
    let text = prov.to_string();
    assert!(
        text.contains("rclone v"),
        "the version output is the build identity"
    );
}

/// `--cost` wraps a third-party server too: nginx's master and workers under callgrind (a
/// dump to every process of the tree) and under strace, so its fsyncs per note are exact keys
/// like the reference server's `/metrics` counters.
#[test]
#[ignore = "slow: real servers under valgrind and strace"]
fn cost_sample_of_nginx_counts_instructions_and_syscalls_by_name() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    crate::common::record_loose(
        home.path(),
        &[
            "small-webdav",
            "--target",
            "nginx-webdav",
            "--cost",
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
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let m = &read(&out.join("small-webdav.json"))["metrics"];
    let get = |k: &str| {
        let e = &m[k];
        (
            e["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{k} missing: {m}")),
            e["class"].as_str().unwrap_or("").to_owned(),
        )
    };
    let (ipf, class) = get("cold_push.server.instructions_per_file");
    assert!(ipf > 0.0 && class == "cost", "{ipf} {class}");
    // nginx's dav module writes each PUT to a temporary file and renames it into place.
    assert_eq!(
        get("cold_push.server.syscalls.rename"),
        (100.0, "exact".into())
    );
    for name in ["fsync", "fdatasync"] {
        let (_, class) = get(&format!("cold_push.server.syscalls.{name}"));
        assert_eq!(class, "exact", "{name}");
    }
    // small-webdav's route steps are time-bounded: their counts follow throughput.
    let (_, class) = get("route.put-file.c1.server.syscalls.rename");
    assert_eq!(class, "resource");
    // Where the time goes: nginx never flushes, so no flush shows in its blocked time, while
    // the push's renames and writes do.
    let side = read(&out.join("small-webdav.provenance.json"));
    let blocked = &side["cost"]["blocked"]["cold_push"];
    let names: Vec<&str> = blocked["syscalls"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocked time: {}", side["cost"]))
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(!names.is_empty(), "{blocked}");
    assert!(
        !names
            .iter()
            .any(|n| ["fsync", "fdatasync", "sync_file_range", "syncfs"].contains(n)),
        "{names:?}"
    );
    assert!(names.contains(&"rename"), "{names:?}");
    let top = side["cost"]["functions"]["cold_push"]["functions"]
        .as_array()
        .unwrap_or_else(|| panic!("no functions: {}", side["cost"]));
    assert!(!top.is_empty());
}

#[test]
#[ignore = "slow: real servers"]
fn ab_between_two_presets_writes_a_result() {
    let home = tempfile::tempdir().unwrap();
    let gate = home.path().join("gate.toml");
    std::fs::write(&gate, LOOSE_GATE).unwrap();
    let res = home.path().join("ab.json");
    let o = vb!(home.path())
        .args([
            "ab",
            "--a",
            "apache-webdav",
            "--b",
            "nginx-webdav",
            "--scenario",
            "small-webdav",
            "--rounds",
            "2",
            "--json",
            "--gate-config",
        ])
        .arg(&gate)
        .arg("--out")
        .arg(&res)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .get_output()
        .clone();
    assert!(
        o.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = read(&res);
    assert_eq!(doc["kind"], "vaultbench.ab");
    assert_eq!(doc["rounds"].as_array().unwrap().len(), 2);
    for key in [
        "cold_push.wall_ms",
        "cold_pull.wall_ms",
        "server.cpu_s",
        "cold_push.server.cpu_us_per_file",
    ] {
        assert!(doc["metrics"][key].is_object(), "{key}: {}", doc["metrics"]);
    }
    let text = doc.to_string();
    assert!(
        text.contains("Apache/") && text.contains("nginx/"),
        "identities"
    );
}

/// A WebDAV server that is no preset, typed out in full as a command line: rclone under a
/// base URL (so the vault lives under a WebDAV root that is not `/`), with credentials given
/// by `--auth`, the protocol by `--protocol`, and `{host}`/`{port}` placeholders. It records
/// `small-webdav` byte-identical and `verify` accepts the recording.
#[test]
#[ignore = "slow: real servers"]
fn a_webdav_server_typed_as_a_command_line_records_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    let target = "rclone serve webdav {data} --addr {host}:{port} --baseurl /vault \
                  --config {data}/../rclone.conf --cache-dir {data}/../rclone-cache \
                  --user 'bench user' --pass 's3cret pass'";
    let res = record_loose(home.path(), &["small-webdav", "--samples", "1"])
        .arg("--target")
        .arg(target)
        .args(["--protocol", "webdav", "--root", "/vault/"])
        .args(["--auth", "bench user:s3cret pass"])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{err}");
    assert!(err.contains("target: rclone serve webdav"), "{err}");
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let b = read(&out.join("small-webdav.json"));
    let value = |k: &str| {
        b["metrics"][k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(value("cold_pull.byte_identical"), 1.0);
    assert_eq!(value("cold_push.files"), 100.0);
    assert_eq!(value("idle_resync.mismatched"), 0.0);
    let side = read(&out.join("small-webdav.provenance.json"));
    assert!(
        side["target"]["version"]
            .as_str()
            .unwrap()
            .starts_with("rclone v"),
        "{}",
        side["target"]
    );
}

/// `kill -9`, SIGINT and SIGTERM of `record` against Apache mid-sample: Apache's workers
/// ignore SIGTERM and have no parent-death signal; within 5 s none of them remains.
#[test]
#[ignore = "slow: real servers killed mid-sample"]
fn a_killed_record_leaves_no_apache_worker() {
    for signal in [libc::SIGKILL, libc::SIGINT, libc::SIGTERM] {
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("work");
        let gate = home.path().join("gate.toml");
        std::fs::write(&gate, LOOSE_GATE).unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args([
                "record",
                "small-webdav",
                "--samples",
                "3",
                "--target",
                "apache-webdav",
            ])
            .arg("--gate-config")
            .arg(&gate)
            .arg("--out")
            .arg(home.path().join("out"))
            .arg("--work-dir")
            .arg(&work)
            .env("VAULTBENCH_CACHE", home.path().join("cache"))
            .env("VAULTBENCH_LOCK", home.path().join("machine.lock"))
            .env("XDG_DATA_HOME", home.path().join("data"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Apache's master and workers all carry the data dir (under the work dir) in argv.
        let marker = work.display().to_string();
        let apache = || -> Vec<u32> {
            procs_with(&marker)
                .into_iter()
                .filter(|(_, cmd)| cmd.contains("apache2"))
                .map(|(p, _)| p)
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while apache().len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(apache().len() >= 2, "Apache and a worker never started");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let _ = child.wait();
        let t0 = std::time::Instant::now();
        while !apache().is_empty() && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            apache().is_empty(),
            "signal {signal}: left behind after 5 s: {:?}",
            apache()
        );
    }
}

/// Checked before any sample, so no server needs to be installed: exit 2, one line naming
/// both sides, nothing written.
#[test]
fn a_protocol_mismatch_is_refused_naming_both() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out");
    let cases: [(&[&str], &str); 5] = [
        (
            &["record", "small", "--target", "nginx-webdav"],
            "scenario small speaks obsync-v1 but --target nginx-webdav speaks webdav: choose a target that speaks obsync-v1 (ref, a command line with --protocol obsync-v1) or a webdav scenario (",
        ),
        (
            &["record", "small-webdav", "--target", "ref"],
            "scenario small-webdav speaks webdav but --target ref speaks obsync-v1: choose a target that speaks webdav (apache-webdav",
        ),
        (
            &["record", "small", "--protocol", "webdav"],
            "--protocol webdav disagrees with scenario small, which speaks obsync-v1",
        ),
        (
            &[
                "record",
                "small-webdav",
                "--target",
                "rclone-webdav",
                "--protocol",
                "obsync",
            ],
            "--protocol obsync-v1 disagrees with scenario small-webdav, which speaks webdav",
        ),
        (
            &[
                "ab",
                "--a",
                "apache-webdav",
                "--b",
                "ref",
                "--scenario",
                "small-webdav",
            ],
            "--b ref speaks obsync-v1",
        ),
    ];
    for (args, want) in cases {
        let o = vb!(home.path())
            .args(args)
            .arg("--out")
            .arg(&out)
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

/// A WebDAV server whose every folder lists one more folder below it, as a Python command-line
/// target: the walk of the first pull stops at `--webdav-max-depth` (given here as 4), the
/// sample fails naming the bound and the flag, and `record` ends far inside its sample
/// timeout with exit 3, nothing written.
#[test]
#[ignore = "slow: a fake server through whole samples"]
fn a_walk_that_never_ends_stops_at_its_bound_not_the_sample_timeout() {
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("deep_dav.py");
    std::fs::write(&script, DEEP_DAV).unwrap();
    crate::common::record_stops_at_its_bound(
        home.path(),
        &[
            "small-webdav".into(),
            "--target".into(),
            format!("python3 {} {{port}} {{data}}", script.display()),
            "--protocol".into(),
            "webdav".into(),
            "--webdav-max-depth".into(),
            "4".into(),
        ],
        "small-webdav.json",
        &["--webdav-max-depth", "4"],
    );
}

/// The fake for the test above: accepts every write, and answers a PROPFIND of any folder
/// with the folder and one folder below it.
const DEEP_DAV: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def answer(self, code, body=b"", ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("DAV", "1, 2")
        self.end_headers()
        self.wfile.write(body)
    def drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
    def do_OPTIONS(self):
        self.drain(); self.answer(200)
    def do_PUT(self):
        self.drain(); self.answer(201)
    def do_MKCOL(self):
        self.drain(); self.answer(201)
    def do_DELETE(self):
        self.drain(); self.answer(204)
    def do_MOVE(self):
        self.drain(); self.answer(201)
    def do_GET(self):
        self.drain(); self.answer(404)
    def do_PROPFIND(self):
        self.drain()
        p = self.path if self.path.endswith("/") else self.path + "/"
        def entry(href):
            return ("<D:response><D:href>%s</D:href><D:propstat><D:prop><D:resourcetype>"
                    "<D:collection/></D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK"
                    "</D:status></D:propstat></D:response>" % href)
        body = ('<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">'
                + entry(p) + entry(p + "deeper/") + "</D:multistatus>").encode()
        self.answer(207, body, "application/xml")

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

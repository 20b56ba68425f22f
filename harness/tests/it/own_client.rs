//! Client mode (the scenario's own sync client as the devices), end to end: every phase run
//! through a client (a file-copying stand-in against the reference server, and rclone against
//! the Apache WebDAV preset, slow: real servers), the client's own keys beside the server's,
//! and the hostile clients (one that never exits, one that writes beside its folder), each a
//! one-line error naming the phase with nothing left running. The refusals of what a client
//! cannot run are fast: checked before any sample.

use std::path::Path;

use serde_json::Value;
use testkit::{procs_with, vb};

use crate::common::{record_loose, record_stops_at_its_bound};

/// A client-mode scenario: every phase a client can run, `rounds` edit rounds, the given
/// `[client]` table.
pub(crate) fn scenario(
    home: &Path,
    profile: &str,
    protocol: &str,
    rounds: u32,
    client: &str,
) -> String {
    let text = format!(
        "name = \"own-client\"\ndoc = \"test\"\nprofile = \"{profile}\"\nprotocol = \"{protocol}\"\nsamples = 1\n\
         [client]\n{client}\n\
         [[phase]]\nkind = \"cold_start\"\n[[phase]]\nkind = \"cold_push\"\n[[phase]]\nkind = \"cold_pull\"\n\
         [[phase]]\nkind = \"idle_resync\"\n[[phase]]\nkind = \"edit_propagation\"\nrounds = {rounds}\n\
         [[phase]]\nkind = \"folder_rename\"\n"
    );
    let f = home.join("own-client.toml");
    std::fs::write(&f, text).unwrap();
    f.display().to_string()
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Records `scenario_file` against `target` (loose gate, one sample) into `home/out` and
/// returns the recording's metrics.
fn record_client(home: &Path, scenario_file: &str, target: &str) -> Value {
    let out = home.join("out");
    let assert = record_loose(
        home,
        &[
            "--scenario-file",
            scenario_file,
            "--target",
            target,
            "--pre-check",
            "0s",
        ],
    )
    .arg("--out")
    .arg(&out)
    .arg("--work-dir")
    .arg(home.join("work"))
    .timeout(std::time::Duration::from_secs(600))
    .assert();
    let o = assert.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    vb!(home).arg("verify").arg(&out).assert().success();
    read(&out.join("own-client.json"))["metrics"].clone()
}

/// The client keys of every phase a client ran, and the byte-identical pull.
fn assert_client_phases(m: &Value, rounds: f64) {
    let value = |k: &str| {
        m[k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {m}"))
    };
    assert_eq!(value("cold_pull.byte_identical"), 1.0);
    for (phase, runs) in [
        ("cold_push", 1.0),
        ("cold_pull", 1.0),
        ("idle_resync", 1.0),
        ("edit", 2.0 * rounds),
        ("folder_rename", 2.0),
    ] {
        assert_eq!(value(&format!("{phase}.client.runs")), runs, "{phase}");
        assert!(value(&format!("{phase}.client.wall_ms")) > 0.0, "{phase}");
        assert!(
            value(&format!("{phase}.client.peak_rss_mib")) > 0.0,
            "{phase}"
        );
        let share = value(&format!("{phase}.client.startup_share"));
        assert!(share > 0.0 && share <= 1.0, "{phase}: {share}");
        assert!(
            value(&format!("{phase}.client.startup_ms")) > 0.0,
            "{phase}"
        );
        // The server's cost per phase, as for any target.
        assert!(value(&format!("{phase}.server.cpu_ms")) >= 0.0, "{phase}");
    }
    assert!(value("edit.p50_ms") > 0.0);
    assert!(value("folder_rename.propagate_ms") > 0.0);
    assert!(value("cold_push.files") > 0.0);
    assert_eq!(value("cold_push.files"), value("cold_pull.files"));
    // The client's requests are not seen: no key counts them.
    for k in [
        "cold_push.requests",
        "idle_resync.requests",
        "folder_rename.requests",
    ] {
        assert!(m.get(k).is_none(), "{k} is written in client mode");
    }
}

/// A stand-in client that syncs through a folder of the test (`remote`) with `cp`, so every
/// phase runs through client runs against any target.
fn copying_client(remote: &Path) -> String {
    let r = remote.display();
    format!(
        "push = \"sh -c 'rm -rf \\\"$1\\\" && cp -R \\\"$0\\\" \\\"$1\\\"' {{dir}} '{r}'\"\n\
         pull = \"sh -c 'rm -rf \\\"$0\\\" && cp -R \\\"$1\\\" \\\"$0\\\"' {{dir}} '{r}'\"\n\
         setup = \"sh -c 'echo {{device}} {{url}} > {{state}}/setup'\"\n\
         startup = \"true\"\n\
         timeout = \"60s\""
    )
}

#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_copying_client_runs_every_phase_and_pulls_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let client = copying_client(&home.path().join("remote"));
    let f = scenario(home.path(), "small", "obsync-v1", 3, &client);
    let m = record_client(home.path(), &f, "ref");
    assert_client_phases(&m, 3.0);
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// rclone as a one-way WebDAV client of Apache: a config written into `{state}` by `setup`
/// (rclone obscures the password itself), `rclone sync` each way.
#[test]
#[ignore = "slow: real servers"]
fn rclone_against_apache_webdav_runs_every_phase_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let conf = "--config {state}/rclone.conf";
    let client = format!(
        "setup = \"rclone config create vb webdav url={{url}} vendor=other user={{auth_user}} pass={{auth_pass}} {conf}\"\n\
         push = \"rclone sync {{dir}} vb: {conf}\"\n\
         pull = \"rclone sync vb: {{dir}} {conf}\"\n\
         startup = \"rclone version\"\n\
         timeout = \"2m\""
    );
    let f = scenario(home.path(), "small", "webdav", 3, &client);
    let m = record_client(home.path(), &f, "apache-webdav");
    assert_client_phases(&m, 3.0);
    // rclone is a Go binary: its CPU is its own, read from wait4.
    assert!(m["cold_push.client.cpu_ms"]["value"].as_f64().unwrap() > 0.0);
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// rclone against Apache through the recording proxy (the default): every phase runs, the
/// pull is byte-identical, and in every phase the proxy counted exactly the requests Apache
/// logged (its access log in the data dir, counted per phase by a `[[count]]` rule).
#[test]
#[ignore = "slow: real servers"]
fn rclone_through_the_proxy_counts_what_apache_logs() {
    let home = tempfile::tempdir().unwrap();
    let conf = "--config {state}/rclone.conf";
    let client = format!(
        "setup = \"rclone config create vb webdav url={{url}} vendor=other user={{auth_user}} pass={{auth_pass}} {conf}\"\n\
         push = \"rclone sync {{dir}} vb: {conf}\"\n\
         pull = \"rclone sync vb: {{dir}} {conf}\"\n\
         startup = \"rclone version\"\n\
         timeout = \"2m\"\n\
         log_requests = \"access\"\n\
         [[count]]\nname = \"access\"\nregex = '^'\nsource = \"file:access.log\""
    );
    let f = scenario(home.path(), "small", "webdav", 3, &client);
    let m = record_client(home.path(), &f, "apache-webdav");
    assert_client_phases(&m, 3.0);
    let value = |k: &str| {
        m[k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {m}"))
    };
    for phase in [
        "cold_push",
        "cold_pull",
        "idle_resync",
        "edit",
        "folder_rename",
    ] {
        let proxied = value(&format!("{phase}.proxy.requests"));
        assert!(proxied > 0.0, "{phase}");
        assert_eq!(proxied, value(&format!("{phase}.log.access")), "{phase}");
        // The routes' counts add up to the phase's, and every one was answered.
        let routes: Vec<(&String, f64)> = m
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{phase}.proxy."))
                    && k.ends_with(".requests")
                    && k.matches('.').count() == 3
            })
            .map(|(k, v)| (k, v["value"].as_f64().unwrap()))
            .collect();
        assert!(!routes.is_empty(), "{phase}");
        assert_eq!(
            routes.iter().map(|(_, n)| n).sum::<f64>(),
            proxied,
            "{phase}: {routes:?}"
        );
        for (k, _) in &routes {
            let route = k.trim_end_matches(".requests");
            assert_eq!(value(&format!("{route}.failed")), 0.0, "{route}");
            assert!(value(&format!("{route}.p50_us")) > 0.0, "{route}");
        }
    }
    // A cold push uploads every file of the vault: one PUT each, under the vault's {path}.
    assert_eq!(
        value("cold_push.proxy.PUT_{path}.requests"),
        value("cold_push.files")
    );
    assert_eq!(
        value("cold_push.proxy.PUT_{path}.status_2xx"),
        value("cold_push.files")
    );
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// `[client] checkpoints`: rclone pushes the vault into Apache slice by slice (20 files a
/// run), so the cold push has a checkpoint per run and the server's cost per file is fitted
/// against n, as a built-in push's is; the pull is still byte-identical.
#[test]
#[ignore = "slow: real servers"]
fn rclone_pushes_in_checkpoint_slices_and_the_servers_cost_is_fitted() {
    let home = tempfile::tempdir().unwrap();
    let conf = "--config {state}/rclone.conf";
    let text = format!(
        "name = \"own-client\"\ndoc = \"test\"\nprofile = \"small\"\nprotocol = \"webdav\"\nsamples = 1\n\
         [client]\n\
         setup = \"rclone config create vb webdav url={{url}} vendor=other user={{auth_user}} pass={{auth_pass}} {conf}\"\n\
         push = \"rclone copy {{dir}} vb: {conf}\"\n\
         pull = \"rclone sync vb: {{dir}} {conf}\"\n\
         timeout = \"2m\"\n\
         checkpoints = true\n\
         [[phase]]\nkind = \"cold_push\"\ncheckpoint_every = 20\n[[phase]]\nkind = \"cold_pull\"\n"
    );
    let f = home.path().join("own-client.toml");
    std::fs::write(&f, text).unwrap();
    let m = record_client(home.path(), &f.display().to_string(), "apache-webdav");
    let value = |k: &str| {
        m[k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {m}"))
    };
    assert_eq!(value("cold_pull.byte_identical"), 1.0);
    let files = value("cold_push.files");
    assert_eq!(files, value("cold_pull.files"));
    let slices = (files / 20.0).ceil();
    assert!(slices >= 3.0, "{files} files");
    // One client run per slice, and a checkpoint window (server CPU per file) after each.
    assert_eq!(value("cold_push.client.runs"), slices);
    for i in 1..(slices as u64) {
        let cp = format!("cold_push.checkpoint.{:07}", i * 20);
        assert!(value(&format!("{cp}.server_cpu_us_per_file")) > 0.0, "{cp}");
        assert!(value(&format!("{cp}.files_per_s")) > 0.0, "{cp}");
    }
    // Every file went up once: one PUT a file, however many runs.
    assert_eq!(value("cold_push.proxy.PUT_{path}.requests"), files);
    assert!(
        m.get("cold_push.growth.server_cpu.import_exponent")
            .is_some(),
        "no growth fit of the server's CPU: {m}"
    );
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// `[client] checkpoints` (and `--client-checkpoints`) is client mode's: without a client it
/// is refused in one line before anything runs.
#[test]
fn client_checkpoints_without_a_client_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let o = vb!(home.path())
        .args(["record", "small", "--client-checkpoints"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--client-checkpoints is for client mode"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// `ab` in client mode: the same rclone client against Apache and nginx, each arm with its own
/// fresh server per sample and its own proxy; the result analyses the proxy's keys beside the
/// server's, and the request counts of the cold push (one PUT a file) are the same in both.
#[test]
#[ignore = "slow: real servers, an A/B of two"]
fn ab_of_two_webdav_servers_through_the_same_client() {
    let home = tempfile::tempdir().unwrap();
    let conf = "--config {state}/rclone.conf";
    let client = format!(
        "setup = \"rclone config create vb webdav url={{url}} vendor=other user={{auth_user}} pass={{auth_pass}} {conf}\"\n\
         push = \"rclone sync {{dir}} vb: {conf}\"\n\
         pull = \"rclone sync vb: {{dir}} {conf}\"\n\
         timeout = \"2m\""
    );
    let f = scenario(home.path(), "small", "webdav", 2, &client);
    let gate = home.path().join("gate.toml");
    std::fs::write(&gate, testkit::LOOSE_GATE).unwrap();
    let res = home.path().join("ab.json");
    let o = vb!(home.path())
        .args([
            "ab",
            "--a",
            "apache-webdav",
            "--b",
            "nginx-webdav",
            "--rounds",
            "3",
            "--pre-check",
            "0s",
        ])
        .arg("--scenario-file")
        .arg(&f)
        .arg("--gate-config")
        .arg(&gate)
        .arg("--out")
        .arg(&res)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(900))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&res).unwrap()).unwrap();
    // Timing and resource keys are analysed into verdicts; exact counts are facts, the same
    // in both arms or a difference.
    let metrics = doc["metrics"].as_object().unwrap();
    for k in [
        "cold_push.proxy.PUT_{path}.p50_us",
        "cold_pull.proxy.max_in_flight",
        "cold_push.server.cpu_ms",
    ] {
        assert!(
            metrics.contains_key(k),
            "{k} not analysed: {:?}",
            metrics.keys()
        );
        assert!(metrics[k]["verdict"].is_string(), "{k}: {}", metrics[k]);
    }
    let same: Vec<&str> = doc["exact_same"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let differ = doc["exact_differences"].as_object().unwrap();
    for k in [
        "cold_push.proxy.requests",
        "cold_push.proxy.PUT_{path}.requests",
        "cold_pull.proxy.requests",
    ] {
        assert!(same.contains(&k) || differ.contains_key(k), "{k} missing");
    }
    // One PUT a file whichever server answers.
    assert!(
        same.contains(&"cold_push.proxy.PUT_{path}.requests"),
        "{differ:?}"
    );
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// A hostile server behind the proxy: an answer whose body stalls after a few bytes, one of
/// 10 GB, a WebSocket upgrade answered `101` and then silent, and an upgrade request never
/// answered. Each sample fails in one line naming the phase and the client within the
/// client's deadline, with nothing left running.
#[test]
#[ignore = "slow: real samples against a hostile server"]
fn a_hostile_server_behind_the_proxy_is_bounded() {
    // The server answers any request after the first (the readiness check is a bare
    // connection) with a head and then its hostile body.
    let server = |body: &[&str]| {
        let mut lines = vec![
            "import socket,sys,time",
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)",
            "h,p=sys.argv[1].rsplit(':',1); s.bind((h,int(p))); s.listen(16)",
            "while True:",
            "  c,_=s.accept(); c.settimeout(30)",
            "  try:",
            "    d=c.recv(65536)",
            "    if not d: continue",
        ];
        lines.extend(body);
        lines.push("  except Exception: pass");
        format!("python3 -c \"{}\" {{addr}} {{data}}", lines.join("\n"))
    };
    let stall = server(&[
        r"    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\npartial')",
        "    time.sleep(600)",
    ]);
    let huge = server(&[
        r"    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 10737418240\r\n\r\n')",
        "    z=bytes(1<<20)",
        "    for i in range(10240): c.sendall(z)",
    ]);
    let upgraded = server(&[
        r"    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')",
        "    time.sleep(600)",
    ]);
    let unanswered = server(&["    time.sleep(600)"]);
    let plain =
        "push = \"curl -sS -f -o {state}/got {url}note\"\npull = \"true\"\ntimeout = \"5s\"";
    // curl sends the upgrade's headers as given and, once answered 101, waits for the
    // upgraded connection's bytes.
    let upgrade = "push = \"curl -sS -f -o {state}/got -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' {url}feed\"\npull = \"true\"\ntimeout = \"5s\"";
    for (name, target, client) in [
        ("stall", stall, plain),
        ("huge", huge, plain),
        ("upgraded then silent", upgraded, upgrade),
        ("upgrade unanswered", unanswered, upgrade),
    ] {
        let home = tempfile::tempdir().unwrap();
        let f = scenario(home.path(), "small", "webdav", 1, client);
        let t0 = std::time::Instant::now();
        let err = record_stops_at_its_bound(
            home.path(),
            &[
                "--scenario-file".into(),
                f,
                "--pre-check".into(),
                "0s".into(),
                "--target".into(),
                target,
                "--ready".into(),
                "tcp".into(),
            ],
            "own-client.json",
            &["cold_push: device A's client"],
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "{name}");
        let line = err
            .lines()
            .find(|l| l.contains("cold_push: device A's client"))
            .unwrap();
        assert!(line.len() < 1000, "{name}: one line: {line}");
        eprintln!("{name}: {line}");
        // The client's folder holds nothing of the 10 GB beyond what came in 5 s.
        assert!(
            procs_with(&home.path().join("work").display().to_string()).is_empty(),
            "{name}: nothing left running"
        );
    }
}

/// A client that never exits: killed at its deadline with its process group, the sample
/// failed in one line naming the phase and the device, nothing of it left running.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_client_that_never_exits_is_stopped_at_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    // The background sleep's odd length marks it (it names no folder of the test).
    let nap = format!("6{}.5", std::process::id());
    let client = format!(
        "push = \"sh -c 'sleep {nap} & while :; do sleep 1; done' {{dir}}\"\n\
         pull = \"true\"\ntimeout = \"2s\""
    );
    let f = scenario(home.path(), "small", "obsync-v1", 1, &client);
    let err = record_stops_at_its_bound(
        home.path(),
        &[
            "--scenario-file".into(),
            f,
            "--pre-check".into(),
            "0s".into(),
        ],
        "own-client.json",
        &["cold_push: device A's client did not finish within 2s"],
    );
    // One line says what happened and what was done about it.
    assert!(
        err.lines()
            .any(|l| l.contains("device A's client did not finish within 2s")
                && l.contains("killed with its process group")),
        "{err}"
    );
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty()
            && procs_with(&format!("sleep {nap}")).is_empty(),
        "nothing left running"
    );
}

/// A client that writes beside its folder (`{dir}/../stray`) fails the phase, named.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_client_that_writes_beside_its_folder_fails_the_phase() {
    let home = tempfile::tempdir().unwrap();
    let client = "push = \"sh -c 'echo x > \\\"$0/../stray\\\"' {dir}\"\npull = \"true\"";
    let f = scenario(home.path(), "small", "obsync-v1", 1, client);
    record_stops_at_its_bound(
        home.path(),
        &[
            "--scenario-file".into(),
            f,
            "--pre-check".into(),
            "0s".into(),
        ],
        "own-client.json",
        &["cold_push: device A's client wrote outside its folders: \"stray\""],
    );
}

/// A client that deletes the other device's folder fails the phase in one line naming it.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_client_that_deletes_the_other_devices_folder_fails_the_phase() {
    let home = tempfile::tempdir().unwrap();
    let client = "push = \"sh -c 'rm -rf \\\"$0/../b\\\"' {dir}\"\npull = \"true\"";
    let f = scenario(home.path(), "small", "obsync-v1", 1, client);
    record_stops_at_its_bound(
        home.path(),
        &[
            "--scenario-file".into(),
            f,
            "--pre-check".into(),
            "0s".into(),
        ],
        "own-client.json",
        &["cold_push: device A's client: device B's folder is gone"],
    );
}

/// What a client cannot run is refused before anything starts, in one line, exit 2: a
/// scenario with a route load, a bad placeholder, `ab --paired`.
#[test]
fn client_mode_refuses_what_a_client_cannot_run() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = vb!(home.path()).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A scenario file whose own [client] table comes with a route load is refused; the same
    // phase in a built-in scenario given --client is left out (a unit test).
    let f = scenario(
        home.path(),
        "small",
        "obsync-v1",
        1,
        "command = \"sync {dir}\"",
    );
    let with_route = std::fs::read_to_string(&f).unwrap()
        + "[[phase]]\nkind = \"route_load\"\nroutes = [\"changes\"]\nin_flight = [1]\nrequests = 10\n";
    std::fs::write(&f, with_route).unwrap();
    let (code, err) = run(&["record", "--scenario-file", &f]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("a client-mode scenario runs only") && err.contains("route"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let (code, err) = run(&["record", "small", "--client", "sync {folder}"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown placeholder {folder}"), "{err}");
    let (code, err) = run(&["record", "small", "--client-pull", "down {dir}"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs `command` or `push`"), "{err}");
    let f = scenario(
        home.path(),
        "small",
        "obsync-v1",
        1,
        "command = \"sync {dir}\"",
    );
    // `--paired` drives a client-mode scenario (`own_client_paired.rs`): the run gets past
    // that check to the next one, the same command line on both arms without `--aa`.
    let (code, err) = run(&[
        "ab",
        "--a",
        "ref",
        "--b",
        "ref",
        "--scenario-file",
        &f,
        "--paired",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("pass --aa for an A/A run"), "{err}");
}

/// `record` killed (SIGKILL, SIGINT, SIGTERM) while a client runs: nothing of the client is
/// left within 5 s, a grandchild it put in the background included (the client's own guard
/// kills its process group when the sample dies).
#[test]
#[ignore = "slow: real recordings killed mid-sample"]
fn a_killed_record_leaves_nothing_of_its_client() {
    for signal in [libc::SIGKILL, libc::SIGINT, libc::SIGTERM] {
        let home = tempfile::tempdir().unwrap();
        // The background sleep's odd length marks it (it names no folder of the test).
        let nap = format!("6{}{signal}.25", std::process::id());
        let client = format!(
            "push = \"sh -c 'sleep {nap} & while :; do sleep 1; done' {{dir}}\"\npull = \"true\""
        );
        let f = scenario(home.path(), "small", "obsync-v1", 1, &client);
        let gate = home.path().join("gate.toml");
        std::fs::write(&gate, testkit::LOOSE_GATE).unwrap();
        let work = home.path().join("work");
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args(["record", "--scenario-file", &f, "--pre-check", "0s"])
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
        // The client's shell names A's folder, under the work dir.
        let marker = work.display().to_string();
        let client_up = || {
            procs_with(&marker)
                .iter()
                .any(|(_, cmd)| cmd.contains("while :"))
                || !procs_with(&format!("sleep {nap}")).is_empty()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !client_up() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(client_up(), "the client never started");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let _ = child.wait();
        let t0 = std::time::Instant::now();
        while client_up() && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            !client_up(),
            "signal {signal}: left behind after 5 s: {:?}",
            procs_with(&marker)
        );
    }
}

/// A push-only client: the phases that need B to download are skipped and named on stderr;
/// the others run through the client and have their keys, the skipped ones none.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_push_only_client_skips_the_pull_phases_and_names_them() {
    let home = tempfile::tempdir().unwrap();
    let remote = home.path().join("remote");
    let client = format!(
        "push = \"sh -c 'rm -rf \\\"$1\\\" && cp -R \\\"$0\\\" \\\"$1\\\"' {{dir}} '{}'\"",
        remote.display()
    );
    let f = scenario(home.path(), "small", "obsync-v1", 2, &client);
    let out = home.path().join("out");
    let assert = record_loose(home.path(), &["--scenario-file", &f, "--pre-check", "0s"])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success();
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        err.contains(
            "client: cold_pull, edit, folder_rename skipped (the client has no pull command)"
        ),
        "{err}"
    );
    let m = &read(&out.join("own-client.json"))["metrics"];
    assert_eq!(m["cold_push.client.runs"]["value"].as_f64(), Some(1.0));
    assert_eq!(m["idle_resync.client.runs"]["value"].as_f64(), Some(1.0));
    let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
    for skipped in ["cold_pull.", "edit.", "folder_rename."] {
        assert!(
            !keys.iter().any(|k| k.starts_with(skipped)),
            "{skipped} keys written: {keys:?}"
        );
    }
    // What A pushed is on the stand-in server.
    assert!(remote.is_dir());
}

/// A client run that fails: its exit status and last stderr line, quoted, name it with the
/// phase and the device.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn a_failing_client_is_named_by_its_status_and_last_stderr_line() {
    let home = tempfile::tempdir().unwrap();
    let client =
        "push = \"true\"\npull = \"sh -c 'echo first >&2; echo \\\"remote gone\\\" >&2; exit 3'\"";
    let f = scenario(home.path(), "small", "obsync-v1", 1, client);
    record_stops_at_its_bound(
        home.path(),
        &[
            "--scenario-file".into(),
            f,
            "--pre-check".into(),
            "0s".into(),
        ],
        "own-client.json",
        &["cold_pull: device B's client exited with status 3: \"remote gone\""],
    );
}

/// The PouchDB client of `tools/pouchdb-client` (pouchdb's own `replicate`, as Self-hosted
/// LiveSync replicates), two-way, against pouchdb-server: every phase through it, the pull
/// byte-identical.
#[test]
#[ignore = "slow: real servers"]
fn the_pouchdb_client_against_pouchdb_server_runs_every_phase_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools/pouchdb-client/sync.js")
        .canonicalize()
        .expect("tools/pouchdb-client (npm ci --prefix tools/pouchdb-client)");
    let s = script.display();
    let client = format!(
        "command = \"node '{s}' sync --dir {{dir}} --state {{state}} --url {{url}}\"\n\
         startup = \"node '{s}' --version\"\n\
         timeout = \"2m\""
    );
    let f = scenario(home.path(), "small", "couchdb", 3, &client);
    let m = record_client(home.path(), &f, "pouchdb-server");
    assert_client_phases(&m, 3.0);
    // The replication's requests per file pushed and pulled, as the proxy counted them.
    for phase in ["cold_push", "cold_pull"] {
        let per_file: f64 = m
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{phase}.proxy.")) && k.ends_with(".requests_per_file")
            })
            .map(|(_, v)| v["value"].as_f64().unwrap())
            .sum();
        assert!(per_file > 0.0, "{phase}: no proxy counts in {m}");
    }
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// `vaultbench load push|pull --mirror` as an obsync client of the reference server: both
/// devices enrolled in one state file in `{shared}` (B is paired through A, as obsync pairs a
/// second device), the first with the setup token the server wrote into `{data}`. Every phase
/// runs through it, the pull is byte-identical (the rename's old folder removed on both sides
/// by the mirror), and the proxy counts the requests of each file pushed and pulled.
#[test]
#[ignore = "slow: real samples against the reference server"]
fn vaultbench_load_as_the_client_of_ref_runs_every_phase_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let vb = env!("CARGO_BIN_EXE_vaultbench");
    let conn = "--url {url} --setup-token-file {data}/setup-token --state {shared}/obsync.json --device {device}";
    let client = format!(
        "setup = \"'{vb}' load pull {conn} --vault {{state}}/enrolled --mirror\"\n\
         push = \"'{vb}' load push {conn} --vault {{dir}} --mirror\"\n\
         pull = \"'{vb}' load pull {conn} --vault {{dir}} --mirror\"\n\
         startup = \"'{vb}' --version\"\n\
         timeout = \"2m\""
    );
    let f = scenario(home.path(), "small", "obsync-v1", 3, &client);
    let m = record_client(home.path(), &f, "ref");
    assert_client_phases(&m, 3.0);
    let value = |k: &str| {
        m[k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {m}"))
    };
    for phase in ["cold_push", "cold_pull"] {
        let per_file: Vec<(&String, f64)> = m
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{phase}.proxy.")) && k.ends_with(".requests_per_file")
            })
            .map(|(k, v)| (k, v["value"].as_f64().unwrap()))
            .collect();
        assert!(
            per_file.iter().map(|(_, n)| n).sum::<f64>() > 0.0,
            "{phase}: no proxy counts in {m}"
        );
    }
    // The cold push posts one version per file and folder, and the idle push only reads the
    // server's listing: nothing is posted when nothing changed.
    let posts = |phase: &str| -> f64 {
        m.as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{phase}.proxy.POST_"))
                    && k.ends_with(".requests")
                    && k.contains("versions")
            })
            .map(|(_, v)| v["value"].as_f64().unwrap())
            .sum()
    };
    assert!(posts("cold_push") >= value("cold_push.files"), "{m}");
    assert_eq!(posts("idle_resync"), 0.0, "{m}");
    assert!(
        procs_with(&home.path().join("work").display().to_string()).is_empty(),
        "nothing left running"
    );
}

/// `probe proxy`'s bad arguments: each a one-line error naming the flag, exit 2, before any
/// server starts.
#[test]
fn probe_proxy_refuses_bad_arguments() {
    let home = tempfile::tempdir().unwrap();
    for (args, named) in [
        (&["--rounds", "0"][..], "--rounds"),
        (&["--requests", "0"][..], "--requests"),
        (&["--rounds", "x"][..], "--rounds"),
        (&["--path", "livez"][..], "--path"),
        (&["--path", "/a b"][..], "--path"),
        (&["--obsync", "--path", "/livez"][..], "--path"),
        (&["--seed", "3"][..], "--obsync"),
        (&["--obsync", "--requests", "0"][..], "--requests"),
    ] {
        let err = testkit::one_line_error(vb!(home.path()).args(["probe", "proxy"]).args(args), 2);
        assert!(err.contains(named), "{args:?}: {err}");
    }
}

/// `probe proxy` run small: both arms' percentiles and the difference are printed, and the
/// proxy relayed exactly the warm-up round's and the counted rounds' requests. No time is
/// asserted.
#[test]
#[ignore = "slow: a reference server and the proxy in front of it"]
fn probe_proxy_measures_both_arms_side_by_side() {
    let home = tempfile::tempdir().unwrap();
    let out = vb!(home.path())
        .args([
            "probe",
            "proxy",
            "--rounds",
            "2",
            "--requests",
            "50",
            "--json",
        ])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["proxy_counted"], 150, "{doc}");
    assert_eq!(doc["rounds"], 2);
    for k in [
        "direct_p50_us",
        "direct_p99_us",
        "proxied_p50_us",
        "proxied_p99_us",
    ] {
        assert!(doc[k].as_u64().unwrap() > 0, "{k}: {doc}");
    }
    let added = |arm: &str, q: &str| doc[format!("{arm}_{q}_us")].as_i64().unwrap();
    for q in ["p50", "p99"] {
        assert_eq!(
            added("added", q),
            added("proxied", q) - added("direct", q),
            "{doc}"
        );
    }
    let table = vb!(home.path())
        .args(["probe", "proxy", "--rounds", "1", "--requests", "20"])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let table = String::from_utf8(table).unwrap();
    for row in ["direct", "proxied", "added", "40 requests relayed"] {
        assert!(table.contains(row), "{row}: {table}");
    }
}

/// `probe proxy --obsync` run small: every request kind on both arms, pushes and reads apart,
/// the proxy relaying its arm's blocks exactly (each opened by one `GET /livez`). No time is
/// asserted.
#[test]
#[ignore = "slow: a reference server, an enrolled device and the proxy in front of it"]
fn probe_proxy_obsync_measures_signed_requests_side_by_side() {
    let home = tempfile::tempdir().unwrap();
    let out = vb!(home.path())
        .args([
            "probe",
            "proxy",
            "--obsync",
            "--rounds",
            "2",
            "--requests",
            "4",
            "--json",
        ])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    // Three blocks through the proxy (warm-up included), each 1 + 5 x 4 requests.
    assert_eq!(doc["proxy_counted"], 3 * 21, "{doc}");
    assert_eq!(doc["notes"], 4);
    let kinds = doc["kinds"].as_object().unwrap();
    let names: Vec<&str> = kinds.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "changes",
            "chunks-exists",
            "get-chunk",
            "post-version",
            "put-chunk"
        ],
        "{doc}"
    );
    for (name, k) in kinds.iter().chain([
        (&"pushes".to_owned(), &doc["pushes"]),
        (&"reads".to_owned(), &doc["reads"]),
    ]) {
        for q in ["p50", "p99"] {
            let v = |arm: &str| k[format!("{arm}_{q}_us")].as_i64().unwrap();
            assert!(v("direct") > 0 && v("proxied") > 0, "{name}: {doc}");
            assert_eq!(v("added"), v("proxied") - v("direct"), "{name}: {doc}");
        }
    }
    assert_eq!(doc["pushes"]["requests"], 2 * 2 * 4, "{doc}");
    assert_eq!(doc["reads"]["requests"], 3 * 2 * 4, "{doc}");
    let table = vb!(home.path())
        .args([
            "probe",
            "proxy",
            "--obsync",
            "--rounds",
            "1",
            "--requests",
            "2",
        ])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let table = String::from_utf8(table).unwrap();
    for row in [
        "put-chunk",
        "post-version",
        "pushes",
        "reads",
        "22 requests relayed",
    ] {
        assert!(table.contains(row), "{row}: {table}");
    }
}

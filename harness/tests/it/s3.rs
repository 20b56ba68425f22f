//! S3 as Remotely Save uses it, against real servers (slow, so `#[ignore]`d; `.ci/run`
//! installs moto with `bash tools/moto/install.sh` and s3rver with `npm ci --prefix
//! tools/s3rver`): `record small-s3` against both presets, byte-identical and verified, and
//! against an S3 server typed as a command line with its own credentials; an access key the
//! server does not know fails the sample in one line.

use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

/// Records `small-s3` (one sample, loose gate) with `args`; returns the recording's metrics
/// after `verify` accepted it.
fn record_small_s3(args: &[&str]) -> Value {
    let home = tempfile::tempdir().unwrap();
    record_s3(home.path(), "small-s3", args)
}

/// Records `scenario` (one sample, loose gate) with `args` under `home`, its work dir
/// `home/work`; returns the recording's metrics after `verify` accepted it.
fn record_s3(home: &std::path::Path, scenario: &str, args: &[&str]) -> Value {
    let out = home.join("out");
    let mut all = vec![scenario, "--samples", "1"];
    all.extend(args);
    record_loose(home, &all)
        .arg("--out-dir")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.join("work"))
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success();
    vb!(home).arg("verify").arg(&out).assert().success();
    let b: Value =
        serde_json::from_slice(&std::fs::read(out.join(format!("{scenario}.json"))).unwrap())
            .unwrap();
    b["metrics"].clone()
}

fn value(m: &Value, what: &str, k: &str) -> f64 {
    m[k]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {k} missing"))
}

#[test]
#[ignore = "slow: real servers"]
fn small_s3_records_byte_identical_against_both_presets() {
    for preset in ["moto-s3", "s3rver"] {
        let m = record_small_s3(&["--target", preset]);
        let v = |k: &str| value(&m, preset, k);
        assert_eq!(v("cold_pull.byte_identical"), 1.0, "{preset}");
        assert_eq!(v("cold_push.files"), 100.0, "{preset}");
        // The plugin heads every object it writes; the pull lists once, then gets each.
        assert_eq!(v("cold_push.requests.put-object"), 100.0, "{preset}");
        assert_eq!(v("cold_push.requests.head-object"), 100.0, "{preset}");
        assert_eq!(v("cold_pull.requests.get-object"), 100.0, "{preset}");
        assert_eq!(v("idle_resync.mismatched"), 0.0, "{preset}");
        assert_eq!(v("idle_resync.requests"), 1.0, "{preset}");
        assert_eq!(v("edit.poll_interval_ms"), 100.0, "{preset}");
        assert!(v("folder_rename.objects_moved") > 0.0, "{preset}");
        for key in [
            "route.put-object.c1.p50_us",
            "route.get-object.c4.p50_us",
            "route.head-object.c1.p50_us",
            "route.list-objects.c4.p50_us",
            "cold_push.server.cpu_ms",
            "edit.p50_ms",
        ] {
            assert!(v(key) > 0.0, "{preset}: {key}");
        }
    }
}

#[test]
#[ignore = "slow: real servers"]
fn an_s3_server_typed_as_a_command_line_records_byte_identical() {
    // s3rver is no preset here: a command line, its protocol, its key pair and a readiness
    // check, as a user would type them for any S3 server.
    let m = record_small_s3(&[
        "--protocol",
        "s3",
        "--auth",
        "S3RVER:S3RVER",
        "--ready",
        "GET / any",
        "--target",
        "s3rver --directory {data} --address {host} --port {port} --silent",
    ]);
    assert_eq!(value(&m, "command line", "cold_pull.byte_identical"), 1.0);
    assert_eq!(value(&m, "command line", "cold_push.errors"), 0.0);
}

#[test]
#[ignore = "slow: real servers"]
fn an_unknown_access_key_fails_the_sample_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let res = record_loose(
        home.path(),
        &[
            "small-s3",
            "--samples",
            "1",
            "--retries",
            "0",
            "--target",
            "s3rver",
            "--auth",
            "NOT-S3RVER:S3RVER",
        ],
    )
    .arg("--out-dir")
    .arg(home.path().join("out"))
    .arg("--work-dir")
    .arg(home.path().join("work"))
    .timeout(std::time::Duration::from_secs(300))
    .assert()
    .get_output()
    .clone();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(3), "{err}");
    assert!(err.contains("403"), "{err}");
    assert!(err.contains("Access Key Id"), "{err}");
}

/// The plugin's `openssl-base64` encryption against s3rver: the sample is byte-identical
/// through encrypted names and bodies, and every object s3rver stored (read from its own data
/// directory) has an encrypted name, a folder among them as a zero-byte object.
#[test]
#[ignore = "slow: a real server, and a PBKDF2 per name on every walk"]
fn an_encrypted_vault_records_byte_identical_and_the_bucket_holds_only_encrypted_names() {
    let home = tempfile::tempdir().unwrap();
    // s3rver as a command line that stores into a directory this test reads afterwards, a
    // folder of its own per run (named by the shell's PID; `{data}` goes with the sample).
    let store = home.path().join("store");
    let s3rver = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools/s3rver/node_modules/.bin/s3rver");
    let target = format!(
        "sh -c ': {{data}}; exec {} --directory {}/$$ --address {{host}} --port {{port}} --silent'",
        s3rver.display(),
        store.display()
    );
    let m = record_s3(
        home.path(),
        "small-s3-encrypted",
        &[
            "--protocol",
            "s3",
            "--auth",
            "S3RVER:S3RVER",
            "--ready",
            "GET / any",
            "--target",
            &target,
        ],
    );
    let v = |k: &str| value(&m, "encrypted", k);
    assert_eq!(v("cold_pull.byte_identical"), 1.0);
    assert_eq!(v("idle_resync.mismatched"), 0.0);
    // 100 files, and every folder of `small` as an object of its own.
    assert_eq!(
        v("cold_push.requests.put-object"),
        100.0 + v("cold_push.dirs")
    );
    assert!(v("cold_push.dirs") > 0.0);
    assert!(v("folder_rename.objects_moved") > 0.0);
    let stored = stored_objects(&store);
    assert!(stored.len() > 100, "{stored:?}");
    // OpenSSL's `enc` decrypts every stored body: all but the edited note are a vault file.
    let vault = home.path().join("vault");
    vb!(home.path())
        .args(["vault", "gen", "small", "--out"])
        .arg(&vault)
        .assert()
        .success();
    let contents: std::collections::BTreeSet<Vec<u8>> =
        testkit::tree(&vault).0.into_values().collect();
    let (mut folders, mut same) = (0, 0);
    for (key, body) in &stored {
        assert!(key.starts_with("U2FsdGVkX") && !key.contains('/'), "{key}");
        if body.is_empty() {
            folders += 1;
            continue;
        }
        same += usize::from(contents.contains(&testkit::openssl_decrypt(body, "vaultbench")));
    }
    assert!(folders > 0, "a folder is a zero-byte object");
    assert!(same >= 99, "{same} of the stored bodies are vault files");
}

/// The objects s3rver stored at the root of the `vaultbench` bucket under `dir` (its runs'
/// folders): each key (from its `KEY._S3rver_object` file's name) and its bytes. The route
/// loads' own objects, under `vaultbench-load/`, are left out: they are plain (the target
/// page says why).
fn stored_objects(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    testkit::tree(dir)
        .0
        .into_iter()
        .filter_map(|(rel, bytes)| {
            let (folder, name) = rel.rsplit_once('/')?;
            if !(folder == "vaultbench" || folder.ends_with("/vaultbench")) {
                return None;
            }
            let key = name.strip_suffix("._S3rver_object")?.to_owned();
            Some((key, bytes))
        })
        .collect()
}

//! `vaultbench vault` CLI tests: gen / verify / list / bench driven as a user would, including
//! the bad-input paths (exit 2, one line naming the input) and verify's mismatch (exit 1).

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use testkit::{one_line_error, vb};

fn gen_json(args: &[&str]) -> Value {
    let out = vb!()
        .args(["vault", "gen"])
        .args(args)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("one JSON document on stdout")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn gen_small_twice_gives_the_same_digest() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let ja = gen_json(&["small", "--out", a.to_str().unwrap()]);
    let jb = gen_json(&["small", "--out", b.to_str().unwrap()]);
    assert_eq!(ja, jb);
    assert_eq!(ja["profile"], "small");
    assert_eq!(ja["seed"], 0x5eed);
    assert_eq!(ja["files"], 100);
    assert!(ja["bytes"].as_u64().unwrap() > 100_000);
    assert_eq!(ja["digest"].as_str().unwrap().len(), 64);
    // The written digest is the generator's golden one (scenarios/tests/it/golden.rs).
    assert_eq!(
        ja["digest"],
        scenarios::manifest(&scenarios::profile("small").unwrap(), 0x5eed).digest
    );
    // Nothing is left beside the vaults: the temp dir was renamed into place.
    assert_eq!(entries(d.path()), ["a", "b"]);
}

#[test]
fn seeds_accept_hex_and_decimal_and_differ() {
    let d = tempfile::tempdir().unwrap();
    let hex = gen_json(&[
        "small",
        "--seed",
        "0x10",
        "--out",
        d.path().join("h").to_str().unwrap(),
    ]);
    let dec = gen_json(&[
        "small",
        "--seed",
        "16",
        "--out",
        d.path().join("d").to_str().unwrap(),
    ]);
    let other = gen_json(&[
        "small",
        "--seed",
        "17",
        "--out",
        d.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(hex["digest"], dec["digest"]);
    assert_eq!(hex["seed"], 16);
    assert_ne!(hex["digest"], other["digest"]);
}

#[test]
fn gen_refuses_a_non_empty_dir_unless_forced() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("v");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("mine.txt"), "keep me").unwrap();
    let err = one_line_error(vb!().args(["vault", "gen", "small", "--out"]).arg(&out), 2);
    assert!(
        err.contains("is not empty") && err.contains(out.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(out.join("mine.txt")).unwrap(),
        "keep me",
        "untouched"
    );

    vb!()
        .args(["vault", "gen", "small", "--force", "--out"])
        .arg(&out)
        .assert()
        .success();
    assert!(!out.join("mine.txt").exists(), "replaced");
    vb!()
        .args(["vault", "verify", "--profile", "small"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        entries(d.path()),
        ["v"],
        "the old tree and temp dirs are gone"
    );

    // An empty directory is fine without --force.
    let empty = d.path().join("empty");
    fs::create_dir(&empty).unwrap();
    vb!()
        .args(["vault", "gen", "small", "--out"])
        .arg(&empty)
        .assert()
        .success();
}

#[test]
fn bad_input_is_one_line_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("v");
    let err = one_line_error(vb!().args(["vault", "gen", "tiny", "--out"]).arg(&out), 2);
    assert!(
        err.contains("unknown profile \"tiny\"") && err.contains("small"),
        "{err}"
    );
    let err = one_line_error(
        vb!()
            .args(["vault", "gen", "small", "--seed", "0xnope", "--out"])
            .arg(&out),
        2,
    );
    assert!(err.contains("bad seed \"0xnope\""), "{err}");
    let file = d.path().join("a-file");
    fs::write(&file, "x").unwrap();
    let err = one_line_error(vb!().args(["vault", "gen", "small", "--out"]).arg(&file), 2);
    assert!(
        err.contains("is not a directory") && err.contains("a-file"),
        "{err}"
    );
    let under_file = file.join("v");
    let err = one_line_error(
        vb!()
            .args(["vault", "gen", "small", "--out"])
            .arg(&under_file),
        2,
    );
    assert!(err.contains("a-file"), "{err}");
    let err = one_line_error(
        vb!()
            .args(["vault", "verify", "--profile", "small"])
            .arg(d.path().join("missing")),
        2,
    );
    assert!(err.contains("missing"), "{err}");
    assert!(!out.exists());
}

#[test]
fn unwritable_parent_is_refused_without_leftovers() {
    // Root ignores directory permissions; the check is meaningless there.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let ro = d.path().join("ro");
    fs::create_dir(&ro).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    let err = one_line_error(
        vb!()
            .args(["vault", "gen", "small", "--out"])
            .arg(ro.join("v")),
        2,
    );
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(err.contains("ro/v") || err.contains("ro"), "{err}");
    assert!(entries(&ro).is_empty());
}

#[test]
fn a_disk_that_fills_up_leaves_no_vault() {
    // RLIMIT_FSIZE makes any write past 100 KiB fail (EFBIG) the way a full disk fails a
    // write mid-way, and works without root or a small filesystem.
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("v");
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"));
    cmd.args(["vault", "gen", "personal", "--out"]).arg(&out);
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 100 * 1024,
                rlim_max: 100 * 1024,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let err = one_line_error(&mut Command::from_std(cmd), 2);
    assert!(
        err.contains("cannot write ") && err.contains(out.to_str().unwrap()),
        "{err}"
    );
    assert!(
        entries(d.path()).is_empty(),
        "no vault and no temp dir left: {:?}",
        entries(d.path())
    );
}

#[test]
fn ctrl_c_leaves_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("v");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
        .args(["vault", "gen", "fixture", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the temp dir beside DIR exists (the handler is installed before it is made).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while entries(d.path()).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no temp dir appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        entries(d.path()).is_empty(),
        "left behind: {:?}",
        entries(d.path())
    );
}

#[test]
fn verify_names_the_first_differing_path() {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("v");
    vb!()
        .args(["vault", "gen", "personal", "--out"])
        .arg(&v)
        .assert()
        .success();
    let ok = vb!()
        .args(["vault", "verify", "--profile", "personal", "--json"])
        .arg(&v)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let ok: Value = serde_json::from_slice(&ok).unwrap();
    assert_eq!(ok["ok"], true);
    assert_eq!(ok["digest"], ok["expected_digest"]);

    // The wrong seed differs.
    vb!()
        .args(["vault", "verify", "--profile", "personal", "--seed", "1"])
        .arg(&v)
        .assert()
        .code(6);

    // Change one attachment byte: verify names that path.
    let m = scenarios::manifest(&scenarios::profile("personal").unwrap(), 0x5eed);
    let victim = &m
        .entries
        .iter()
        .find(|e| e.path.starts_with("attachments/"))
        .unwrap()
        .path;
    let mut bytes = fs::read(v.join(victim)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(v.join(victim), &bytes).unwrap();
    let out = vb!()
        .args(["vault", "verify", "--profile", "personal"])
        .arg(&v)
        .assert()
        .code(6)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(&format!("first differing path: {victim} (content differs)")),
        "{out}"
    );
    bytes[last] ^= 1;
    fs::write(v.join(victim), &bytes).unwrap();

    // A hidden extra file counts too.
    fs::write(v.join(".obsidian/extra.json"), "{}").unwrap();
    let out = vb!()
        .args(["vault", "verify", "--profile", "personal", "--json"])
        .arg(&v)
        .assert()
        .code(6)
        .get_output()
        .stdout
        .clone();
    let out: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["first_difference"], ".obsidian/extra.json");
    fs::remove_file(v.join(".obsidian/extra.json")).unwrap();

    // A missing note.
    let note = &m
        .entries
        .iter()
        .find(|e| e.path.ends_with(".md"))
        .unwrap()
        .path;
    fs::remove_file(v.join(note)).unwrap();
    let out = vb!()
        .args(["vault", "verify", "--profile", "personal"])
        .arg(&v)
        .assert()
        .code(6)
        .get_output()
        .stdout
        .clone();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains(&format!("{note} (missing)"))
    );
}

#[test]
fn hazards_write_and_verify_on_this_filesystem() {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("h");
    let j = gen_json(&["hazards", "--out", v.to_str().unwrap()]);
    assert_eq!(
        j["digest"],
        scenarios::manifest(&scenarios::profile("hazards").unwrap(), 0x5eed).digest
    );
    for p in scenarios::hazards::CASE_PAIR
        .iter()
        .chain(&scenarios::hazards::NORMALISATION_PAIR)
    {
        assert!(v.join(p).is_file(), "{p}");
    }
    vb!()
        .args(["vault", "verify", "--profile", "hazards"])
        .arg(&v)
        .assert()
        .success();
}

#[test]
fn list_names_every_profile() {
    let out = vb!()
        .args(["vault", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<&str> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, scenarios::PROFILE_NAMES);
}

#[test]
fn bench_reports_ratio_and_peak_rss() {
    let d = tempfile::tempdir().unwrap();
    let out = vb!()
        .args([
            "vault",
            "bench",
            "--profiles",
            "small,assets",
            "--json",
            "--work-dir",
        ])
        .arg(d.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let rows = v["profiles"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["files"], 200);
    assert!(rows[0]["ratio"].as_f64().unwrap() > 0.0);
    #[cfg(target_os = "linux")]
    assert!(rows[0]["peak_rss_kib"].as_u64().unwrap() > 0);
    assert!(entries(d.path()).is_empty(), "bench cleans up");
    let err = one_line_error(vb!().args(["vault", "bench", "--rounds", "0"]), 2);
    assert!(err.contains("--rounds 0"), "{err}");
}

#[test]
#[ignore = "slow: writes and verifies the 7,700-file fixture vault"]
fn fixture_has_7703_files_on_disk() {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("fixture");
    let j = gen_json(&["fixture", "--out", v.to_str().unwrap()]);
    assert_eq!(j["files"], 7703);
    vb!()
        .args(["vault", "verify", "--profile", "fixture"])
        .arg(&v)
        .assert()
        .success();
}

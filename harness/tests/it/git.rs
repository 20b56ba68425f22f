//! `git:REV` targets and `vaultbench bisect` end to end: a test repository of 16 commits of a
//! small "server" (a shell script that execs the reference server with a work setting), whose
//! cost per version post grows at commit 11 and whose commit 7 does not build.

use serde_json::Value;
use std::path::{Path, PathBuf};
use testkit::vb;

use crate::common::{LOOSE_GATE, git_in};

/// The key the work setting moves: instructions the server retires per version post.
const KEY: &str = "route.post-version.c1.server.instructions_per_request";

/// Version posts at 1 in flight: a few hundred keep a cost sample under callgrind quick.
const POSTS: &str = "name = \"posts\"\ndoc = \"git test: signed version posts at 1 in flight\"\n\
                     profile = \"small\"\nsamples = 1\ndevices = 4\n\
                     [[phase]]\nkind = \"cold_start\"\n\
                     [[phase]]\nkind = \"route_load\"\nroutes = [\"post-version\"]\nin_flight = [1]\nrequests = 200\n";

/// Kernel iterations per version post from commit 11 on: 255 add about 2 % to the
/// instructions per post (docs/src/measured.md, the cost channel), so 2550 add about 20 %.
const WORK_AFTER: u64 = 2550;

/// The commit that does not build.
const BROKEN: usize = 7;

/// The first commit with the extra work.
const CHANGED: usize = 11;

/// Makes the test repository in `dir/repo`: commits 0..=15; returns (repo, commit ids).
fn server_repo(dir: &Path) -> (PathBuf, Vec<String>) {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_in(&repo, &["init", "-q", "-b", "main"]);
    let vb_bin = assert_cmd::cargo::cargo_bin!("vaultbench");
    let good_build =
        "#!/bin/sh\nset -e\nmkdir -p bin\ncp server.sh bin/server\nchmod +x bin/server\n";
    let mut ids = Vec::new();
    for k in 0..16usize {
        let work = if k >= CHANGED { WORK_AFTER } else { 0 };
        std::fs::write(
            repo.join("server.sh"),
            format!(
                "#!/bin/sh\n# revision {k}\nexec '{}' serve-ref --inject-work {work} \"$@\"\n",
                vb_bin.display()
            ),
        )
        .unwrap();
        let build = if k == BROKEN {
            "#!/bin/sh\necho 'server.c:12: error: expected ; before }' >&2\nexit 3\n".to_owned()
        } else {
            good_build.to_owned()
        };
        std::fs::write(repo.join("build.sh"), build).unwrap();
        git_in(&repo, &["add", "-A"]);
        let subject = match k {
            CHANGED => format!("commit {k}: more work per version post"),
            BROKEN => format!("commit {k}: a build that fails"),
            _ => format!("commit {k}"),
        };
        git_in(&repo, &["commit", "-q", "-m", &subject]);
        ids.push(git_in(&repo, &["rev-parse", "HEAD"]).trim().to_owned());
    }
    (repo, ids)
}

fn files(home: &Path) -> (PathBuf, PathBuf) {
    let (gate, scen) = (home.join("gate.toml"), home.join("posts.toml"));
    std::fs::write(&gate, LOOSE_GATE).unwrap();
    std::fs::write(&scen, POSTS).unwrap();
    (gate, scen)
}

#[test]
fn a_revision_that_does_not_build_fails_with_its_exit_code_before_any_sample() {
    let home = tempfile::tempdir().unwrap();
    let (gate, scen) = files(home.path());
    let (repo, ids) = server_repo(home.path());
    let rev = format!("git:{}", ids[BROKEN]);
    let o = vb!(home.path())
        .args([
            "record",
            "--target",
            &rev,
            "--build",
            "sh build.sh",
            "--bin",
            "bin/server",
        ])
        .arg("--repo")
        .arg(&repo)
        .arg("--scenario-file")
        .arg(&scen)
        .arg("--gate-config")
        .arg(&gate)
        .arg("--out")
        .arg(home.path().join("out"))
        .assert()
        .code(harness::exit::BUILD_FAILED)
        .get_output()
        .clone();
    let err = String::from_utf8(o.stderr).unwrap();
    let last = err.lines().last().unwrap();
    assert!(
        last.contains(&ids[BROKEN][..12])
            && last.contains("did not build")
            && last.contains("exited 3")
            && last.contains("expected ; before }"),
        "{err}"
    );
    assert!(!home.path().join("out").exists(), "nothing recorded");
    // Unknown revisions and a missing command line are usage errors, before any build.
    let o = vb!(home.path())
        .args([
            "record",
            "--target",
            "git:no-such-rev",
            "--bin",
            "bin/server",
        ])
        .arg("--repo")
        .arg(&repo)
        .arg("--scenario-file")
        .arg(&scen)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("git:no-such-rev: no such commit"), "{err}");
    let o = vb!(home.path())
        .args(["record", "--target", "git:HEAD"])
        .arg("--repo")
        .arg(&repo)
        .arg("--scenario-file")
        .arg(&scen)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("--bin PATH"), "{err}");
}

#[test]
#[ignore = "slow: cost samples under callgrind of 16 commits' builds"]
fn ab_of_two_revisions_builds_once_and_bisect_names_the_commit() {
    let home = tempfile::tempdir().unwrap();
    let (gate, scen) = files(home.path());
    let (repo, ids) = server_repo(home.path());
    let ab = |out: &Path| {
        let o = vb!(home.path())
            .args(["ab", "--a", &format!("git:{}", ids[0]), "--b", "git:HEAD"])
            .args(["--build", "sh build.sh", "--bin", "bin/server", "--cost"])
            .args(["--rounds", "3", "--cost-tau", "5%"])
            .arg("--repo")
            .arg(&repo)
            .arg("--scenario-file")
            .arg(&scen)
            .arg("--gate-config")
            .arg(&gate)
            .arg("--out")
            .arg(out)
            .timeout(std::time::Duration::from_secs(900))
            .assert()
            .code(0)
            .get_output()
            .clone();
        String::from_utf8(o.stderr).unwrap()
    };
    let first = home.path().join("ab1.json");
    let err = ab(&first);
    assert_eq!(err.matches("building git:").count(), 2, "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
    assert_eq!(
        doc["metrics"][KEY]["verdict"], "worse",
        "{}",
        doc["metrics"][KEY]
    );
    for (arm, id) in [("a", &ids[0]), ("b", &ids[15])] {
        let g = &doc[arm]["git"];
        assert_eq!(g["commit"], id.as_str(), "{g}");
        assert_eq!(g["build_command"], "sh build.sh");
        assert_eq!(g["build_log_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(g["tree"].as_str().unwrap().len(), 40);
    }
    assert_eq!(doc["b"]["command"], "git:HEAD");
    // The same A/B again: both builds come from the cache.
    let err = ab(&home.path().join("ab2.json"));
    assert!(!err.contains("building git:"), "{err}");
    assert_eq!(err.matches("cached build").count(), 2, "{err}");
    // `report` names the commits.
    let o = vb!(home.path())
        .args(["report", "--format", "md"])
        .arg(&first)
        .assert()
        .code(0)
        .get_output()
        .clone();
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(
        md.contains(&ids[15][..12]) && md.contains(&ids[0][..12]) && md.contains("\"commit 15\""),
        "{md}"
    );

    // Bisect: commit 11, with commit 7 skipped and named, in at most 6 builds beyond the ends.
    let out = home.path().join("bisect.json");
    let o = vb!(home.path())
        .args(["bisect", "--good", &ids[0], "--bad", "HEAD", "--key", KEY])
        .args([
            "--build",
            "sh build.sh",
            "--bin",
            "bin/server",
            "--cost-tau",
            "5%",
        ])
        .arg("--repo")
        .arg(&repo)
        .arg("--scenario-file")
        .arg(&scen)
        .arg("--gate-config")
        .arg(&gate)
        .arg("--out")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(1800))
        .assert()
        .code(0)
        .get_output()
        .clone();
    let err = String::from_utf8(o.stderr).unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["kind"], "vaultbench.bisect");
    assert_eq!(doc["outcome"], "found", "{err}");
    assert_eq!(doc["first_bad"]["commit"], ids[CHANGED].as_str(), "{err}");
    assert_eq!(doc["first_bad"]["index"], CHANGED);
    assert!(
        doc["estimate_pct"].as_f64().unwrap() > 5.0,
        "{}",
        doc["estimate_pct"]
    );
    assert!(
        doc["builds"]["beyond_ends"].as_u64().unwrap() <= 6,
        "{}",
        doc["builds"]
    );
    let broken: Vec<&Value> = doc["commits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "skipped")
        .collect();
    assert_eq!(broken.len(), 1, "{}", doc["commits"]);
    assert_eq!(broken[0]["commit"], ids[BROKEN].as_str());
    assert!(
        broken[0]["note"].as_str().unwrap().contains("exited 3"),
        "{}",
        broken[0]
    );
    for ext in ["md", "html"] {
        let text = std::fs::read_to_string(out.with_extension(ext)).unwrap();
        assert!(text.contains(&ids[CHANGED][..12]), "{ext}: {text}");
        assert!(text.contains("skipped (did not build)"), "{ext}");
    }
    // A rerun resumes from the journal: it measures nothing new and builds nothing.
    let o = vb!(home.path())
        .args(["bisect", "--good", &ids[0], "--bad", "HEAD", "--key", KEY])
        .args([
            "--build",
            "sh build.sh",
            "--bin",
            "bin/server",
            "--cost-tau",
            "5%",
            "--json",
        ])
        .arg("--repo")
        .arg(&repo)
        .arg("--scenario-file")
        .arg(&scen)
        .arg("--gate-config")
        .arg(&gate)
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .code(0)
        .get_output()
        .clone();
    let again: Value = serde_json::from_slice(&o.stdout).unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(!err.contains("cost sample:"), "{err}");
    assert_eq!(again["builds"]["built"], 0);
    assert_eq!(again["first_bad"]["commit"], ids[CHANGED].as_str());
    assert!(again["resumed_measurements"].as_u64().unwrap() > 0);
}

/// The steps of the reusable trend job (`scripts/trend-job.sh`, which `trend.yml` runs in the
/// caller's checkout) in a server's repository: record the pushed commit as a `git:` target,
/// report, lay out a baseline for this machine's class; then a second run compares with it.
#[test]
#[ignore = "slow: two recordings with a cost sample"]
fn the_trend_jobs_steps_run_in_a_servers_repository() {
    let home = tempfile::tempdir().unwrap();
    let (gate, scen) = files(home.path());
    let (repo, ids) = server_repo(home.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/trend-job.sh");
    let job = |baselines: &Path, out: &Path| {
        std::process::Command::new("bash")
            .arg(&script)
            .current_dir(&repo)
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("VAULTBENCH_CACHE", home.path().join("cache"))
            .env("VAULTBENCH_LOCK", home.path().join("machine.lock"))
            .env("VAULTBENCH_GATE_CONFIG", &gate)
            .env_remove("VAULTBENCH_REFERENCE")
            .env_remove("GITHUB_OUTPUT")
            .env_remove("GITHUB_STEP_SUMMARY")
            .env("VB", assert_cmd::cargo::cargo_bin!("vaultbench"))
            .env("BUILD", "sh build.sh")
            .env("BIN", "bin/server")
            .env("SCENARIO", &scen)
            .env("BASELINES", baselines)
            .env("OUT", out)
            .env("COST_SAMPLES", "1")
            .env("REBASELINE", "true")
            .output()
            .unwrap()
    };
    let out1 = home.path().join("out1");
    let o = job(&home.path().join("none"), &out1);
    let err = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{err}");
    assert!(stdout.contains("no baseline"), "{stdout}");
    for f in [
        "posts.json",
        "posts.provenance.json",
        "report.html",
        "report.md",
    ] {
        assert!(out1.join("recording").join(f).is_file(), "{f}: {err}");
    }
    let prov: Value = serde_json::from_slice(
        &std::fs::read(out1.join("recording/posts.provenance.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(prov["target"]["git"]["commit"], ids[15].as_str());
    let md = std::fs::read_to_string(out1.join("recording/report.md")).unwrap();
    assert!(md.contains(&ids[15][..12]), "the report names the commit");
    // The laid-out baseline: <out>/rebaseline/<baselines>/<class>/posts.json.
    let laid: Vec<PathBuf> = walk(&out1.join("rebaseline"))
        .into_iter()
        .filter(|p| p.ends_with("posts.json"))
        .collect();
    assert_eq!(laid.len(), 1, "{laid:?}");
    let baselines = laid[0].parent().unwrap().parent().unwrap().to_path_buf();
    let out2 = home.path().join("out2");
    let o = job(&baselines, &out2);
    let err = String::from_utf8_lossy(&o.stderr);
    // 0 or 1 (a timing key may move between two recordings): either way compared.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{err}");
    assert!(out2.join("recording/compare.md").is_file(), "{err}");
    assert!(
        err.contains("cached build"),
        "the second run builds nothing: {err}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A history line of the test repository's commit `id` holding only [`KEY`] at `value`.
fn history_line(id: &str, i: usize, value: f64) -> String {
    let doc = serde_json::json!({
        "kind": "vaultbench.history-entry",
        "format_version": 1,
        "commit": id,
        "date": format!("2026-11-{:02}T12:00:00Z", i + 1),
        "machine_class": "test-class",
        "scenario": "posts",
        "seed": 0x5eed,
        "vault_digest": "d",
        "calibration": {"cpu_ms": 25.0, "io_ms": 1.5, "rtt_ms": 0.05},
        "keys": {KEY: {
            "value": value, "unit": "instructions", "class": "cost", "better": "lower",
            "low": value, "high": value, "n": 1
        }}
    });
    format!("{doc}\n")
}

/// `trend detect --bisect` on a history that recorded only some of the test repository's
/// commits: the step between the entries of commits 8 and 12 is handed to bisect, which builds
/// and measures commits 9–12 and names commit 11.
#[test]
#[ignore = "slow: cost samples under callgrind of up to five commits' builds"]
fn trend_detect_hands_a_step_range_to_bisect_which_names_the_commit() {
    let home = tempfile::tempdir().unwrap();
    let (gate, scen) = files(home.path());
    let (repo, ids) = server_repo(home.path());
    // The trend job ran on these commits only, the last three twice (a scheduled run records
    // the head again); the values are the key's level before and after commit 11's extra
    // work, with a little spread.
    let recorded = [0usize, 1, 2, 3, 4, 5, 6, 8, 12, 13, 13, 14, 14, 15, 15];
    let mut text = String::new();
    for (i, &c) in recorded.iter().enumerate() {
        let level = if c >= CHANGED { 1.2e6 } else { 1.0e6 };
        text.push_str(&history_line(
            &ids[c],
            i,
            level * (1.0 + 0.001 * (i % 3) as f64),
        ));
    }
    let history = home.path().join("posts.jsonl");
    std::fs::write(&history, text).unwrap();
    let out = home.path().join("trend.json");
    let o = vb!(home.path())
        .args(["trend", "detect"])
        .arg(&history)
        .arg("--bisect")
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(&out)
        .args(["--", "--build", "sh build.sh", "--bin", "bin/server"])
        .args(["--cost-tau", "5%", "--scenario-file"])
        .arg(&scen)
        .arg("--gate-config")
        .arg(&gate)
        .timeout(std::time::Duration::from_secs(1800))
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8(o.stderr).unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["kind"], "vaultbench.trend");
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{err}\n{doc}");
    let p = &points[0];
    assert_eq!(p["kind"], "step");
    assert_eq!(p["before"]["commit"], ids[8].as_str());
    assert_eq!(p["after"]["commit"], ids[12].as_str());
    let b = &p["bisect"];
    assert_eq!(b["mode"], "cost", "{err}\n{b}");
    assert_eq!(b["path_len"], 4);
    assert_eq!(b["outcome"], "found", "{err}\n{b}");
    assert_eq!(b["first_bad"], ids[CHANGED].as_str(), "{err}");
    let md = std::fs::read_to_string(out.with_extension("md")).unwrap();
    assert!(md.contains(&ids[CHANGED][..12]), "{md}");
}

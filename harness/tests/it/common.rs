//! Helpers the harness's end-to-end tests share beyond the workspace's `testkit` (the isolated
//! `vaultbench` command, the loose gate, servers and vaults): scenario files, a loose
//! recording, git and `hlog merge` runs. Slow end-to-end tests are `#[ignore = "slow: ..."]`;
//! `-- --include-ignored` runs them.

use std::path::Path;

use assert_cmd::Command;
pub use testkit::LOOSE_GATE;
use testkit::vb;

/// A short scenario: cold start and a cold push of `small`.
pub const PUSH_ONLY: &str = "name = \"push-only\"\ndoc = \"test\"\nprofile = \"small\"\nsamples = 2\n\
                             [[phase]]\nkind = \"cold_start\"\n[[phase]]\nkind = \"cold_push\"\n";

/// `vaultbench record ARGS --gate-config <home>/gate.toml` with the loose gate written there:
/// the preamble of every end-to-end recording whose output must not depend on how busy the
/// machine is. Add `--out`, `--scenario-file` and the like to the returned command.
pub fn record_loose(home: &Path, args: &[&str]) -> Command {
    let gate = home.join("gate.toml");
    std::fs::write(&gate, LOOSE_GATE).unwrap();
    let mut c = vb!(home);
    c.arg("record").args(args).arg("--gate-config").arg(gate);
    c
}

/// Runs `record` (loose gate, one sample, one retry, a 10-minute sample timeout) with `args`
/// against a target that misbehaves without end, and asserts that it stops at the phase's
/// bound: exit 3 within 60 s, stderr containing each of `named`, and no `recording` written
/// in `home/out`. Returns the stderr.
pub fn record_stops_at_its_bound(
    home: &Path,
    args: &[String],
    recording: &str,
    named: &[&str],
) -> String {
    let out = home.join("out");
    let started = std::time::Instant::now();
    let res = record_loose(home, &["--samples", "1"])
        .args(args)
        .args(["--sample-timeout", "10m", "--retries", "1"])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.join("work"))
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&res.stderr).into_owned();
    assert_eq!(res.status.code(), Some(3), "{err}");
    for n in named {
        assert!(
            err.contains(n),
            "the bound and its flag are named ({n}): {err}"
        );
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    assert!(!out.join(recording).exists(), "nothing written");
    err
}

/// Writes the loose gate and the push-only scenario into `home`: (gate, scenario).
pub fn loose_files(home: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (gate, scen) = (home.join("gate.toml"), home.join("s.toml"));
    std::fs::write(&gate, LOOSE_GATE).unwrap();
    std::fs::write(&scen, PUSH_ONLY).unwrap();
    (gate, scen)
}

/// `git -C dir ARGS` with a throwaway identity; its stdout.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=vaultbench test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs `vaultbench hlog merge LOGS… --out OUT` with `extra` flags from `home`.
pub fn hlog_merge<P: AsRef<std::ffi::OsStr>>(
    home: &Path,
    logs: &[P],
    out: &Path,
    extra: &[&str],
) -> std::process::Output {
    vb!(home)
        .args(["hlog", "merge"])
        .args(logs)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// Asserts that a command's `out` is a success (its stderr as the message), and parses its
/// stdout as JSON.
pub fn json_of(out: std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

//! The CI workflows parse, and carry the triggers, concurrency and permissions we rely on:
//! ci.yml runs fmt, clippy -D warnings, the tests with --locked and slow tests on, and verify;
//! perf-baseline.yml runs after merge and on manual dispatch with a scenario input, in one
//! queueing (never cancelling) concurrency group, and uploads the recording and report.

use serde_yaml_ng::Value;
use std::path::PathBuf;

fn load(name: &str) -> (String, Value) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.github/workflows")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: Value =
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
    (text, v)
}

fn steps_text(v: &Value) -> String {
    let mut out = String::new();
    for (_, job) in v["jobs"].as_mapping().unwrap() {
        for step in job["steps"].as_sequence().unwrap() {
            if let Some(r) = step.get("run").and_then(Value::as_str) {
                out.push_str(r);
                out.push('\n');
            }
            if let Some(u) = step.get("uses").and_then(Value::as_str) {
                out.push_str(u);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn ci_runs_fmt_clippy_locked_tests_and_verify_read_only() {
    let (_, v) = load("ci.yml");
    // YAML 1.1 would read `on` as a boolean key; serde_yaml_ng keeps it a string.
    let on = &v["on"];
    assert!(
        on.get("push").is_some() && on.get("pull_request").is_some(),
        "ci runs on push and pull requests"
    );
    assert_eq!(v["permissions"]["contents"].as_str(), Some("read"));
    let env_slow = v["env"]["VAULTBENCH_SLOW_TESTS"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            v["env"]["VAULTBENCH_SLOW_TESTS"]
                .as_u64()
                .map(|n| n.to_string())
        });
    assert_eq!(env_slow.as_deref(), Some("1"), "slow tests on in CI");
    let run = steps_text(&v);
    for needle in [
        "cargo fmt --all -- --check",
        "-D warnings",
        "cargo test --workspace --locked",
        "verify baselines/",
    ] {
        assert!(run.contains(needle), "ci.yml lacks {needle:?}");
    }
}

#[test]
fn perf_baseline_queues_one_recording_at_a_time_after_merge() {
    let (_, v) = load("perf-baseline.yml");
    let on = &v["on"];
    let branches = on["push"]["branches"].as_sequence().expect("push branches");
    assert_eq!(
        branches,
        &vec![Value::from("main")],
        "post-merge only: push to main"
    );
    assert!(
        on.get("pull_request").is_none(),
        "never on pull requests: not a merge gate"
    );
    let input = &on["workflow_dispatch"]["inputs"]["scenario"];
    assert!(input.is_mapping(), "manual dispatch takes a scenario input");
    assert_eq!(input["default"].as_str(), Some("small"));
    // One group for the whole workflow, not per ref: two recordings at once measure each other.
    let group = v["concurrency"]["group"]
        .as_str()
        .expect("a workflow-level concurrency group");
    assert!(
        !group.contains("${{"),
        "the group must not vary with ref or run: {group}"
    );
    assert_eq!(
        v["concurrency"]["cancel-in-progress"].as_bool(),
        Some(false),
        "queue, never cancel"
    );
    assert_eq!(v["permissions"]["contents"].as_str(), Some("read"));
    let run = steps_text(&v);
    for needle in [
        "record \"$SCENARIO\" --out recording/",
        "compare",
        "--format html",
        "actions/upload-artifact",
    ] {
        assert!(run.contains(needle), "perf-baseline.yml lacks {needle:?}");
    }
}

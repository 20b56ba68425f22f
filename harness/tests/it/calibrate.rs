//! `vaultbench calibrate` and `vaultbench probe`: readings in fresh `vaultbench` processes,
//! the reference stored only when the gate accepts, and flags refused by name.

use std::ffi::OsString;

use calibration::gate::ChannelBounds;
use calibration::{GateConfig, load_reference};
use clap::Parser;
use harness::commands::calibrate::{CalibrateOutcome, calibrate};
use harness::commands::probe::{self, ProbeCmd};
use harness::subprocess::SelfExec;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn calibrate_takes_readings_in_fresh_processes_and_stores_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let ref_path = dir.path().join("data/reference.json");
    // Each reading is `vaultbench calibrate --one-reading DIR`, as `calibrate` runs it.
    let exec = SelfExec {
        program: env!("CARGO_BIN_EXE_vaultbench").into(),
        prefix: vec![OsString::from("calibrate")],
        env: Vec::new(),
    };
    // A gate that cannot pass (cv must be 0): refused, and nothing is stored.
    let strict = GateConfig {
        cpu_ms: ChannelBounds {
            max_cv: 0.0,
            ..GateConfig::default().cpu_ms
        },
        ..GateConfig::default()
    };
    let refused: CalibrateOutcome =
        calibrate(&exec, dir.path(), 3, &strict, Some(&ref_path)).unwrap();
    assert!(!refused.verdict.accepted);
    assert!(refused.verdict.failures[0].starts_with("cpu_ms cv "));
    assert_eq!(refused.stored_at, None);
    assert!(!ref_path.exists());

    // An accepting gate: the medians are stored under this machine's fingerprint.
    let lax = GateConfig {
        cpu_ms: ChannelBounds {
            max_cv: 100.0,
            max_over_median: 100.0,
            reference_tolerance: 1.0,
        },
        io_ms: ChannelBounds {
            max_cv: 100.0,
            max_over_median: 100.0,
            reference_tolerance: 1.0,
        },
        rtt_ms: Some(ChannelBounds {
            max_cv: 100.0,
            max_over_median: 100.0,
            reference_tolerance: 1.0,
        }),
        ..GateConfig::default()
    };
    let ok = calibrate(&exec, dir.path(), 3, &lax, Some(&ref_path)).unwrap();
    assert_eq!(ok.readings.len(), 3);
    assert!(ok.readings.iter().all(|r| r.cpu_ms > 0.0 && r.io_ms > 0.0));
    assert_eq!(ok.stored_at.as_deref(), Some(ref_path.as_path()));
    let stored = load_reference(Some(&ref_path), &ok.fingerprint)
        .unwrap()
        .unwrap();
    assert_eq!(Some(&stored), ok.reference.as_ref());
    assert_eq!(
        stored.fingerprint_id,
        calibration::fingerprint(dir.path()).id()
    );
    assert!(close(stored.cpu_ms, ok.verdict.channels["cpu_ms"].median));

    // A corrupt reference file stops calibrate before any reading, naming the file.
    std::fs::write(&ref_path, "{\"format_version\":1,").unwrap();
    let err = calibrate(&exec, dir.path(), 3, &lax, Some(&ref_path)).unwrap_err();
    assert!(format!("{err:#}").starts_with(&format!(
        "calibration reference {}: corrupt",
        ref_path.display()
    )));

    // Bad counts are refused up front.
    let err = calibrate(&exec, dir.path(), 1, &lax, Some(&ref_path)).unwrap_err();
    assert_eq!(err.to_string(), "--readings 1: must be 2..=1000");
}

#[test]
fn the_cli_parses_and_rejects_bad_input_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let parse = |args: &[&str]| {
        harness::Cli::try_parse_from([&["vaultbench", "probe"], args].concat()).map(|c| {
            match c.command {
                harness::Command::Probe(p) => p,
                other => panic!("parsed as {other:?}"),
            }
        })
    };
    let cmd = parse(&[
        "fsync",
        "--threads",
        "1,2",
        "--seconds",
        "0.05",
        "--mode",
        "fdatasync",
        "--shared-file",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ])
    .unwrap();
    let ProbeCmd::Fsync(args) = &cmd else {
        panic!("not parsed as probe fsync: {cmd:?}")
    };
    assert_eq!(args.threads, vec![1, 2]);
    assert!(args.shared_file && args.json);
    assert!(parse(&["fsync", "--mode", "osync"]).is_err());

    let err = probe::run(
        parse(&[
            "fsync",
            "--threads",
            "1",
            "--seconds",
            "0.05",
            "--dir",
            file.to_str().unwrap(),
        ])
        .unwrap(),
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").starts_with(&format!("probe dir {}: ", file.display())),
        "{err:#}"
    );
    let err = probe::run(parse(&["fsync", "--threads", "0"]).unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "--threads 0: each count must be 1..=256");
    let err = probe::run(parse(&["fsync", "--seconds=-1"]).unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "--seconds -1: must be > 0 and <= 60");
}

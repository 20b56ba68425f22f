//! Integration tests of the calibration crate: gate arithmetic on fixed readings, config errors, the machine lock across two processes and the fsync probe (the `calibrate` and `probe` commands are tested in the harness).
//!
//! Tests that need a second process re-run this test binary with `--exact <the same test>`
//! and an env var telling it to play the child's part, so no other binary is needed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calibration::gate::{ChannelBounds, ConfigError};
use calibration::probe::{ProbeConfig, SyncMode, run_fsync_probe};
use calibration::{GateConfig, GateFile, LockBusy, MachineLock, Reference, judge};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn reference(cpu_ms: f64, io_ms: f64) -> Reference {
    Reference::fixture("fixed", cpu_ms, io_ms)
}

mod gate {
    use super::*;

    #[test]
    fn accepts_quiet_readings_and_reports_exact_shares() {
        let cfg = GateConfig::default();
        let v = judge(&[9.0, 10.0, 10.0, 11.0], &[2.0, 2.0, 2.0, 4.0], None, &cfg);
        assert!(v.accepted, "{:?}", v.failures);
        assert!(!v.drift_checked);
        assert!(v.failures.is_empty());
        let cpu = &v.channels["cpu_ms"];
        assert_eq!(cpu.n, 4);
        assert!(close(cpu.median, 10.0) && close(cpu.mean, 10.0));
        // sd = sqrt(2/3), cv = sd / 10
        assert!(close(cpu.cv, (2.0f64 / 3.0).sqrt() / 10.0));
        assert!(close(cpu.cv_share, cpu.cv / 0.20));
        assert!(close(cpu.max_over_median, 1.1));
        // allowance of max/median is the excess over 1: 0.1 / 0.6
        assert!(close(cpu.max_over_median_share, 0.1 / 0.6));
        assert_eq!(cpu.drift, None);
        let io = &v.channels["io_ms"];
        assert!(close(io.median, 2.0) && close(io.mean, 2.5));
        assert!(close(io.cv, 0.4));
        assert!(close(io.cv_share, 0.4 / 0.70));
        assert!(close(io.max_over_median, 2.0));
        assert!(close(io.max_over_median_share, 1.0 / 1.5));
        let lines = v.lines();
        assert_eq!(
            lines[0],
            "cpu_ms  n 4  median 10.00 ms  cv 0.082 = 40.8 % of allowance  max/median 1.100 = 16.7 % of allowance  drift not checked"
        );
        assert_eq!(
            lines[1],
            "io_ms   n 4  median 2.00 ms  cv 0.400 = 57.1 % of allowance  max/median 2.000 = 66.7 % of allowance  drift not checked"
        );
        assert!(lines[2].starts_with("no calibration reference for this machine"));
        assert_eq!(lines[3], "gate: accepted");
    }

    #[test]
    fn refuses_by_cv_alone() {
        // mean 10, sd sqrt(50/3), cv 0.408 > 0.20; max/median 1.5 <= 1.6
        let v = judge(
            &[5.0, 10.0, 15.0, 10.0],
            &[2.0, 2.0, 2.0, 2.0],
            None,
            &GateConfig::default(),
        );
        assert!(!v.accepted);
        assert_eq!(v.failures, vec!["cpu_ms cv 0.408 > 0.20"]);
        assert_eq!(v.channels["cpu_ms"].failures, v.failures);
        assert!(v.channels["io_ms"].failures.is_empty());
        assert_eq!(
            v.lines().last().unwrap(),
            "gate: refused: cpu_ms cv 0.408 > 0.20"
        );
    }

    #[test]
    fn refuses_by_max_over_median_alone() {
        // 19 x 10 and one 17: cv 0.151 <= 0.20 but max/median 1.7 > 1.6
        let mut cpu = vec![10.0; 19];
        cpu.push(17.0);
        let v = judge(&cpu, &[2.0; 20], None, &GateConfig::default());
        let c = &v.channels["cpu_ms"];
        assert!(c.cv < 0.20 && close(c.cv, 0.151_231_650_652_159_68));
        assert_eq!(v.failures, vec!["cpu_ms max/median 1.700 > 1.60"]);
        assert!(close(c.max_over_median_share, 0.7 / 0.6));
    }

    #[test]
    fn refuses_by_drift_from_the_reference_in_either_direction() {
        let cfg = GateConfig::default();
        let r = reference(10.0, 2.0);
        // cpu median 16 vs 10: +0.6 > 0.5; io median 4.2 vs 2: +1.1 > 1.0
        let v = judge(&[16.0; 4], &[4.2; 4], Some(&r), &cfg);
        assert!(v.drift_checked);
        assert_eq!(v.reference_id.as_deref(), Some(r.fingerprint_id.as_str()));
        assert_eq!(
            v.failures,
            vec![
                "cpu_ms drift +0.600 from reference 10.000 ms, |drift| > 0.50",
                "io_ms drift +1.100 from reference 2.000 ms, |drift| > 1.00",
            ]
        );
        // Faster than the reference by more than the tolerance is drift too (a different
        // machine state, e.g. turbo or a cache in front of the disk).
        let v = judge(&[4.0; 4], &[2.0; 4], Some(&r), &cfg);
        assert_eq!(
            v.failures,
            vec!["cpu_ms drift -0.600 from reference 10.000 ms, |drift| > 0.50"]
        );
        // Within tolerance: drift 0.25 is half the cpu allowance, io 0.5 half of its.
        let v = judge(&[12.5; 4], &[3.0; 4], Some(&r), &cfg);
        assert!(v.accepted, "{:?}", v.failures);
        assert!(close(v.channels["cpu_ms"].drift.unwrap(), 0.25));
        assert!(close(v.channels["cpu_ms"].drift_share.unwrap(), 0.5));
        assert!(close(v.channels["io_ms"].drift_share.unwrap(), 0.5));
        assert!(v.lines()[0].ends_with("drift +0.250 = 50.0 % of allowance"));
    }

    #[test]
    fn too_few_or_unusable_readings_are_refused_not_divided_by_zero() {
        let cfg = GateConfig::default();
        let v = judge(&[10.0], &[], None, &cfg);
        assert_eq!(
            v.failures,
            vec!["cpu_ms n 1 < 2 readings", "io_ms n 0 < 2 readings"]
        );
        let v = judge(&[10.0, f64::NAN], &[1.0, 0.0], None, &cfg);
        assert_eq!(
            v.failures,
            vec![
                "cpu_ms has a reading that is not a positive number",
                "io_ms has a reading that is not a positive number"
            ]
        );
    }

    #[test]
    fn a_verdict_round_trips_through_json() {
        let v = judge(
            &[9.0, 10.0, 11.0],
            &[2.0, 3.0, 2.5],
            Some(&reference(10.0, 2.5)),
            &GateConfig::default(),
        );
        let json = serde_json::to_string(&v).unwrap();
        let back: calibration::GateVerdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
    }
}

mod in_sample {
    use super::*;
    use calibration::gate::{judge_sample, judge_with_contention};
    use contract::schema::{ChannelReading, Contention};

    fn quiet() -> Contention {
        Contention {
            window_ms: 1000.0,
            server_cpu_ms: 400.0,
            generator_cpu_ms: 200.0,
            server_run_delay: Some(0.05),
            generator_run_delay: Some(0.04),
            psi_cpu_some: Some(0.03),
            psi_io_some: Some(0.2),
            steal: Some(0.0),
            foreign_cpu: Some(0.0),
            foreign_io_mib_s: Some(0.0),
            foreign_unreadable: 0,
            ..Contention::default()
        }
    }

    fn r(cpu_ms: f64, io_ms: f64) -> ChannelReading {
        ChannelReading {
            cpu_ms,
            io_ms,
            rtt_ms: None,
        }
    }

    #[test]
    fn a_pre_check_judges_only_the_foreign_channels_and_steal() {
        use calibration::gate::judge_pre_check;
        let cfg = GateConfig::default();
        // Quiet: every figure read and reported, nothing refused.
        let (failures, figures) = judge_pre_check(&quiet(), &cfg);
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(
            figures.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["foreign_cpu", "foreign_io", "steal"]
        );
        // Busy from outside: refused on each foreign channel, in channel order; the
        // run-queue and PSI figures are never judged by a pre-check.
        let busy = Contention {
            foreign_cpu: Some(0.70),
            foreign_io_mib_s: Some(25.0),
            steal: Some(0.5),
            psi_cpu_some: Some(0.99),
            server_run_delay: Some(9.0),
            ..quiet()
        };
        let (failures, _) = judge_pre_check(&busy, &cfg);
        assert_eq!(
            failures,
            vec![
                "foreign_cpu 0.700 > 0.10".to_owned(),
                "foreign_io 25.000 > 2.00".to_owned(),
                "steal 0.500 > 0.30".to_owned(),
            ]
        );
        // Exactly at a bound is within it; an unread channel is not judged.
        let edge = Contention {
            foreign_cpu: Some(0.10),
            foreign_io_mib_s: None,
            ..quiet()
        };
        let (failures, figures) = judge_pre_check(&edge, &cfg);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(!figures.contains_key("foreign_io"));
        // An unbounded channel is reported and not judged.
        let mut loose = cfg;
        loose.foreign_cpu = None;
        let (failures, figures) = judge_pre_check(&busy, &loose);
        assert!(!failures.iter().any(|f| f.starts_with("foreign_cpu")));
        assert_eq!(figures["foreign_cpu"], 0.70);
    }

    #[test]
    fn a_contended_sample_refuses_the_recording_and_names_channel_and_sample() {
        let busy = Contention {
            foreign_cpu: Some(0.55),
            foreign_io_mib_s: Some(31.5),
            // The target's own load: reported, never a refusal by default.
            psi_cpu_some: Some(0.9),
            server_run_delay: Some(3.2),
            generator_run_delay: Some(1.4),
            ..quiet()
        };
        let (q, b) = (quiet(), busy);
        let cfg = GateConfig::default();
        let v = judge_with_contention(
            &[10.0, 10.1, 10.0, 9.9],
            &[5.0, 5.1, 5.0, 4.9],
            &[Some(&q), Some(&b)],
            None,
            &cfg,
        );
        assert!(!v.accepted);
        assert_eq!(
            v.failures,
            vec![
                format!(
                    "foreign_cpu 0.550 > {:.2} in sample 2",
                    cfg.foreign_cpu.unwrap().max_share
                ),
                format!(
                    "foreign_io 31.500 > {:.2} in sample 2",
                    cfg.foreign_io.unwrap().max_share
                ),
            ]
        );
        let f = &v.in_sample["foreign_cpu"];
        assert_eq!((f.n, f.max), (2, 0.55));
        assert!(close(f.share, 0.55 / cfg.foreign_cpu.unwrap().max_share));
        assert_eq!(f.per_sample, vec![Some(0.0), Some(0.55)]);
        let psi = &v.reported["psi_cpu_some"];
        assert_eq!((psi.n, psi.max), (2, 0.9));
        assert!(!v.in_sample.contains_key("psi_cpu_some"));
        assert!(
            v.warnings[0].contains("1 of 2 samples the generator waited"),
            "{:?}",
            v.warnings
        );
        // The target's own load alone (a multi-process server on two cores) is accepted,
        // with the warning.
        let own = Contention {
            foreign_cpu: Some(0.02),
            foreign_io_mib_s: Some(0.01),
            ..b.clone()
        };
        let v = judge_with_contention(
            &[10.0, 10.1, 10.0, 9.9],
            &[5.0, 5.1, 5.0, 4.9],
            &[Some(&q), Some(&own)],
            None,
            &cfg,
        );
        assert!(v.accepted, "{:?}", v.failures);
        assert_eq!(v.warnings.len(), 1);
        // A gate file can still bound the own-load channels.
        let mut strict = cfg;
        strict.psi_cpu_some = Some(calibration::gate::ShareBound { max_share: 0.5 });
        let v = judge_with_contention(
            &[10.0, 10.1, 10.0, 9.9],
            &[5.0, 5.1, 5.0, 4.9],
            &[Some(&q), Some(&own)],
            None,
            &strict,
        );
        assert_eq!(
            v.failures,
            vec!["psi_cpu_some 0.900 > 0.50 in sample 2".to_owned()]
        );
        // Quiet samples and the same kernels pass.
        let v = judge_with_contention(
            &[10.0, 10.1, 10.0, 9.9],
            &[5.0, 5.1, 5.0, 4.9],
            &[Some(&q), Some(&q)],
            None,
            &cfg,
        );
        assert!(v.accepted, "{:?}", v.failures);
        let json = serde_json::to_string(&v).unwrap();
        let back: calibration::GateVerdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn without_psi_or_schedstat_the_kernels_judge_alone_and_the_verdict_says_so() {
        let bare = Contention {
            window_ms: 1000.0,
            unavailable: vec![
                "PSI cpu (/proc/pressure/cpu: kernel without CONFIG_PSI, or psi=0)".into(),
            ],
            ..Contention::default()
        };
        let v = judge_with_contention(
            &[10.0, 10.1],
            &[5.0, 5.1],
            &[Some(&bare), None],
            None,
            &GateConfig::default(),
        );
        assert!(v.accepted);
        assert!(v.in_sample.is_empty());
        assert_eq!(
            v.unavailable,
            vec![
                "1 of 2 samples have no in-sample reading".to_owned(),
                "PSI cpu (/proc/pressure/cpu: kernel without CONFIG_PSI, or psi=0)".to_owned(),
            ]
        );
        assert!(v.lines().iter().any(|l| l.contains("the kernels alone")));
        // The kernels still refuse on their own.
        let v = judge_with_contention(
            &[10.0, 30.0],
            &[5.0, 5.1],
            &[None, None],
            None,
            &GateConfig::default(),
        );
        assert!(!v.accepted);
    }

    #[test]
    fn a_sample_is_judged_against_the_pool_not_its_own_two_readings() {
        let cfg = GateConfig::default();
        let pool = [r(10.0, 2.0), r(10.2, 30.0), r(9.8, 2.2), r(10.1, 2.1)];
        // Two io readings 4.5x apart, both within 2.5x of what the run reads: accepted (their
        // two-point CV of 0.86 is over any CV bound).
        let v = judge_sample(
            &[r(10.0, 1.0), r(10.0, 4.5)],
            Some(&quiet()),
            &pool,
            None,
            &cfg,
        );
        assert!(v.accepted, "{:?}", v.failures);
        let old = judge(&[10.0, 10.0], &[1.0, 4.5], None, &cfg);
        assert!(!old.accepted);
        // A reading 3x the pooled median is refused by the max/median bound (2.5 for io).
        let v = judge_sample(
            &[r(10.0, 2.0), r(10.0, 60.0)],
            Some(&quiet()),
            &pool,
            None,
            &cfg,
        );
        assert!(!v.accepted);
        assert!(
            v.failures[0].starts_with("io_ms 60.00 ms ="),
            "{:?}",
            v.failures
        );
        // With no pool the reference stands in; drift from it is judged.
        let v = judge_sample(
            &[r(16.0, 2.0), r(16.0, 2.0)],
            None,
            &[],
            Some(&reference(10.0, 2.0)),
            &cfg,
        );
        assert!(!v.accepted);
        assert!(
            v.failures
                .iter()
                .any(|f| f.starts_with("cpu_ms drift +0.600")),
            "{:?}",
            v.failures
        );
        assert!(v.notes.iter().any(|n| n.contains("no in-sample reading")));
        // With neither, only the in-sample channels judge, and the notes say so.
        let v = judge_sample(
            &[r(10.0, 2.0), r(40.0, 9.0)],
            Some(&quiet()),
            &[],
            None,
            &cfg,
        );
        assert!(v.accepted);
        assert!(
            v.notes.iter().any(|n| n.contains("not judged")),
            "{:?}",
            v.notes
        );
        // An in-sample channel over its bound refuses the sample.
        let busy = Contention {
            foreign_io_mib_s: Some(40.0),
            ..quiet()
        };
        let v = judge_sample(
            &[r(10.0, 2.0), r(10.0, 2.0)],
            Some(&busy),
            &pool,
            None,
            &cfg,
        );
        assert_eq!(
            v.failures,
            vec![format!(
                "foreign_io 40.000 > {:.2}",
                cfg.foreign_io.unwrap().max_share
            )]
        );
    }

    #[test]
    fn the_refusal_says_what_to_do_next() {
        let v = judge(
            &[10.0, 30.0],
            &[5.0, 5.1],
            Some(&reference(10.0, 5.0)),
            &GateConfig::default(),
        );
        let msg = v.refusal(Some(Path::new(
            "/home/u/.local/share/vaultbench/reference.json",
        )));
        assert!(!msg.contains('\n'));
        for part in [
            "cpu_ms cv",
            "judged against this machine's reference",
            "/home/u/.local/share/vaultbench/reference.json",
            "retry when the machine is quiet",
            "`vaultbench calibrate` on a quiet machine",
            "--gate-config",
        ] {
            assert!(msg.contains(part), "{part} missing: {msg}");
        }
        let v = judge(&[10.0, 30.0], &[5.0, 5.1], None, &GateConfig::default());
        assert!(
            v.refusal(None)
                .contains("no reference for this machine in no reference path")
        );
    }
}

mod round_trip {
    use super::*;
    use calibration::gate::{RTT, judge_rtt, judge_sample};
    use contract::schema::ChannelReading;

    fn r(rtt_ms: Option<f64>) -> ChannelReading {
        ChannelReading {
            cpu_ms: 10.0,
            io_ms: 2.0,
            rtt_ms,
        }
    }

    #[test]
    fn the_round_trip_is_judged_like_the_other_kernels_and_its_failures_come_after_theirs() {
        let cfg = GateConfig::default();
        let mut v = judge(&[10.0, 10.0, 10.0, 30.0], &[2.0; 4], None, &cfg);
        let kernels_failed = v.failures.len();
        assert!(kernels_failed > 0);
        judge_rtt(&mut v, &[8.0, 8.0, 8.0, 40.0], None, &cfg);
        assert!(!v.accepted);
        let rtt = &v.channels[RTT];
        assert_eq!(rtt.n, 4);
        assert!(!rtt.failures.is_empty());
        assert!(
            v.failures[kernels_failed].starts_with("rtt_ms "),
            "{:?}",
            v.failures
        );
        // Quiet round trips pass, and are judged against the reference's median.
        let mut reference = reference(10.0, 2.0);
        reference.rtt_ms = Some(8.0);
        let mut v = judge(&[10.0; 4], &[2.0; 4], Some(&reference), &cfg);
        judge_rtt(&mut v, &[8.0, 8.1, 7.9, 8.0], Some(&reference), &cfg);
        assert!(v.accepted, "{:?}", v.failures);
        assert_eq!(v.channels[RTT].reference_median, Some(8.0));
        // 2x the reference is beyond the default tolerance of 0.5.
        judge_rtt(&mut v, &[16.0; 4], Some(&reference), &cfg);
        assert!(!v.accepted);
        assert!(
            v.failures
                .iter()
                .any(|f| f.starts_with("rtt_ms drift +1.000")),
            "{:?}",
            v.failures
        );
    }

    #[test]
    fn an_old_reference_or_old_readings_leave_the_round_trip_unjudged_and_say_so() {
        let cfg = GateConfig::default();
        let old_reference = reference(10.0, 2.0);
        assert_eq!(old_reference.rtt_ms, None);
        let mut v = judge(&[10.0; 4], &[2.0; 4], Some(&old_reference), &cfg);
        judge_rtt(&mut v, &[8.0; 4], Some(&old_reference), &cfg);
        assert!(v.accepted);
        assert_eq!(v.channels[RTT].drift, None);
        assert!(
            v.warnings.iter().any(|w| w.contains("no rtt_ms median")),
            "{:?}",
            v.warnings
        );
        assert!(
            v.lines()
                .iter()
                .any(|l| l.starts_with("rtt_ms") && l.contains("drift not checked"))
        );
        // Readings without the channel (an earlier build's) add nothing.
        let mut v = judge(&[10.0; 4], &[2.0; 4], None, &cfg);
        judge_rtt(&mut v, &[], None, &cfg);
        assert!(!v.channels.contains_key(RTT));
        // The per-sample gate: judged when the readings have it, named when the reference lacks it.
        let pool = [r(Some(8.0)), r(Some(8.2)), r(Some(7.9))];
        let sv = judge_sample(&[r(Some(8.0)), r(Some(30.0))], None, &pool, None, &cfg);
        assert!(!sv.accepted);
        assert!(
            sv.failures.iter().any(|f| f.starts_with("rtt_ms 30.00 ms")),
            "{:?}",
            sv.failures
        );
        let sv = judge_sample(
            &[r(Some(8.0)), r(Some(8.1))],
            None,
            &pool,
            Some(&old_reference),
            &cfg,
        );
        assert!(sv.accepted, "{:?}", sv.failures);
        assert!(
            sv.notes
                .iter()
                .any(|n| n.starts_with("rtt_ms: this machine's reference has no median")),
            "{:?}",
            sv.notes
        );
        let sv = judge_sample(&[r(None), r(None)], None, &pool, None, &cfg);
        assert!(sv.figures.iter().all(|f| f.channel != RTT));
    }

    #[test]
    fn a_config_recorded_before_the_channel_reads_back_and_writes_back_without_it() {
        let mut old = serde_json::to_value(GateConfig::default()).unwrap();
        old.as_object_mut().unwrap().remove("rtt_ms");
        let cfg: GateConfig = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(cfg.rtt_ms, None);
        assert_eq!(serde_json::to_value(cfg).unwrap(), old);
        let mut v = judge(&[10.0; 4], &[2.0; 4], None, &cfg);
        judge_rtt(&mut v, &[8.0, 80.0], None, &cfg);
        assert!(v.accepted, "an old config does not bound the channel");
        // A gate file may bound it.
        let cfg =
            GateConfig::parse(Path::new("/etc/gate.toml"), "[rtt_ms]\nmax_cv = 0.5\n").unwrap();
        assert_eq!(cfg.rtt_ms.unwrap().max_cv, 0.5);
        assert_eq!(
            cfg.rtt_ms.unwrap().max_over_median,
            GateConfig::default().rtt_ms.unwrap().max_over_median
        );
    }
}

mod config {
    use super::*;

    fn parse(text: &str) -> Result<GateConfig, ConfigError> {
        GateConfig::parse(Path::new("/etc/gate.toml"), text)
    }

    #[test]
    fn the_committed_gate_toml_is_the_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("gate.toml");
        assert_eq!(
            GateConfig::load(Some(&path)).unwrap(),
            GateConfig::default()
        );
        assert_eq!(
            parse(&GateConfig::default().to_toml()).unwrap(),
            GateConfig::default()
        );
    }

    #[test]
    fn the_printed_config_states_every_table_s_unit() {
        let text = GateConfig::default().to_toml();
        for (table, unit) in [
            ("[cpu_ms]", "milliseconds"),
            ("[foreign_io]", "MiB per second"),
            ("[foreign_cpu]", "share of all CPU time"),
            ("[steal]", "share of all CPU time"),
        ] {
            let after = text
                .split(table)
                .nth(1)
                .unwrap_or_else(|| panic!("{table}:\n{text}"));
            let comment: String = after
                .lines()
                .skip(1)
                .take_while(|l| l.starts_with('#'))
                .collect();
            assert!(comment.contains(unit), "{table} without {unit:?}:\n{text}");
        }
    }

    #[test]
    fn in_sample_bounds_parse_and_refuse_unknown_keys() {
        let cfg = parse("[psi_io_some]\nmax_share = 0.95\n[steal]\nmax_share = 0\n").unwrap();
        assert_eq!(cfg.psi_io_some.unwrap().max_share, 0.95);
        assert_eq!(cfg.steal.unwrap().max_share, 0.0);
        assert_eq!(cfg.psi_cpu_some, GateConfig::default().psi_cpu_some);
        let err = parse("[psi_cpu_some]\nmax_cv = 0.3\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "gate config /etc/gate.toml: unknown key `psi_cpu_some.max_cv`"
        );
        let err = parse("[steal]\nmax_share = -1\n").unwrap_err().to_string();
        assert!(err.contains("`steal.max_share` must be a number"), "{err}");
        let err = parse("steal = 1\n").unwrap_err().to_string();
        assert!(err.contains("where a table was expected"), "{err}");
    }

    #[test]
    fn missing_keys_keep_defaults() {
        let cfg = parse("[io_ms]\nmax_cv = 0.6\n[cpu_ms]\nreference_tolerance = 1\n").unwrap();
        assert_eq!(
            cfg.io_ms,
            ChannelBounds {
                max_cv: 0.6,
                ..GateConfig::default().io_ms
            }
        );
        assert_eq!(cfg.cpu_ms.reference_tolerance, 1.0);
        assert_eq!(cfg.cpu_ms.max_cv, 0.20);
    }

    #[test]
    fn bad_files_name_the_file_and_key_on_one_line() {
        let cases = [
            (
                "[cpu_ms]\nmax_cvv = 0.2\n",
                "gate config /etc/gate.toml: unknown key `cpu_ms.max_cvv`",
            ),
            (
                "[disk_ms]\nmax_cv = 0.2\n",
                "gate config /etc/gate.toml: unknown key `disk_ms`",
            ),
            (
                "[io_ms]\nmax_over_median = -2.5\n",
                "gate config /etc/gate.toml: `io_ms.max_over_median` must be a number, found -2.5, bounds must be finite and >= 0",
            ),
            (
                "[io_ms]\nmax_cv = \"high\"\n",
                "gate config /etc/gate.toml: `io_ms.max_cv` must be a number, found a string",
            ),
            (
                "cpu_ms = 3\n",
                "gate config /etc/gate.toml: `cpu_ms` must be a number, found a value where a table was expected",
            ),
            ("[cpu_ms\n", "gate config /etc/gate.toml: not valid TOML: "),
        ];
        for (text, want) in cases {
            let msg = parse(text).unwrap_err().to_string();
            assert!(msg.starts_with(want), "{text:?}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        let missing = GateConfig::load(Some(Path::new("/nonexistent/gate.toml"))).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("gate config /nonexistent/gate.toml: ")
        );
    }
}

/// Reads lines from a child's stdout until one equals `want` (or the child closes it).
fn wait_for_line(out: &mut impl BufRead, want: &str) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line.trim() == want => return true,
            Ok(_) => {}
        }
    }
}

/// Re-runs this test binary as a child playing `test`'s child part.
fn child(test: &str, env: &str, value: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, value);
    cmd
}

#[test]
fn lock_is_exclusive_across_processes() {
    const ENV: &str = "VB_IT_LOCK_CHILD";
    if let Some(path) = std::env::var_os(ENV) {
        // Child: take the lock, say so, hold it until the parent closes our stdin (or 30 s).
        let _lock = MachineLock::acquire(Some(Path::new(&path)), false).unwrap();
        // libtest has already printed "test <name> ... " without a newline.
        println!("\nLOCKED");
        std::io::stdout().flush().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(30));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("machine.lock");
    let mut holder = child("lock_is_exclusive_across_processes", ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    assert!(
        wait_for_line(&mut out, "LOCKED"),
        "child did not take the lock"
    );

    // Without waiting: LockBusy, naming the path and the holder's pid.
    let err = MachineLock::acquire(Some(&path), false).unwrap_err();
    let busy = err.downcast_ref::<LockBusy>().expect("a LockBusy error");
    assert!(busy.0.starts_with(&path.display().to_string()), "{busy}");
    assert!(
        busy.0.contains(&format!("held by pid {}", holder.id())),
        "{busy}"
    );

    // Waiting: blocks while the child holds it, then gets it once the child exits.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter_path = path.clone();
    let waiter = std::thread::spawn(move || {
        let lock = MachineLock::acquire(Some(&waiter_path), true);
        tx.send(()).unwrap();
        lock.map(|_| ())
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the waiter got the lock while another process held it"
    );
    drop(holder.stdin.take()); // child sees EOF and exits, releasing the lock
    assert!(holder.wait().unwrap().success());
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the waiter never got the lock after the holder exited");
    waiter.join().unwrap().unwrap();
}

mod probe {
    use super::*;

    #[test]
    fn probe_json_has_one_row_per_thread_count_and_stops_on_time() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ProbeConfig {
            threads: vec![1, 2, 4],
            seconds: 0.2,
            dir: dir.path().to_owned(),
            mode: SyncMode::Fsync,
            shared_file: false,
        };
        let start = Instant::now();
        let mut seen = Vec::new();
        let report = run_fsync_probe(&cfg, |row| seen.push(row.threads)).unwrap();
        let wall = start.elapsed().as_secs_f64();
        assert_eq!(seen, vec![1, 2, 4]);
        // 3 steps of 0.2 s; a step ends within one flush of its deadline. The slack covers
        // a slow flush on a loaded CI disk, not a loop that ignores the clock.
        assert!((0.6..3.0).contains(&wall), "probe took {wall} s");
        for row in &report.rows {
            assert!((0.2..1.0).contains(&row.elapsed_s), "{row:?}");
            assert!(row.flushes > 0);
            assert!(close(row.flushes_per_s, row.flushes as f64 / row.elapsed_s));
        }
        let json = serde_json::to_value(&report).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "dir",
                "fs_type",
                "mode",
                "probe",
                "rows",
                "seconds_per_step",
                "shared_file",
                "write_bytes"
            ]
        );
        assert_eq!(json["probe"], "fsync");
        assert_eq!(json["mode"], "fsync");
        let row_keys: Vec<&str> = json["rows"][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            row_keys,
            [
                "elapsed_s",
                "flushes",
                "flushes_per_s",
                "flushes_per_s_per_thread",
                "latency_us_max",
                "latency_us_p50",
                "latency_us_p99",
                "speedup_vs_first",
                "threads"
            ]
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "probe left files behind"
        );
    }
}

//! Building a recording from its counted samples: the baseline holds each key's median, the
//! provenance sidecar its raw series, the exact snapshot, the per-sample metadata and one
//! sample's histograms. Pure: the caller supplies the clock reading and the harness identity,
//! and fills the target, machine, gate and digest fields afterwards.

use std::collections::BTreeMap;

use crate::schema::{
    Attempts, Baseline, FORMAT_VERSION, HarnessIdentity, KIND_BASELINE, KIND_PROVENANCE, Metric,
    MetricClass, Provenance, SampleMeta, SampleResult, TargetIdentity, median,
};

/// What a recording is built from.
pub struct RecordingInput<'a> {
    pub scenario: &'a str,
    pub profile: &'a str,
    pub seed: u64,
    pub vault_digest: &'a str,
    /// RFC 3339 wall time of the recording (metadata only).
    pub recorded_at: String,
    pub harness: HarnessIdentity,
    /// The counted samples, warm-up excluded, in the order they ran.
    pub counted: &'a [SampleResult],
    /// Metadata of every sample that ran, warm-up included.
    pub metas: &'a [SampleMeta],
    pub attempts: Attempts,
}

/// The built pair, and the keys left out because some sample lacked them.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub baseline: Baseline,
    pub provenance: Provenance,
    pub dropped: Vec<String>,
}

/// Building needs at least one counted sample.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no counted samples to build the recording of scenario {0:?} from")]
pub struct NoSamples(pub String);

/// The metadata the sidecar keeps of one sample.
pub fn sample_meta(r: &SampleResult, ok: bool) -> SampleMeta {
    SampleMeta {
        index: r.index,
        warmup: r.warmup,
        pid: r.pid,
        server_pid: r.server_pid,
        ok,
        errors: r.errors.clone(),
        calibration: r.calibration.clone(),
        contention: r.contention.clone(),
        retried_because: Vec::new(),
    }
}

/// Medians per key over the counted samples; keys missing from any sample are dropped (and
/// listed in [`Built::dropped`]).
pub fn build(input: RecordingInput<'_>) -> Result<Built, NoSamples> {
    let counted = input.counted;
    let first = counted
        .first()
        .ok_or_else(|| NoSamples(input.scenario.to_owned()))?;
    let mut metrics = BTreeMap::new();
    let mut raw = BTreeMap::new();
    let mut exact_snapshot = BTreeMap::new();
    let mut dropped = Vec::new();
    for (key, m0) in &first.metrics {
        let series: Option<Vec<f64>> = counted
            .iter()
            .map(|s| s.metrics.get(key).map(|m| m.value))
            .collect();
        let Some(series) = series else {
            dropped.push(key.clone());
            continue;
        };
        let Some(value) = median(&series) else {
            continue;
        };
        let m = Metric {
            value,
            ..m0.clone()
        };
        if m.class == MetricClass::Exact {
            exact_snapshot.insert(key.clone(), value);
        }
        metrics.insert(key.clone(), m);
        raw.insert(key.clone(), series);
    }
    let histograms = median_histograms(counted);
    let baseline = Baseline {
        kind: KIND_BASELINE.into(),
        format_version: FORMAT_VERSION,
        scenario: input.scenario.to_owned(),
        seed: input.seed,
        samples: counted.len() as u32,
        metrics,
    };
    let provenance = Provenance {
        kind: KIND_PROVENANCE.into(),
        format_version: FORMAT_VERSION,
        scenario: input.scenario.to_owned(),
        profile: input.profile.to_owned(),
        seed: input.seed,
        vault_digest: input.vault_digest.to_owned(),
        recorded_at: input.recorded_at,
        harness: input.harness,
        target: TargetIdentity {
            command: String::new(),
            executable: String::new(),
            sha256: String::new(),
            version: String::new(),
            inputs: Default::default(),
            note: None,
            git: None,
        },
        machine: contract::machine::Fingerprint::default(),
        loadavg_before: None,
        loadavg_after: None,
        gate: None,
        attempts: input.attempts,
        samples: input.metas.to_vec(),
        raw,
        exact_snapshot,
        histograms,
        cost: None,
        user_vault: None,
        digest: String::new(),
    };
    Ok(Built {
        baseline,
        provenance,
        dropped,
    })
}

/// For each histogram key `K`, the histogram of the sample whose `K.p50_us` is the median of
/// that key over the counted samples (for an even count, the nearer of the two middle ones;
/// ties go to the earlier sample), so a report's percentile curve and its p50 column agree.
/// (A key without a p50 metric takes the first sample that has it.)
pub fn median_histograms(counted: &[SampleResult]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let keys: std::collections::BTreeSet<&String> =
        counted.iter().flat_map(|s| s.histograms.keys()).collect();
    for key in keys {
        let p50_key = format!("{key}.p50_us");
        let with: Vec<(f64, &String)> = counted
            .iter()
            .filter_map(|s| {
                let h = s.histograms.get(key)?;
                let v = s.metrics.get(&p50_key).map_or(0.0, |m| m.value);
                Some((v, h))
            })
            .collect();
        let values: Vec<f64> = with.iter().map(|w| w.0).collect();
        let Some(mid) = median(&values) else {
            continue;
        };
        // min_by keeps the first of equal distances: the earlier sample wins a tie.
        if let Some((_, h)) = with
            .iter()
            .min_by(|a, b| (a.0 - mid).abs().total_cmp(&(b.0 - mid).abs()))
        {
            out.insert(key.clone(), (*h).clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Better, ChannelReading, KIND_SAMPLE};

    fn sample(index: u32, values: &[(&str, f64)]) -> SampleResult {
        SampleResult {
            kind: KIND_SAMPLE.into(),
            format_version: FORMAT_VERSION,
            scenario: "s".into(),
            index,
            warmup: false,
            pid: 100 + index,
            server_pid: 200 + index,
            vault_digest: "d".into(),
            metrics: values
                .iter()
                .map(|(k, v)| {
                    let m = if k.starts_with("exact") {
                        Metric::exact(*v, "count")
                    } else {
                        Metric::timing(*v, "ms", Better::Lower)
                    };
                    ((*k).to_owned(), m)
                })
                .collect(),
            calibration: vec![ChannelReading {
                cpu_ms: 1.0,
                io_ms: 1.0,
                rtt_ms: None,
            }],
            contention: None,
            errors: Vec::new(),
            histograms: BTreeMap::from([(format!("h{index}"), format!("enc{index}"))]),
            paired: None,
            profiles: BTreeMap::new(),
            blocked: BTreeMap::new(),
        }
    }

    fn input<'a>(counted: &'a [SampleResult], metas: &'a [SampleMeta]) -> RecordingInput<'a> {
        RecordingInput {
            scenario: "s",
            profile: "p",
            seed: 7,
            vault_digest: "d",
            recorded_at: "2026-01-01T00:00:00Z".into(),
            harness: HarnessIdentity {
                version: "0".into(),
                git_commit: None,
                git_dirty: None,
                toolchain: None,
            },
            counted,
            metas,
            attempts: Attempts {
                attempted: 1,
                refused: 0,
                failed: 0,
            },
        }
    }

    #[test]
    fn medians_raw_series_exact_snapshot_and_histograms() {
        let counted = [
            sample(1, &[("t", 30.0), ("exact.n", 5.0)]),
            sample(2, &[("t", 10.0), ("exact.n", 5.0)]),
            sample(3, &[("t", 20.0), ("exact.n", 5.0)]),
        ];
        let metas: Vec<SampleMeta> = counted.iter().map(|s| sample_meta(s, true)).collect();
        let b = build(input(&counted, &metas)).unwrap();
        assert_eq!(b.baseline.samples, 3);
        assert_eq!(b.baseline.metrics["t"].value, 20.0);
        assert_eq!(b.provenance.raw["t"], vec![30.0, 10.0, 20.0]);
        assert_eq!(
            b.provenance.exact_snapshot,
            BTreeMap::from([("exact.n".to_owned(), 5.0)])
        );
        // Each sample has its own histogram key here, so each key comes from its one sample.
        let all: BTreeMap<String, String> =
            counted.iter().flat_map(|s| s.histograms.clone()).collect();
        assert_eq!(b.provenance.histograms, all);
        assert_eq!(b.provenance.samples, metas);
        assert!(b.dropped.is_empty());
    }

    #[test]
    fn even_count_takes_the_mean_of_the_middle_two_and_missing_keys_are_dropped() {
        let counted = [
            sample(1, &[("t", 10.0), ("only_first", 1.0)]),
            sample(2, &[("t", 13.0)]),
        ];
        let b = build(input(&counted, &[])).unwrap();
        assert_eq!(b.baseline.metrics["t"].value, 11.5);
        assert_eq!(b.dropped, vec!["only_first".to_owned()]);
        assert!(!b.baseline.metrics.contains_key("only_first"));
    }

    #[test]
    fn no_samples_is_an_error_naming_the_scenario() {
        let e = build(input(&[], &[])).unwrap_err();
        assert!(e.to_string().contains("\"s\""), "{e}");
    }

    fn with_p50(index: u32, p50: &[(&str, f64)]) -> SampleResult {
        let mut s = sample(index, &[]);
        for (k, v) in p50 {
            s.metrics.insert(
                format!("{k}.p50_us"),
                Metric::timing(*v, "us", Better::Lower),
            );
            s.histograms.insert((*k).to_owned(), format!("{k}@{index}"));
        }
        s
    }

    #[test]
    fn each_histogram_comes_from_the_sample_that_is_median_for_its_key() {
        // Sample 1 is the middle one in time, but the median of neither key.
        let counted = [
            with_p50(0, &[("a", 500.0), ("b", 90.0)]),
            with_p50(1, &[("a", 900.0), ("b", 10.0)]),
            with_p50(2, &[("a", 100.0), ("b", 50.0)]),
        ];
        let h = median_histograms(&counted);
        assert_eq!(
            h["a"], "a@0",
            "a's p50 series 500, 900, 100 has its median in sample 0"
        );
        assert_eq!(
            h["b"], "b@2",
            "b's p50 series 90, 10, 50 has its median in sample 2"
        );
        // Four samples: the median is between the middle two; the nearer one, else the earlier.
        let four = [
            with_p50(0, &[("a", 40.0)]),
            with_p50(1, &[("a", 10.0)]),
            with_p50(2, &[("a", 20.0)]),
            with_p50(3, &[("a", 30.0)]),
        ];
        assert_eq!(median_histograms(&four)["a"], "a@2");
    }
}

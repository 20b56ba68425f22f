//! The hand-made recording fixtures under `reports/tests/fixtures/`: built here, deterministically
//! (seeded ChaCha8Rng), valid per the schema and bound by `binding_digest`, so they verify like
//! a real recording. `VAULTBENCH_UPDATE_FIXTURES=1 cargo test -p reports --test render` rewrites
//! the files; otherwise the test fails if the committed files drift from this generator.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reports::schema::{
    AbResult, Attempts, Baseline, Better, ChannelReading, Contention, FORMAT_VERSION,
    HarnessIdentity, KIND_AB, KIND_BASELINE, KIND_PROVENANCE, Metric, MetricClass, Provenance,
    SampleMeta, TargetIdentity, binding_digest, median, verify_pair,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The fixed timestamp of the fixtures (redacted in snapshots anyway).
pub const RECORDED_AT: &str = "2026-11-30T12:00:00Z";

const SAMPLES: usize = 5;

struct Gen {
    rng: ChaCha8Rng,
    metrics: BTreeMap<String, Metric>,
    raw: BTreeMap<String, Vec<f64>>,
}

impl Gen {
    /// A timing/resource key: five samples jittered around `centre` by up to ±`jitter` (relative).
    fn noisy(
        &mut self,
        key: &str,
        centre: f64,
        jitter: f64,
        unit: &str,
        class: MetricClass,
        better: Better,
    ) {
        let series: Vec<f64> = (0..SAMPLES)
            .map(|_| {
                let u: f64 = self.rng.random::<f64>() * 2.0 - 1.0;
                ((centre * (1.0 + jitter * u)) * 1000.0).round() / 1000.0
            })
            .collect();
        let value = median(&series).unwrap();
        self.metrics
            .insert(key.into(), Metric::new(value, unit, class, better));
        self.raw.insert(key.into(), series);
    }
    fn timing(&mut self, key: &str, centre: f64, unit: &str) {
        self.noisy(key, centre, 0.06, unit, MetricClass::Timing, Better::Lower);
    }
    fn rate(&mut self, key: &str, centre: f64, unit: &str) {
        self.noisy(key, centre, 0.05, unit, MetricClass::Timing, Better::Higher);
    }
    fn resource(&mut self, key: &str, centre: f64, unit: &str) {
        self.noisy(
            key,
            centre,
            0.04,
            unit,
            MetricClass::Resource,
            Better::Lower,
        );
    }
    fn exact(&mut self, key: &str, v: f64, unit: &str) {
        self.metrics.insert(key.into(), Metric::exact(v, unit));
        self.raw.insert(key.into(), vec![v; SAMPLES]);
    }
}

/// A latency histogram (µs) of `n` log-normal-ish values around `p50_us`, with a tail.
fn histogram(rng: &mut ChaCha8Rng, n: usize, p50_us: f64) -> String {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for _ in 0..n {
        // Sum of uniforms ~ normal; exp makes it log-normal (sigma ~0.35), plus a rare slow tail.
        let z: f64 = (0..6).map(|_| rng.random::<f64>()).sum::<f64>() - 3.0;
        let tail = if rng.random::<f64>() < 0.01 { 4.0 } else { 1.0 };
        h.record((p50_us * (0.35 * z).exp() * tail).max(1.0) as u64)
            .unwrap();
    }
    contract::histogram::encode(&h).unwrap()
}

fn channel(
    name: &str,
    xs: &[f64],
    max_cv: f64,
    max_over: f64,
    tol: f64,
    reference: f64,
) -> serde_json::Value {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let med = median(xs).unwrap();
    let max = xs.iter().copied().fold(f64::MIN, f64::max);
    let min = xs.iter().copied().fold(f64::MAX, f64::min);
    let cv = sd / mean;
    let mom = max / med;
    let drift = med / reference - 1.0;
    serde_json::json!({
        "n": xs.len(), "median": med, "mean": mean, "min": min, "max": max, "cv": cv,
        "max_over_median": mom, "reference_median": reference, "drift": drift,
        "bounds": { "max_cv": max_cv, "max_over_median": max_over, "reference_tolerance": tol },
        "cv_share": cv / max_cv, "max_over_median_share": (mom - 1.0) / (max_over - 1.0),
        "drift_share": drift.abs() / tol, "failures": [], "channel": name,
    })
}

/// The `small` scenario as the harness records it (keys as harness/src/sample/phases.rs names them).
pub fn small() -> (Baseline, Provenance) {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(0x5eed),
        metrics: BTreeMap::new(),
        raw: BTreeMap::new(),
    };
    g.timing("cold_start.ready_ms", 41.7, "ms");
    // Cold push: 100 notes -> 180 distinct chunks (20 duplicate-body groups share chunks).
    g.timing("cold_push.wall_ms", 1_210.0, "ms");
    g.rate("cold_push.files_per_s", 82.6, "files/s");
    g.exact("cold_push.files", 100.0, "count");
    g.exact("cold_push.dirs", 12.0, "count");
    g.exact("cold_push.bytes", 161_530.0, "bytes");
    g.exact("cold_push.requests", 381.0, "count");
    g.exact("cold_push.chunks_transferred", 180.0, "count");
    g.exact("cold_push.chunks_present", 20.0, "count");
    g.exact("cold_push.requests.chunks-exists", 100.0, "count");
    g.exact("cold_push.requests.put-chunk", 180.0, "count");
    g.exact("cold_push.requests.post-version", 100.0, "count");
    g.exact("cold_push.requests.changes", 1.0, "count");
    for (route, p50) in [
        ("chunks-exists", 310.0),
        ("put-chunk", 2_350.0),
        ("post-version", 2_900.0),
    ] {
        g.timing(&format!("cold_push.{route}.p50_us"), p50, "us");
        g.timing(&format!("cold_push.{route}.p95_us"), p50 * 1.9, "us");
        g.timing(&format!("cold_push.{route}.p99_us"), p50 * 3.1, "us");
    }
    g.exact("cold_push.errors", 0.0, "count");
    g.noisy(
        "cold_push.own_echo.answers",
        3.0,
        0.0,
        "count",
        MetricClass::Timing,
        Better::Lower,
    );
    g.exact("cold_push.own_echo.changes", 100.0, "count");
    g.exact("cold_push.server.fsyncs.chunk", 180.0, "count");
    g.exact("cold_push.server.fsyncs.dir", 180.0, "count");
    g.exact("cold_push.server.fsyncs.journal", 100.0, "count");
    g.exact("cold_push.server.fsyncs.nonce", 381.0, "count");
    g.exact("cold_push.server.fsyncs_per_file", 8.41, "fsyncs/file");
    g.exact("cold_push.server.journal_bytes", 48_200.0, "bytes");
    // Cold pull on device B.
    g.timing("cold_pull.wall_ms", 640.0, "ms");
    g.rate("cold_pull.files_per_s", 156.2, "files/s");
    g.exact("cold_pull.files", 100.0, "count");
    g.exact("cold_pull.dirs", 12.0, "count");
    g.exact("cold_pull.bytes", 161_530.0, "bytes");
    g.exact("cold_pull.requests", 282.0, "count");
    g.exact("cold_pull.chunks_transferred", 180.0, "count");
    g.exact("cold_pull.requests.changes", 2.0, "count");
    g.exact("cold_pull.requests.get-chunk", 180.0, "count");
    g.exact("cold_pull.requests.get-version", 100.0, "count");
    for (route, p50) in [
        ("changes", 900.0),
        ("get-chunk", 420.0),
        ("get-version", 380.0),
    ] {
        g.timing(&format!("cold_pull.{route}.p50_us"), p50, "us");
        g.timing(&format!("cold_pull.{route}.p95_us"), p50 * 1.7, "us");
        g.timing(&format!("cold_pull.{route}.p99_us"), p50 * 2.6, "us");
    }
    g.exact("cold_pull.errors", 0.0, "count");
    // A passed check (1 = the pulled tree is byte-identical): higher is better.
    g.metrics.insert(
        "cold_pull.byte_identical".into(),
        Metric::new(1.0, "bool", MetricClass::Exact, Better::Higher),
    );
    g.raw
        .insert("cold_pull.byte_identical".into(), vec![1.0; SAMPLES]);
    g.exact("cold_pull.server.fsyncs.nonce", 282.0, "count");
    // Idle resync, edit propagation, folder rename.
    g.exact("idle_resync.requests", 1.0, "count");
    g.exact("idle_resync.mismatched", 0.0, "count");
    g.exact("idle_resync.files_examined", 100.0, "count");
    g.timing("idle_resync.wall_ms", 6.4, "ms");
    g.exact("idle_resync.server.fsyncs.nonce", 1.0, "count");
    g.timing("edit.p50_ms", 14.2, "ms");
    g.timing("edit.p95_ms", 21.9, "ms");
    g.timing("edit.max_ms", 25.3, "ms");
    g.exact("edit.rounds", 20.0, "count");
    g.exact("edit.push_requests", 60.0, "count");
    g.exact("edit.server.fsyncs.journal", 20.0, "count");
    g.timing("folder_rename.wall_ms", 96.0, "ms");
    g.exact("folder_rename.versions", 11.0, "count");
    g.exact("folder_rename.requests", 22.0, "count");
    g.timing("folder_rename.propagate_ms", 58.0, "ms");
    g.exact("folder_rename.pull_requests", 13.0, "count");
    g.exact("folder_rename.server.fsyncs.journal", 11.0, "count");
    // Route load at 1 and 4 in flight.
    let routes = [
        ("changes", 650.0),
        ("chunks-exists", 300.0),
        ("get-chunk", 380.0),
        ("post-version", 2_700.0),
        ("put-chunk", 2_200.0),
    ];
    for (route, p50) in routes {
        for level in [1u32, 4] {
            let k = format!("route.{route}.c{level}");
            let p50 = p50 * if level == 4 { 1.8 } else { 1.0 };
            g.timing(&format!("{k}.p50_us"), p50, "us");
            g.timing(&format!("{k}.p99_us"), p50 * 2.9, "us");
            g.rate(
                &format!("{k}.rps"),
                f64::from(level) * 1e6 / p50 * 0.92,
                "req/s",
            );
            // An exact count (noisy() with no spread keeps the fixture's random stream).
            g.noisy(
                &format!("{k}.errors"),
                0.0,
                0.0,
                "count",
                MetricClass::Exact,
                Better::Lower,
            );
        }
    }
    // Server resources.
    g.resource("server.cpu_user_s", 1.62, "s");
    g.resource("server.cpu_sys_s", 0.91, "s");
    g.resource("server.cpu_s", 2.53, "s");
    g.resource("server.peak_rss_mib", 18.4, "MiB");
    g.resource("server.mean_rss_mib", 14.9, "MiB");
    g.resource("server.io.write_bytes", 2_412_544.0, "bytes");
    g.resource("server.io.syscw", 14_210.0, "count");
    g.resource("server.thread_cpu_s.tokio-runtime-w", 2.21, "s");
    g.resource("server.thread_cpu_s.journal", 0.29, "s");

    let mut histograms = BTreeMap::new();
    for (route, p50, n) in [
        ("chunks-exists", 310.0, 100),
        ("put-chunk", 2_350.0, 180),
        ("post-version", 2_900.0, 100),
    ] {
        histograms.insert(format!("cold_push.{route}"), histogram(&mut g.rng, n, p50));
    }
    for (route, p50, n) in [("get-chunk", 420.0, 180), ("get-version", 380.0, 100)] {
        histograms.insert(format!("cold_pull.{route}"), histogram(&mut g.rng, n, p50));
    }
    for (route, p50) in routes {
        for level in [1u32, 4] {
            let p = p50 * if level == 4 { 1.8 } else { 1.0 };
            histograms.insert(
                format!("route.{route}.c{level}"),
                histogram(&mut g.rng, 2_000, p),
            );
        }
    }
    // Each curve is the median sample's, as a recording makes it (`median_histograms`): a
    // key's p50 series is shifted so that its median is the curve's own p50. No RNG draw, so
    // the other values keep their streams.
    for (key, b64) in &histograms {
        let p50_key = format!("{key}.p50_us");
        let Some(series) = g.raw.get_mut(&p50_key) else {
            continue;
        };
        let h = reports::charts::decode_histogram(key, b64).unwrap();
        let p50 = h.value_at_quantile(0.5) as f64;
        let shift = p50 - median(series).unwrap();
        for v in series.iter_mut() {
            *v = ((*v + shift) * 1000.0).round() / 1000.0;
        }
        let m = median(series).unwrap();
        assert_eq!(m, p50, "{key}");
        g.metrics.get_mut(&p50_key).unwrap().value = m;
    }
    // Calibration: two readings per sample, warm-up included in the metas but not the gate.
    let mut samples = Vec::new();
    let (mut cpu, mut io) = (Vec::new(), Vec::new());
    for i in 0..=SAMPLES as u32 {
        let calibration: Vec<ChannelReading> = (0..2)
            .map(|_| ChannelReading {
                cpu_ms: ((48.0 * (1.0 + 0.02 * (g.rng.random::<f64>() - 0.5))) * 1000.0).round()
                    / 1000.0,
                io_ms: ((6.1 * (1.0 + 0.10 * (g.rng.random::<f64>() - 0.5))) * 1000.0).round()
                    / 1000.0,
                rtt_ms: None,
            })
            .collect();
        if i > 0 {
            cpu.extend(calibration.iter().map(|r| r.cpu_ms));
            io.extend(calibration.iter().map(|r| r.io_ms));
        }
        samples.push(SampleMeta {
            index: i,
            warmup: i == 0,
            pid: 41_000 + i * 7,
            server_pid: 41_001 + i * 7,
            ok: true,
            errors: vec![],
            calibration,
            // Fixed, plausible quiet-machine shares (no RNG draw, so the other values keep
            // their streams): a few % run-queue delay, a little PSI, no steal; pinned sets.
            contention: Some(Contention {
                window_ms: 9_000.0 + 37.0 * f64::from(i),
                server_cpu_ms: 4_100.0 + 11.0 * f64::from(i),
                generator_cpu_ms: 1_900.0 + 7.0 * f64::from(i),
                server_run_delay: Some(0.031 + 0.004 * f64::from(i)),
                generator_run_delay: Some(0.022 + 0.003 * f64::from(i)),
                psi_cpu_some: Some(0.041 + 0.002 * f64::from(i)),
                psi_io_some: Some(0.38 + 0.01 * f64::from(i)),
                steal: Some(0.0),
                foreign_cpu: Some(0.0),
                foreign_io_mib_s: Some(0.0),
                foreign_unreadable: 0,
                unavailable: vec![],
                server_cpus: vec![0],
                generator_cpus: vec![1],
            }),
            retried_because: vec![],
        });
    }
    let counted: Vec<&Contention> = samples
        .iter()
        .filter(|s| !s.warmup)
        .filter_map(|s| s.contention.as_ref())
        .collect();
    let in_sample = |name: &str, bound: f64, pick: fn(&Contention) -> Option<f64>| {
        let mut v: Vec<f64> = counted.iter().filter_map(|c| pick(c)).collect();
        let per: Vec<Option<f64>> = counted.iter().map(|c| pick(c)).collect();
        v.sort_by(f64::total_cmp);
        let max = v[v.len() - 1];
        serde_json::json!({
            "n": v.len(), "median": v[v.len() / 2], "max": max, "max_share": bound,
            "share": max / bound, "per_sample": per, "failures": [],
        })
        .as_object()
        .map(|o| (name.to_owned(), serde_json::Value::Object(o.clone())))
        .unwrap()
    };
    let in_sample: serde_json::Map<String, serde_json::Value> = [
        in_sample("generator_run_delay", 0.5, |c| c.generator_run_delay),
        in_sample("psi_cpu_some", 0.5, |c| c.psi_cpu_some),
        in_sample("psi_io_some", 0.9, |c| c.psi_io_some),
        in_sample("server_run_delay", 0.5, |c| c.server_run_delay),
        in_sample("steal", 0.1, |c| c.steal),
    ]
    .into_iter()
    .collect();
    let gate = serde_json::json!({
        "config": {
            "cpu_ms": { "max_cv": 0.20, "max_over_median": 1.6, "reference_tolerance": 0.5 },
            "io_ms": { "max_cv": 0.45, "max_over_median": 2.5, "reference_tolerance": 1.0 },
        },
        "verdict": {
            "accepted": true,
            "drift_checked": true,
            "reference_id": "3f9c2a71d04e8b55",
            "channels": {
                "cpu_ms": channel("cpu_ms", &cpu, 0.20, 1.6, 0.5, 47.2),
                "io_ms": channel("io_ms", &io, 0.45, 2.5, 1.0, 5.8),
            },
            "in_sample": in_sample,
            "unavailable": [],
            "failures": [],
        },
    });
    let exact_snapshot = g
        .metrics
        .iter()
        .filter(|(_, m)| m.class == MetricClass::Exact)
        .map(|(k, m)| (k.clone(), m.value))
        .collect();
    let baseline = Baseline {
        kind: KIND_BASELINE.into(),
        format_version: FORMAT_VERSION,
        scenario: "small".into(),
        seed: 0x5eed,
        samples: SAMPLES as u32,
        metrics: g.metrics,
    };
    let mut provenance = Provenance {
        kind: KIND_PROVENANCE.into(),
        format_version: FORMAT_VERSION,
        scenario: "small".into(),
        profile: "small".into(),
        seed: 0x5eed,
        vault_digest: "9b1f0c3e5d7a2b4c6e8f0a1b3c5d7e9f1a2b3c4d5e6f708192a3b4c5d6e7f809".into(),
        recorded_at: RECORDED_AT.into(),
        harness: HarnessIdentity {
            version: "0.1.0".into(),
            git_commit: Some("7107fd6c1a2b3c4d5e6f708192a3b4c5d6e7f809".into()),
            git_dirty: Some(false),
            toolchain: Some("rustc 1.95.0".into()),
        },
        target: TargetIdentity {
            command: "ref".into(),
            executable: "/usr/local/bin/vaultbench".into(),
            sha256: "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00".into(),
            version: "refserver 0.1.0".into(), inputs: Default::default(), note: None, git: None,
        },
        machine: serde_json::from_value(serde_json::json!({
            "identity": {
                "arch": "x86_64", "cpu_governor": "not exposed", "cpu_model": "AMD EPYC 7B13", "fs_type": "ext4",
                "kernel": "6.1.0-27-cloud-amd64", "logical_cpus": "2", "memory_gib": "7.8", "os": "Debian GNU/Linux 12 (bookworm)",
                "virtualisation": "kvm",
            },
            "info": { "hostname": "fixture-host", "data_dir": "/tmp/vaultbench-run-fixture" },
        }))
        .expect("a fingerprint"),
        loadavg_before: Some([0.12, 0.2, 0.18]),
        loadavg_after: Some([1.05, 0.41, 0.25]),
        gate: Some(serde_json::from_value(gate).expect("a gate")),
        attempts: Attempts {
            attempted: 2,
            refused: 1,
            failed: 0,
        },
        samples,
        raw: g.raw,
        exact_snapshot,
        histograms,
        cost: None,
        user_vault: None,
        digest: String::new(),
    };
    provenance.digest = binding_digest(&baseline, &provenance);
    (baseline, provenance)
}

pub fn pretty<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap();
    s.push('\n');
    s
}

/// The A/B result a real `vaultbench ab` run wrote (`tests/fixtures/ab.json`; how it was
/// made is in `contract/tests/recorded.rs`), read as the harness reads it: through the
/// contract's kind/version check.
pub fn ab() -> AbResult {
    let bytes = std::fs::read(dir().join("ab.json")).unwrap();
    contract::format::decode_slice(&bytes, KIND_AB).unwrap()
}

/// Reads a fixture pair from `tests/fixtures/<name>.json` (+ sidecar).
pub fn read(name: &str) -> (Baseline, Provenance) {
    let b = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let p = std::fs::read_to_string(dir().join(format!("{name}.provenance.json"))).unwrap();
    (
        serde_json::from_str(&b).unwrap(),
        serde_json::from_str(&p).unwrap(),
    )
}

#[test]
fn fixtures_are_current_and_verify() {
    let (b, p) = small();
    assert_eq!(
        verify_pair(&b, &p),
        vec![],
        "the generator makes a coherent pair"
    );
    let files = [
        ("small.json", pretty(&b)),
        ("small.provenance.json", pretty(&p)),
    ];
    if std::env::var_os("VAULTBENCH_UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        for (name, text) in &files {
            std::fs::write(dir().join(name), text).unwrap();
        }
    }
    for (name, text) in &files {
        let on_disk = std::fs::read_to_string(dir().join(name)).unwrap_or_default();
        assert!(
            on_disk == *text,
            "{name} differs from the generator: run with VAULTBENCH_UPDATE_FIXTURES=1"
        );
    }
    let (rb, rp) = read("small");
    assert_eq!(
        verify_pair(&rb, &rp),
        vec![],
        "the committed files verify as read back"
    );
}

//! One sample, run inside a fresh `vaultbench sample` subprocess: calibration reading, a fresh
//! server with a fresh data dir, the scenario's phases driven with signed devices, the server
//! stopped and reaped for its rusage, a second reading; one JSON result on stdout.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reports::schema::{Better, ChannelReading, FORMAT_VERSION, KIND_SAMPLE, Metric, SampleResult};
use scenarios::scenario::Scenario;

use crate::target::{Server, ServerUsage, TargetSpec};

/// What the parent hands a sample subprocess.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SamplePlan {
    pub scenario: Scenario,
    pub seed: u64,
    pub target: TargetSpec,
    pub vault_dir: PathBuf,
    pub vault_digest: String,
    pub work_dir: PathBuf,
    pub index: u32,
    pub warmup: bool,
}

/// Hidden: run one sample plan (the parent re-executes itself with this).
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    #[arg(long)]
    pub plan: PathBuf,
}

pub fn run(args: SampleArgs) -> anyhow::Result<i32> {
    let text = std::fs::read(&args.plan)
        .with_context(|| format!("reading sample plan {}", args.plan.display()))?;
    let plan: SamplePlan = serde_json::from_slice(&text)
        .with_context(|| format!("sample plan {}", args.plan.display()))?;
    let result = execute(&plan);
    println!("{}", serde_json::to_string(&result)?);
    Ok(if result.errors.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::ERROR
    })
}

/// Metric keys being built for one sample.
#[derive(Default)]
pub struct Metrics {
    pub map: BTreeMap<String, Metric>,
    pub histograms: BTreeMap<String, String>,
}

impl Metrics {
    pub fn exact(&mut self, key: impl Into<String>, v: f64, unit: &str) {
        self.map.insert(key.into(), Metric::exact(v, unit));
    }
    pub fn timing(&mut self, key: impl Into<String>, v: f64, unit: &str, better: Better) {
        self.map.insert(key.into(), Metric::timing(v, unit, better));
    }
    pub fn resource(&mut self, key: impl Into<String>, v: f64, unit: &str) {
        self.map.insert(key.into(), Metric::resource(v, unit));
    }
    /// A check the sample passed (unit `bool`, 1 = passed; higher is better). A failed check
    /// fails the sample instead, so a recording only ever holds 1; the direction still says
    /// which way is good, for `compare`, A/B and the dashboard exports.
    pub fn passed(&mut self, key: impl Into<String>) {
        self.map.insert(
            key.into(),
            Metric::new(
                1.0,
                "bool",
                reports::schema::MetricClass::Exact,
                Better::Higher,
            ),
        );
    }
}

/// Runs the plan; never panics on a failing target: failures become `errors`.
pub fn execute(plan: &SamplePlan) -> SampleResult {
    let mut result = SampleResult {
        kind: KIND_SAMPLE.into(),
        format_version: FORMAT_VERSION,
        scenario: plan.scenario.name.clone(),
        index: plan.index,
        warmup: plan.warmup,
        pid: std::process::id(),
        server_pid: 0,
        vault_digest: plan.vault_digest.clone(),
        metrics: BTreeMap::new(),
        calibration: Vec::new(),
        errors: Vec::new(),
        histograms: BTreeMap::new(),
    };
    let sample_dir = plan.work_dir.join(format!("sample-{}", plan.index));
    match read_channels(&plan.work_dir) {
        Ok(r) => result.calibration.push(r),
        Err(e) => result
            .errors
            .push(format!("calibration reading before: {e:#}")),
    }
    let mut m = Metrics::default();
    if let Err(e) = measure(plan, &sample_dir, &mut m, &mut result.server_pid) {
        result.errors.push(format!("{e:#}"));
    }
    let _ = std::fs::remove_dir_all(&sample_dir);
    match read_channels(&plan.work_dir) {
        Ok(r) => result.calibration.push(r),
        Err(e) => result
            .errors
            .push(format!("calibration reading after: {e:#}")),
    }
    result.metrics = m.map;
    result.histograms = m.histograms;
    result
}

fn read_channels(dir: &Path) -> anyhow::Result<ChannelReading> {
    let r = calibration::read_channels(dir)
        .with_context(|| format!("calibration channels in {}", dir.display()))?;
    Ok(ChannelReading {
        cpu_ms: r.cpu_ms,
        io_ms: r.io_ms,
    })
}

fn measure(
    plan: &SamplePlan,
    sample_dir: &Path,
    m: &mut Metrics,
    server_pid: &mut u32,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(sample_dir)
        .with_context(|| format!("creating {}", sample_dir.display()))?;
    // Started on this (main) thread: PR_SET_PDEATHSIG follows the spawning thread.
    let mut server = Server::start(&plan.target, &sample_dir.join("data"))?;
    *server_pid = server.pid;
    m.timing(
        "cold_start.ready_ms",
        server.ready_after.as_secs_f64() * 1e3,
        "ms",
        Better::Lower,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(loadgen::WORKER_THREAD)
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let driven = rt.block_on(crate::phases::drive(plan, &server, sample_dir, m));
    drop(rt);
    let crashed = !server.is_running();
    let stderr = server.stderr_line();
    let usage = server.stop()?;
    if crashed {
        bail!(
            "target exited mid-sample (status {:?}): {stderr}",
            usage.exit_status
        );
    }
    driven?;
    server_metrics(&usage, m);
    Ok(())
}

fn server_metrics(u: &ServerUsage, m: &mut Metrics) {
    m.resource("server.cpu_user_s", u.cpu_user_s, "s");
    m.resource("server.cpu_sys_s", u.cpu_sys_s, "s");
    m.resource("server.cpu_s", u.cpu_user_s + u.cpu_sys_s, "s");
    m.resource("server.peak_rss_mib", u.peak_rss_kib as f64 / 1024.0, "MiB");
    m.resource("server.mean_rss_mib", u.mean_rss_kib / 1024.0, "MiB");
    for (k, v) in &u.io {
        let unit = if k.ends_with("bytes") || k.starts_with("rchar") || k.starts_with("wchar") {
            "bytes"
        } else {
            "count"
        };
        m.resource(format!("server.io.{k}"), *v as f64, unit);
    }
    for (name, s) in &u.thread_cpu_s {
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        m.resource(format!("server.thread_cpu_s.{clean}"), *s, "s");
    }
}

/// Milliseconds of a duration, as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Elapsed since `t0` in ms.
pub fn since_ms(t0: Instant) -> f64 {
    ms(t0.elapsed())
}

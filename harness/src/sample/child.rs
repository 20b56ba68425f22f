//! One sample, run inside a fresh `vaultbench sample` subprocess: calibration reading, a fresh
//! server with a fresh data dir, the scenario's phases driven with signed devices (or the
//! WebDAV client, for a WebDAV scenario against a WebDAV preset), the server
//! stopped and reaped for its rusage, a second reading; one JSON result on stdout.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::Path;

use reports::schema::{Better, ChannelReading, FORMAT_VERSION, KIND_SAMPLE, SampleResult};
use scenarios::scenario::Protocol;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::{Server, ServerUsage};

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
    let webdav = plan.scenario.protocol == Protocol::Webdav;
    match (webdav, plan.target.preset()) {
        (true, None) => bail!(
            "scenario {} speaks WebDAV: choose a WebDAV target (apache-webdav, nginx-webdav, rclone-webdav), not {:?}",
            plan.scenario.name,
            plan.target.given
        ),
        (false, Some(p)) => bail!(
            "target {} speaks WebDAV: choose a WebDAV scenario (small-webdav, personal-webdav), not {}",
            p.name(),
            plan.scenario.name
        ),
        _ => {}
    }
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
    let driven = if webdav {
        let target = loadgen::Target::parse(&server.url(), false)?;
        let client =
            loadgen::webdav::DavClient::new(target, Some(&crate::sample::target::preset_auth()));
        rt.block_on(crate::sample::webdav_phases::drive(
            plan, &client, sample_dir, m,
        ))
    } else {
        rt.block_on(crate::sample::phases::drive(
            plan,
            &mut server,
            sample_dir,
            m,
        ))
    };
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

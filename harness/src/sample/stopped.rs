//! A sample's server stopped and reaped, and its usage as keys: shared by the sequential
//! sample (`child`) and the paired one (`paired`).

use anyhow::bail;

use contract::key::ServerKey;

use crate::sample::plan::Metrics;
use crate::sample::target::{Server, ServerUsage};

/// Stops and reaps `server`; fails when it had exited by itself mid-sample (`under` names
/// the tool it ran under, if any).
pub(crate) fn stop_live(mut server: Server, under: &str) -> anyhow::Result<ServerUsage> {
    // A server asked to exit (a stdio server's stdin closed) has exited as asked.
    let crashed = !server.exit_is_requested() && !server.is_running();
    let stderr = server.stderr_line();
    let usage = server.stop()?;
    if crashed {
        bail!(
            "target exited mid-sample{under} (status {:?}): {stderr}",
            usage.exit_status
        );
    }
    Ok(usage)
}

pub(crate) fn server_metrics(u: &ServerUsage, m: &mut Metrics) {
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
        m.resource(ServerKey::sample_grouped("io", k), *v as f64, unit);
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
        m.resource(ServerKey::sample_grouped("thread_cpu_s", &clean), *s, "s");
    }
}

//! The human summaries `load` prints: route loads, transfers, and their shared lines.

use std::path::Path;

use loadgen::{HistSummary, Mode, RouteLoadReport, TransferReport};

pub(super) fn statuses(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn fmt_summary(label: &str, s: &HistSummary) -> String {
    format!(
        "{label:<14} p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}  p99.9 {:>9.1}  max {:>9.1}  mean {:>9.1}  (µs, n={})\n",
        s.p50_us, s.p90_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.count
    )
}

/// The human summary of a route load.
pub(super) fn human_route(
    r: &RouteLoadReport,
    target: &str,
    seed: u64,
    rss: Option<u64>,
) -> String {
    let mut out = String::new();
    let mode = match r.config.mode {
        Mode::Closed { in_flight } => format!("closed loop, {in_flight} in flight"),
        Mode::Open {
            rate_per_s,
            max_in_flight,
        } => format!("open loop, {rate_per_s} req/s (≤ {max_in_flight} in flight)"),
    };
    out += &format!(
        "route {} against {target}: {mode}, {} device(s), {:.2} s, seed {seed:#x}\n",
        r.route.name(),
        r.devices,
        r.wall_ns as f64 / 1e9
    );
    out += &format!(
        "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
        r.requests,
        r.throughput_per_s,
        r.stats.ok(),
        r.stats.errors(),
        statuses(&r.stats.status)
    );
    if let Some(c) = &r.stats.corrected {
        out += &fmt_summary("latency", &HistSummary::of(c, 1000));
        out += &fmt_summary("uncorrected", &HistSummary::of(&r.stats.latency, 1000));
        out += &format!("late starts    {}\n", r.late_starts);
    } else {
        out += &fmt_summary("latency", &HistSummary::of(&r.stats.latency, 1000));
    }
    out += &fmt_summary("signing", &r.signing_summary());
    let per_s: Vec<String> = r.stats.per_second.iter().map(u64::to_string).collect();
    out += &format!("per second     {}\n", per_s.join(" "));
    if let Some(kib) = rss {
        out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
    }
    out
}

/// The human summary of a push or pull.
pub(super) fn human_transfer(
    op: &str,
    r: &TransferReport,
    vault: &Path,
    rss: Option<u64>,
) -> String {
    let mut out = format!(
        "{op} {}: {} files, {} folders, {:.1} MiB in {:.2} s ({:.1} files/s), {} requests, last seq {}\n",
        vault.display(),
        r.files,
        r.dirs,
        r.bytes as f64 / (1024.0 * 1024.0),
        r.wall_ns as f64 / 1e9,
        r.files_per_s(),
        r.requests,
        r.last_seq
    );
    // Chunks, the echo and signing are obsync-v1's; a WebDAV transfer has none of them.
    let signed = r.signing_summary().count > 0;
    if signed {
        out += &format!(
            "chunks transferred {}  already present {}  deleted {}  own echo {}\n",
            r.chunks_transferred, r.chunks_present, r.deleted, r.own_echo
        );
    }
    for (route, st) in &r.routes {
        out += &fmt_summary(route, &st.summary());
    }
    if signed {
        out += &fmt_summary("signing", &r.signing_summary());
    }
    for c in &r.checkpoints {
        out += &format!(
            "checkpoint {:>8} files at {:>8} ms: {:.1} files/s\n",
            c.files, c.elapsed_ms, c.files_per_s
        );
    }
    if let Some(kib) = rss {
        out += &format!("peak RSS {:.1} MiB\n", kib as f64 / 1024.0);
    }
    out
}

/// Peak resident set size of this process (VmHWM), in KiB.
pub(super) fn peak_rss_kib() -> Option<u64> {
    procstat::read::peak_rss_kib(procstat::Pid::Current)
        .ok()
        .flatten()
}

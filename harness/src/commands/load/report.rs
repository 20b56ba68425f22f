//! The human summary of a transfer, and the peak RSS every summary reports.

use std::path::Path;

use loadgen::TransferReport;

use crate::sample::protocols::load::fmt_summary;

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
    // Chunks, the echo and signing belong to a signed protocol: a transfer that signed
    // nothing has none of them.
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

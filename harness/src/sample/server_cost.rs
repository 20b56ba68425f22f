//! Per-phase server cost for any target, read through `procstat` at every phase boundary: the
//! CPU every thread of the server's whole process tree spent (from each task's `schedstat`, in
//! total and by thread name), its `/proc/<pid>/io` read and write calls and bytes, per phase
//! and per route-load step, divided by the work the phase did (requests, or files for a push or
//! pull). Needs nothing from the target (no `/metrics`), so it works for any server.

use std::collections::BTreeMap;

use contract::key::{Scope, ServerKey};
use procstat::{Delta, Snapshot};

use crate::sample::plan::Metrics;

/// The work a phase did, the denominator of its costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// Requests the client sent in the phase.
    pub requests: u64,
    /// Files transferred, for a push or a pull (costs are then per file).
    pub files: Option<u64>,
    /// A route step bounded by time: its request count, and so any count of what the server
    /// did in it, depends on throughput (only per-request figures compare).
    pub timed: bool,
}

/// The snapshot at the start of the current phase.
pub struct PhaseCost {
    root: u32,
    start: Option<Snapshot>,
}

impl PhaseCost {
    /// Costs of the process tree under `root` (the server's pid).
    pub fn new(root: u32) -> PhaseCost {
        PhaseCost { root, start: None }
    }

    /// Marks the start of a phase (a fresh snapshot).
    pub fn begin(&mut self) -> anyhow::Result<()> {
        self.start = Some(capture(self.root)?);
        Ok(())
    }

    /// Ends the phase begun last: its cost keys under `scope` (`cold_push`,
    /// `route.post-version.c1`), the per-thread keys only for a whole phase (`route_step`
    /// false).
    pub fn end(
        &mut self,
        scope: &Scope,
        work: Work,
        route_step: bool,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        let Some(start) = self.start.take() else {
            anyhow::bail!("server cost: phase {scope} ended without a start snapshot");
        };
        let end = capture(self.root)?;
        for (key, value, unit) in keys(scope, &Delta::between(&start, &end), work, route_step) {
            m.resource(key, value, unit);
        }
        Ok(())
    }
}

fn capture(root: u32) -> anyhow::Result<Snapshot> {
    Snapshot::capture(root).map_err(|e| anyhow::anyhow!("server cost: reading /proc: {e}"))
}

/// A thread name as a key segment: ASCII letters, digits, `-` and `_`; anything else `_`
/// (tokio names its workers `tokio-runtime-w`, a kernel thread name is at most 15 bytes).
pub fn clean_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// The cost keys of one phase's delta (pure: tested on made-up deltas).
/// `syscalls_per_request` counts the read- and write-family calls `/proc/<pid>/io` sees
/// (`syscr + syscw`); other syscalls are counted by name in the cost sample.
pub fn keys(
    scope: &Scope,
    d: &Delta,
    work: Work,
    route_step: bool,
) -> Vec<(ServerKey, f64, &'static str)> {
    let key = |stat: &str| ServerKey::new(scope.clone(), stat);
    let mut out = Vec::new();
    let cpu_us = d.cpu_ns as f64 / 1e3;
    if !route_step {
        out.push((key("cpu_ms"), round3(cpu_us / 1e3), "ms"));
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for (name, ns) in &d.cpu_ns_by_name {
            *by.entry(clean_name(name)).or_default() += ns;
        }
        for (name, ns) in by {
            out.push((
                ServerKey::grouped(scope.clone(), "thread_cpu_ms", &name),
                round3(ns as f64 / 1e6),
                "ms",
            ));
        }
    }
    match work.files {
        Some(files) if files > 0 => {
            out.push((
                key("cpu_us_per_file"),
                round3(cpu_us / files as f64),
                "us/file",
            ));
            out.push((
                key("write_bytes_per_file"),
                round3(d.io.write_bytes as f64 / files as f64),
                "bytes/file",
            ));
        }
        _ if work.requests > 0 => out.push((
            key("cpu_us_per_request"),
            round3(cpu_us / work.requests as f64),
            "us/request",
        )),
        _ => {}
    }
    if work.requests > 0 {
        out.push((
            key("syscalls_per_request"),
            round3((d.io.syscr + d.io.syscw) as f64 / work.requests as f64),
            "syscalls/request",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::key::RouteLevel;

    fn delta() -> Delta {
        let mut d = Delta {
            cpu_ns: 12_345_600,
            ..Delta::default()
        };
        d.cpu_ns_by_name
            .insert("tokio-runtime-w".into(), 12_000_000);
        d.cpu_ns_by_name.insert("main thread".into(), 300_000);
        d.cpu_ns_by_name.insert("main:thread".into(), 45_678);
        d.io.syscr = 30;
        d.io.syscw = 70;
        d.io.write_bytes = 8192;
        d
    }

    fn as_map(v: Vec<(ServerKey, f64, &'static str)>) -> BTreeMap<String, (f64, &'static str)> {
        v.into_iter()
            .map(|(k, x, u)| (k.to_string(), (x, u)))
            .collect()
    }

    #[test]
    fn a_push_costs_per_file_with_threads_by_name() {
        let k = as_map(keys(
            &Scope::phase("cold_push"),
            &delta(),
            Work {
                requests: 50,
                files: Some(4),
                timed: false,
            },
            false,
        ));
        assert_eq!(k["cold_push.server.cpu_ms"], (12.346, "ms"));
        assert_eq!(k["cold_push.server.cpu_us_per_file"], (3086.4, "us/file"));
        assert_eq!(
            k["cold_push.server.write_bytes_per_file"],
            (2048.0, "bytes/file")
        );
        assert_eq!(
            k["cold_push.server.syscalls_per_request"],
            (2.0, "syscalls/request")
        );
        assert_eq!(k["cold_push.server.thread_cpu_ms.tokio-runtime-w"].0, 12.0);
        // Two names that clean to the same segment are summed, not overwritten.
        assert_eq!(k["cold_push.server.thread_cpu_ms.main_thread"].0, 0.346);
        assert!(!k.contains_key("cold_push.server.cpu_us_per_request"));
        assert_eq!(k.len(), 6);
    }

    #[test]
    fn a_route_step_costs_per_request_without_thread_keys() {
        let k = as_map(keys(
            &RouteLevel::new("post-version", 1).into(),
            &delta(),
            Work {
                requests: 1000,
                files: None,
                timed: false,
            },
            true,
        ));
        assert_eq!(
            k.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "route.post-version.c1.server.cpu_us_per_request",
                "route.post-version.c1.server.syscalls_per_request"
            ]
        );
        assert_eq!(
            k["route.post-version.c1.server.cpu_us_per_request"].0,
            12.346
        );
        assert_eq!(
            k["route.post-version.c1.server.syscalls_per_request"].0,
            0.1
        );
    }

    #[test]
    fn no_work_gives_totals_only() {
        let k = as_map(keys(
            &Scope::phase("idle"),
            &delta(),
            Work::default(),
            false,
        ));
        assert!(k.contains_key("idle.server.cpu_ms"));
        assert!(k.keys().all(|x| !x.contains("per_")), "{k:?}");
    }

    #[test]
    fn a_real_process_tree_is_read() {
        // This very test process: a phase over a busy loop shows CPU, and no panic on /proc.
        let mut c = PhaseCost::new(std::process::id());
        c.begin().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let mut m = Metrics::default();
        let p = Scope::phase("p");
        c.end(
            &p,
            Work {
                requests: 1,
                files: None,
                timed: false,
            },
            false,
            &mut m,
        )
        .unwrap();
        assert!(m.map["p.server.cpu_ms"].value > 0.0, "{:?}", m.map);
        assert!(c.end(&p, Work::default(), false, &mut m).is_err());
    }
}

//! The server's cost in each checkpoint window of a cold push, in a cost sample (`--cost`):
//! instructions per file from callgrind, and the traced syscalls per file from strace, so that
//! a growth fit (`reports::growth`) can judge counts that do not move with the machine.
//!
//! - Instructions: while the push runs, the callgrind run dumps a part every [`TICK`] (named
//!   by [`tick_name`]); the parts add up to the instructions retired by then, and each
//!   checkpoint's figure is interpolated between the two dumps around its time, as
//!   `sample::growth` does with CPU. A dump stops the server while it runs, so the count is
//!   flat from a dump's start to its end and the push (which waits on the server) makes no
//!   progress there: only the time between dumps is interpolated. The tick parts are folded back into the phase's own
//!   part ([`fold_ticks`]), so the phase's keys and profile are what they were without ticks.
//! - Syscalls: strace's calls whose entry time falls in each checkpoint's window (the push's
//!   start on the harness's clock plus the checkpoint's offset), counted by `sample::cost`.
//!
//! Keys: `PHASE.checkpoint.NNNNNNN.server_instructions_per_file` and
//! `PHASE.checkpoint.NNNNNNN.server_syscalls_per_file` (class `cost`), and each series' fitted
//! exponent as `PHASE.growth.SERIES.import_exponent`.

use std::collections::BTreeMap;
use std::time::Duration;

use contract::key::{PhaseKey, Scope};
use loadgen::TransferReport;

use crate::sample::plan::Metrics;

/// How often the callgrind run dumps during a checkpointed push. A dump pauses the server for
/// about 0.1 to 0.2 s (the cost channel's measured median), so half a second keeps the pauses
/// a minority of the push while a window of a few seconds under callgrind still spans several
/// dumps.
pub const TICK: Duration = Duration::from_millis(500);

/// What separates a tick part's phase from its number.
const TICK_MARK: &str = "+tick.";

/// The part name of the `k`th dump during `phase`'s push.
pub fn tick_name(phase: &str, k: u32) -> String {
    format!("{phase}{TICK_MARK}{k:05}")
}

/// The phase a part named by [`tick_name`] belongs to; `None` for any other part.
pub fn tick_phase(part: &str) -> Option<&str> {
    part.split_once(TICK_MARK).map(|(p, _)| p)
}

/// Moves every tick part's count into its phase's part, and returns the tick parts' own counts.
pub fn fold_ticks(counts: &mut BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let names: Vec<String> = counts
        .keys()
        .filter(|k| tick_phase(k).is_some())
        .cloned()
        .collect();
    let mut ticks = BTreeMap::new();
    for name in names {
        let v = counts.remove(&name).unwrap_or(0);
        if let Some(phase) = tick_phase(&name) {
            *counts.entry(phase.to_owned()).or_insert(0) += v;
        }
        ticks.insert(name, v);
    }
    ticks
}

/// A checkpointed push as a cost tool saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushTrace {
    /// The phase's name (`cold_push`).
    pub phase: String,
    /// The push's start on the wall clock, Unix seconds (strace's `-ttt` clock).
    pub started_unix: f64,
    /// Each tick part's name and when its dump started and ended, since the push began.
    pub ticks: Vec<(String, Duration, Duration)>,
    /// When the push returned, since it began.
    pub ended: Duration,
    /// Files done and milliseconds since the push began, at each checkpoint.
    pub checkpoints: Vec<(u64, u64)>,
}

impl PushTrace {
    /// The trace of `r`'s checkpoints.
    pub fn checkpoints_of(&mut self, r: &TransferReport) {
        self.checkpoints = r
            .checkpoints
            .iter()
            .map(|c| (c.files, c.elapsed_ms))
            .collect();
    }

    /// Each checkpoint window: (files at its end, files in it, from, to) since the push began.
    fn windows(&self) -> Vec<(u64, u64, Duration, Duration)> {
        let mut out = Vec::new();
        let (mut files0, mut ms0) = (0u64, 0u64);
        for &(files, ms) in &self.checkpoints {
            if files > files0 && ms >= ms0 {
                out.push((
                    files,
                    files - files0,
                    Duration::from_millis(ms0),
                    Duration::from_millis(ms),
                ));
            }
            (files0, ms0) = (files, ms);
        }
        out
    }

    /// The checkpoint windows on strace's clock, named `PHASE.checkpoint.NNNNNNN`, for
    /// `sample::cost::parse_strace`.
    pub fn strace_windows(&self) -> Vec<(Scope, f64, f64)> {
        self.windows()
            .into_iter()
            .map(|(files, _, a, b)| {
                (
                    Scope::phase(&window_name(&self.phase, files)),
                    self.started_unix + a.as_secs_f64(),
                    self.started_unix + b.as_secs_f64(),
                )
            })
            .collect()
    }
}

fn window_name(phase: &str, files: u64) -> String {
    format!("{phase}.checkpoint.{files:07}")
}

fn key(phase: &str, files: u64, stat: &str) -> PhaseKey {
    PhaseKey::new(phase, &format!("checkpoint.{files:07}.{stat}"))
}

/// The instructions retired by `at` since the push began: the tick parts' running total at
/// each dump, the phase's whole count (`total`, ticks folded in) at the push's end, linear in
/// between.
fn instructions_at(t: &PushTrace, ticks: &BTreeMap<String, u64>, total: u64, at: Duration) -> f64 {
    let mut points: Vec<(Duration, f64)> = vec![(Duration::ZERO, 0.0)];
    let mut sum = 0u64;
    for (name, from, to) in &t.ticks {
        sum += ticks.get(name).copied().unwrap_or(0);
        points.push((*from, sum as f64));
        points.push((*to, sum as f64));
    }
    points.push((
        t.ended.max(points.last().map_or(Duration::ZERO, |p| p.0)),
        total as f64,
    ));
    let i = points.partition_point(|p| p.0 < at);
    let Some(b) = points.get(i).or(points.last()) else {
        return 0.0;
    };
    let a = if i == 0 { b } else { &points[i - 1] };
    let span = b.0.saturating_sub(a.0).as_secs_f64();
    let f = if span > 0.0 {
        (at.saturating_sub(a.0).as_secs_f64() / span).clamp(0.0, 1.0)
    } else {
        1.0
    };
    a.1 + (b.1 - a.1) * f
}

/// `PHASE.checkpoint.NNNNNNN.server_instructions_per_file` for every window of `t`; `total` is
/// the phase's instructions with its ticks folded in.
pub fn instruction_keys(t: &PushTrace, ticks: &BTreeMap<String, u64>, total: u64, m: &mut Metrics) {
    for (files, n, from, to) in t.windows() {
        let spent = instructions_at(t, ticks, total, to) - instructions_at(t, ticks, total, from);
        m.cost(
            key(&t.phase, files, "server_instructions_per_file"),
            (spent / n as f64).round(),
            "instructions/file",
        );
    }
}

/// `PHASE.checkpoint.NNNNNNN.server_syscalls_per_file` for every window of `t`, from the
/// traced calls counted in [`PushTrace::strace_windows`].
pub fn syscall_keys(
    t: &PushTrace,
    counts: &BTreeMap<Scope, BTreeMap<&'static str, u64>>,
    m: &mut Metrics,
) {
    for (files, n, _, _) in t.windows() {
        let Some(by) = counts.get(&Scope::phase(&window_name(&t.phase, files))) else {
            continue;
        };
        let calls: u64 = by.values().sum();
        m.cost(
            key(&t.phase, files, "server_syscalls_per_file"),
            round3(calls as f64 / n as f64),
            "calls/file",
        );
    }
}

fn round3(v: f64) -> f64 {
    (v * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> PushTrace {
        PushTrace {
            phase: "cold_push".into(),
            started_unix: 1000.0,
            ticks: (1..=9)
                .map(|k| {
                    let at = Duration::from_millis(100 * u64::from(k));
                    (tick_name("cold_push", k), at, at)
                })
                .collect(),
            ended: Duration::from_millis(1000),
            checkpoints: vec![(100, 250), (200, 500), (300, 1000)],
        }
    }

    #[test]
    fn ticks_fold_into_their_phase_and_keep_their_own_counts() {
        let mut counts: BTreeMap<String, u64> = [
            ("setup".to_owned(), 5),
            (tick_name("cold_push", 1), 10),
            (tick_name("cold_push", 2), 20),
            ("cold_push".to_owned(), 3),
        ]
        .into_iter()
        .collect();
        let ticks = fold_ticks(&mut counts);
        assert_eq!(counts.get("cold_push"), Some(&33));
        assert_eq!(counts.get("setup"), Some(&5));
        assert_eq!(counts.len(), 2);
        assert_eq!(ticks.values().sum::<u64>(), 30);
        assert_eq!(tick_phase("setup"), None);
    }

    #[test]
    fn instructions_per_file_follow_the_ticks_between_checkpoints() {
        // 1,000 instructions per 100 ms for the first half, 3,000 after: the second half's
        // windows cost three times the first's per file.
        let t = trace();
        let ticks: BTreeMap<String, u64> = t
            .ticks
            .iter()
            .map(|(n, at, _)| (n.clone(), if at.as_millis() <= 500 { 1000 } else { 3000 }))
            .collect();
        let total = ticks.values().sum::<u64>() + 3000;
        let mut m = Metrics::default();
        instruction_keys(&t, &ticks, total, &mut m);
        let v = |files: u64| {
            m.map[&format!("cold_push.checkpoint.{files:07}.server_instructions_per_file")].value
        };
        assert_eq!(v(100), 25.0); // 2,500 instructions over 100 files
        assert_eq!(v(200), 25.0);
        assert_eq!(v(300), 150.0); // 15,000 over 100 files
    }

    #[test]
    fn a_dump_holds_the_count_while_the_server_is_stopped() {
        // Dumps from 400 to 600 ms: 4,000 instructions by then, none during the dump.
        let t = PushTrace {
            phase: "p".into(),
            ticks: vec![(
                tick_name("p", 1),
                Duration::from_millis(400),
                Duration::from_millis(600),
            )],
            ended: Duration::from_millis(1000),
            ..PushTrace::default()
        };
        let ticks: BTreeMap<String, u64> = [(tick_name("p", 1), 4000)].into_iter().collect();
        let at = |ms| instructions_at(&t, &ticks, 8000, Duration::from_millis(ms));
        assert_eq!(at(200), 2000.0);
        assert_eq!(at(500), 4000.0);
        assert_eq!(at(800), 6000.0);
    }

    #[test]
    fn syscalls_count_in_the_checkpoint_windows_on_straces_clock() {
        let t = trace();
        let w = t.strace_windows();
        assert_eq!(w.len(), 3);
        assert_eq!((w[0].1, w[0].2), (1000.0, 1000.25));
        assert_eq!((w[2].1, w[2].2), (1000.5, 1001.0));
        let mut counts = BTreeMap::new();
        for (i, (s, _, _)) in w.iter().enumerate() {
            let mut by = BTreeMap::new();
            by.insert("fsync", 100 * (i as u64 + 1));
            by.insert("write", 50);
            counts.insert(s.clone(), by);
        }
        let mut m = Metrics::default();
        syscall_keys(&t, &counts, &mut m);
        assert_eq!(
            m.map["cold_push.checkpoint.0000300.server_syscalls_per_file"].value,
            3.5
        );
    }

    #[test]
    fn a_growing_series_is_fitted_and_its_exponent_written() {
        let mut m = Metrics::default();
        for k in 1..=10u64 {
            // Per-file instructions proportional to n: a quadratic import.
            m.cost(
                key("cold_push", k * 200, "server_instructions_per_file"),
                (1000 * k * 200) as f64,
                "instructions/file",
            );
        }
        let lines = crate::sample::growth::fit("cold_push", &mut m);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let e = m.map["cold_push.growth.server_instructions.import_exponent"].value;
        assert!((e - 2.0).abs() < 0.15, "{e}");
    }
}

//! Markdown rendering of the recording and history report models.

use super::history::HistoryReport;
use super::recording::{Cell, RecordingReport};
use crate::fmt::{md_table, num, pct, signed_pct, with_unit};

/// A cell as `value [min–max]`; the bracket only when the samples disagreed.
pub(crate) fn cell(c: &Option<Cell>) -> String {
    match c {
        None => "–".into(),
        Some(c) if c.min == c.max => num(c.value),
        Some(c) => format!("{} [{}–{}]", num(c.value), num(c.min), num(c.max)),
    }
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or_else(|| "–".into(), f)
}

/// Functions shown per part and measure in a recording's report.
pub(crate) const SHOWN_FUNCTIONS: usize = 8;

/// A share as `12.3 %`.
fn share(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A `--cost` recording's "where the time goes": top functions per part by self and by
/// inclusive instructions, blocked time per syscall and per-thread scheduler figures from the
/// traced run, with the tracer's overhead.
pub(crate) fn where_time_sections(r: &RecordingReport) -> Vec<Section> {
    let mut out = Vec::new();
    if !r.functions.is_empty() {
        let mut rows = Vec::new();
        for (part, p) in &r.functions {
            let per = |x: u64| {
                if p.work > 0 {
                    format!(
                        "{}/{}",
                        num((x as f64 / p.work as f64).round()),
                        p.work_unit
                    )
                } else {
                    num(x as f64)
                }
            };
            let total = p.total_ir.max(1) as f64;
            let by_self = p.by_self(SHOWN_FUNCTIONS);
            let by_incl = p.by_inclusive(SHOWN_FUNCTIONS);
            for i in 0..by_self.len().max(by_incl.len()) {
                let s = by_self.get(i);
                let n = by_incl.get(i);
                rows.push(vec![
                    if i == 0 { part.clone() } else { String::new() },
                    (i + 1).to_string(),
                    s.map_or(String::new(), |f| format!("`{}`", f.name)),
                    s.map_or(String::new(), |f| share(f.self_ir as f64 / total)),
                    s.map_or(String::new(), |f| per(f.self_ir)),
                    n.map_or(String::new(), |f| format!("`{}`", f.name)),
                    n.map_or(String::new(), |f| share(f.inclusive_ir as f64 / total)),
                ]);
            }
        }
        out.push(Section {
            heading: "Top functions per phase",
            intro: "From the cost sample's callgrind profile of each phase and route-load step: the functions with the most instructions in their own code (self) and in everything they called (inclusive), as a share of the part's instructions (every process of the server). Inclusive shares overlap; self shares add up. `--keep-profiles DIR` keeps the whole profiles.".into(),
            headers: vec!["phase", "#", "by self", "self", "self per unit", "by inclusive", "inclusive"],
            rows,
        });
    }
    if !r.blocked.is_empty() {
        let mut rows = Vec::new();
        for (part, b) in &r.blocked {
            let total = b.total_us().max(f64::MIN_POSITIVE);
            let overhead = r.untraced_wall_ms.get(part).map_or_else(
                || format!("{} / –", num(b.wall_ms)),
                |u| {
                    format!(
                        "{} / {} (×{:.1})",
                        num(b.wall_ms),
                        num(*u),
                        if *u > 0.0 { b.wall_ms / u } else { f64::NAN }
                    )
                },
            );
            if b.syscalls.is_empty() {
                rows.push(vec![
                    part.clone(),
                    "(none)".into(),
                    "0".into(),
                    "0".into(),
                    "–".into(),
                    overhead,
                ]);
                continue;
            }
            for (i, c) in b.syscalls.iter().take(SHOWN_FUNCTIONS).enumerate() {
                rows.push(vec![
                    if i == 0 { part.clone() } else { String::new() },
                    format!("`{}`", c.name),
                    num(c.calls as f64),
                    num(c.time_us / 1e3),
                    share(c.time_us / total),
                    if i == 0 {
                        overhead.clone()
                    } else {
                        String::new()
                    },
                ]);
            }
        }
        out.push(Section {
            heading: "Blocked time per syscall",
            intro: "From the cost sample's strace run (`-T`): the wall time the server's threads spent inside each syscall during each phase, summed over threads, and its share of all time inside syscalls; a call across a phase boundary is split there. Calls that wait for work (`epoll_wait`, `futex`, `accept`, …) are left out. The tracer stops the server at every call it sees, so these are shares, never timings: the last column gives the traced run's wall time of the phase against the timing samples' median (the tracer's overhead), and no timing key comes from this run.".into(),
            headers: vec!["phase", "syscall", "calls", "ms inside", "share", "wall ms traced / untraced"],
            rows,
        });
        let mut rows = Vec::new();
        for (part, b) in &r.blocked {
            for (i, t) in b.threads.iter().enumerate() {
                rows.push(vec![
                    if i == 0 { part.clone() } else { String::new() },
                    t.thread.clone(),
                    t.threads.to_string(),
                    num(t.on_cpu_ms),
                    num(t.run_queue_ms),
                    num(t.blocked_ms),
                ]);
            }
        }
        if !rows.is_empty() {
            out.push(Section {
                heading: "Threads per phase",
                intro: "Per thread name over each phase of the traced run, from /proc schedstat: time on a CPU, time waiting in a run queue, and the rest of the phase's wall time (blocked or idle), summed over the threads of that name. Traced run: shares, not timings.".into(),
                headers: vec!["phase", "thread", "threads", "on-CPU ms", "run-queue ms", "blocked ms"],
                rows,
            });
        }
    }
    out
}

/// The sections shared by Markdown and HTML, as (heading, intro, headers, rows).
pub(crate) struct Section {
    pub heading: &'static str,
    pub intro: String,
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

pub(crate) fn recording_sections(r: &RecordingReport) -> Vec<Section> {
    let mut out = Vec::new();
    out.push(Section {
        heading: "Phases",
        intro: "Medians over the counted samples; brackets give the raw min–max. Exact counts (files, bytes, requests, fsyncs) are deterministic for a build and seed.".into(),
        headers: vec!["phase", "wall ms", "p50 ms", "p95 ms", "files/s", "files", "bytes", "requests", "fsyncs", "fsyncs/file", "errors"],
        rows: r
            .phases
            .iter()
            .map(|p| {
                vec![
                    p.phase.clone(),
                    cell(&p.wall_ms),
                    cell(&p.p50_ms),
                    cell(&p.p95_ms),
                    cell(&p.files_per_s),
                    cell(&p.files),
                    cell(&p.bytes),
                    cell(&p.requests),
                    opt(p.fsyncs, num),
                    cell(&p.fsyncs_per_file),
                    cell(&p.errors),
                ]
            })
            .collect(),
    });
    out.push(Section {
        heading: "Growth with the vault",
        intro: "Each per-file series of a checkpointed push, fitted over its checkpoints: the exponent k of cost per file ∝ n^k with its 95 % t interval, and the whole import's class chosen as Google Benchmark's `Complexity()` chooses one (least squares per candidate, lowest normalised RMS), or no class when two fit about equally or the interval is wider than half a power. Counts come first: a count's growth is the evidence, time confirms it.".into(),
        headers: vec!["phase", "series", "k", "interval", "class", "finding"],
        rows: r
            .growth
            .iter()
            .map(|g| {
                vec![
                    g.phase.clone(),
                    g.series.clone(),
                    opt(g.exponent, |k| format!("{k:.2}")),
                    match (g.exponent_lo, g.exponent_hi) {
                        (Some(lo), Some(hi)) => format!("[{lo:.2}, {hi:.2}]"),
                        _ => "–".into(),
                    },
                    g.class.clone().unwrap_or_else(|| "–".into()),
                    g.finding.clone(),
                ]
            })
            .collect(),
    });
    out.push(Section {
        heading: "Log counts",
        intro: "Lines of the target's own log that matched each `--count` (or summed by each `--sum`), per phase, per file and per request; medians with the raw min–max.".into(),
        headers: vec!["key", "value", "unit", "min", "max"],
        rows: r
            .log_counts
            .iter()
            .map(|x| {
                vec![
                    format!("`{}`", x.key),
                    num(x.value),
                    x.unit.clone(),
                    num(x.min),
                    num(x.max),
                ]
            })
            .collect(),
    });
    out.push(Section {
        heading: "Routes within phases",
        intro: "Per-route request counts and latency percentiles (µs) of the sync phases.".into(),
        headers: vec!["phase", "route", "requests", "p50 µs", "p95 µs", "p99 µs"],
        rows: r
            .phase_routes
            .iter()
            .map(|x| {
                vec![
                    x.phase.clone(),
                    x.route.clone(),
                    cell(&x.requests),
                    cell(&x.p50_us),
                    cell(&x.p95_us),
                    cell(&x.p99_us),
                ]
            })
            .collect(),
    });
    out.push(Section {
        heading: "Route load",
        intro: "Each route driven with N requests in flight for a bounded time (closed loop)."
            .into(),
        headers: vec!["route", "in flight", "p50 µs", "p99 µs", "req/s", "errors"],
        rows: r
            .route_load
            .iter()
            .map(|x| {
                vec![
                    x.route.clone(),
                    x.in_flight.to_string(),
                    cell(&x.p50_us),
                    cell(&x.p99_us),
                    cell(&x.rps),
                    cell(&x.errors),
                ]
            })
            .collect(),
    });
    out.push(Section {
        heading: "Server resources",
        intro:
            "From the reaped server process: CPU (rusage), RSS, /proc/<pid>/io and CPU per thread."
                .into(),
        headers: vec!["key", "value", "raw min–max"],
        rows: r
            .server
            .iter()
            .map(|x| {
                vec![
                    x.key.clone(),
                    with_unit(x.value, &x.unit),
                    if x.min == x.max {
                        "–".into()
                    } else {
                        format!("{}–{}", num(x.min), num(x.max))
                    },
                ]
            })
            .collect(),
    });
    let cost = cost_rows(&r.metrics);
    if !cost.is_empty() {
        out.push(Section {
            heading: "Server cost per phase",
            intro: "What the server spent per phase and route-load step, per request (or per file for a push or pull). CPU and io come from /proc in the timing samples (class resource); instructions and syscalls by name from the separate cost sample under callgrind and strace (`--cost`; instructions are class cost, syscalls exact). Writes count writes to regular files only.".into(),
            headers: COST_COLUMNS.iter().map(|(h, _)| *h).collect(),
            rows: cost,
        });
    }
    out.extend(where_time_sections(r));
    out.push(calibration_section(&r.calibration));
    out.extend(contention_sections(&r.calibration));
    let p = &r.provenance;
    let la = |l: Option<[f64; 3]>| {
        l.map_or("–".into(), |l| {
            format!("{} {} {}", num(l[0]), num(l[1]), num(l[2]))
        })
    };
    let mut prov = vec![
        vec![
            "scenario".into(),
            format!("{} (profile {}, seed {})", r.scenario, r.profile, r.seed),
        ],
        vec!["recorded at".into(), r.recorded_at.clone()],
        vec![
            "samples".into(),
            format!(
                "{} counted + {} warm-up, {} with errors",
                p.counted_samples, p.warmup_samples, p.failed_samples
            ),
        ],
        vec![
            "attempts".into(),
            format!(
                "{} attempted, {} refused, {} failed",
                p.attempts.attempted, p.attempts.refused, p.attempts.failed
            ),
        ],
        vec![
            "harness".into(),
            format!(
                "{} {}{}",
                p.harness_version,
                p.harness_commit
                    .as_deref()
                    .map_or("(no git commit)".into(), |c| c
                        .chars()
                        .take(12)
                        .collect::<String>()),
                if p.harness_dirty == Some(true) {
                    " (dirty)"
                } else {
                    ""
                }
            ),
        ],
        vec![
            "toolchain".into(),
            p.toolchain.clone().unwrap_or_else(|| "–".into()),
        ],
        vec![
            "target".into(),
            format!("{} (version {})", p.target_command, p.target_version),
        ],
        vec!["target sha256".into(), p.target_sha256.clone()],
        vec!["vault digest".into(), p.vault_digest.clone()],
        vec![
            "load average before / after".into(),
            format!("{} / {}", la(p.loadavg_before), la(p.loadavg_after)),
        ],
    ];
    for (k, v) in &p.machine {
        prov.push(vec![format!("machine {k}"), v.clone()]);
    }
    prov.push(vec!["binding digest".into(), p.digest.clone()]);
    out.push(Section {
        heading: "Provenance",
        intro: String::new(),
        headers: vec!["field", "value"],
        rows: prov,
    });
    out.push(Section {
        heading: "All metrics",
        intro: "Every key of the baseline: median, unit, class (exact / timing / resource), which direction is better, and the raw spread.".into(),
        headers: vec!["key", "median", "unit", "class", "better", "n", "min", "max", "spread"],
        rows: r
            .metrics
            .iter()
            .map(|x| {
                vec![
                    x.key.clone(),
                    num(x.value),
                    x.unit.clone(),
                    format!("{:?}", x.class).to_lowercase(),
                    format!("{:?}", x.better).to_lowercase(),
                    x.n.to_string(),
                    num(x.min),
                    num(x.max),
                    opt(x.spread, pct),
                ]
            })
            .collect(),
    });
    out
}

/// The in-sample contention channels: the gate's figures per channel, then every sample's
/// readings (recordings and A/B runs). Empty for a sidecar from before these channels.
pub(crate) fn contention_sections(cal: &super::recording::Calibration) -> Vec<Section> {
    let mut out = Vec::new();
    if cal.in_sample.is_empty() && cal.samples.is_empty() {
        return out;
    }
    let missing = if cal.unavailable.is_empty() {
        String::new()
    } else {
        format!(
            " Not offered here, so the kernels alone stood for them: {}.",
            cal.unavailable.join("; ")
        )
    };
    out.push(Section {
        heading: "In-sample contention",
        intro: format!(
            "Read from /proc over each sample's measured window: run-queue delay of the server's and the generator's threads as a share of their CPU time, PSI cpu and io `some` stall as a share of the window, steal as a share of all CPU time. Every sample must stay within the bound; the share is the worst sample's.{missing}"
        ),
        headers: vec!["channel", "n", "median", "max", "bound", "of allowance"],
        rows: cal
            .in_sample
            .iter()
            .map(|c| {
                vec![
                    c.channel.clone(),
                    c.n.map_or("–".into(), |n| n.to_string()),
                    opt(c.median, num),
                    opt(c.max, num),
                    opt(c.max_share, num),
                    opt(c.share, pct),
                ]
            })
            .collect(),
    });
    let cpus = |c: &[usize]| {
        if c.is_empty() {
            "–".to_owned()
        } else {
            c.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    out.push(Section {
        heading: "In-sample contention by sample",
        intro: "Each sample's window and its channels (shares); CPU sets are those the server's process tree and the generator were pinned to (– : not pinned).".into(),
        headers: vec![
            "sample",
            "window ms",
            "server run delay",
            "generator run delay",
            "PSI cpu some",
            "PSI io some",
            "steal",
            "server CPUs",
            "generator CPUs",
        ],
        rows: cal
            .samples
            .iter()
            .map(|r| {
                let c = &r.contention;
                vec![
                    r.sample.clone(),
                    num(c.window_ms),
                    opt(c.server_run_delay, num),
                    opt(c.generator_run_delay, num),
                    opt(c.psi_cpu_some, num),
                    opt(c.psi_io_some, num),
                    opt(c.steal, num),
                    cpus(&c.server_cpus),
                    cpus(&c.generator_cpus),
                ]
            })
            .collect(),
    });
    out
}

/// The calibration gate's figures, each as a share of its allowance (recordings and A/B runs).
pub(crate) fn calibration_section(cal: &super::recording::Calibration) -> Section {
    Section {
        heading: "Calibration",
        intro: format!(
            "Two channels ran beside every sample; each figure is shown as a share of its allowance (the gate refuses at 100%). Gate: {}{}.",
            match cal.accepted {
                Some(true) => "accepted",
                Some(false) => "refused",
                None => "verdict not recorded",
            },
            if cal.drift_checked == Some(false) {
                "; no machine reference, drift not checked"
            } else {
                ""
            }
        ),
        headers: vec![
            "channel",
            "n",
            "median ms",
            "CV",
            "CV bound",
            "of allowance",
            "max/median",
            "bound",
            "of allowance",
            "drift",
            "tolerance",
            "of allowance",
        ],
        rows: cal
            .channels
            .iter()
            .map(|c| {
                vec![
                    c.channel.clone(),
                    c.n.map_or("–".into(), |n| n.to_string()),
                    opt(c.median_ms, num),
                    opt(c.cv, num),
                    opt(c.cv_bound, num),
                    opt(c.cv_share, pct),
                    opt(c.max_over_median, num),
                    opt(c.max_over_median_bound, num),
                    opt(c.max_over_median_share, pct),
                    opt(c.drift, signed_pct),
                    opt(c.drift_bound, num),
                    opt(c.drift_share, pct),
                ]
            })
            .collect(),
    }
}

pub fn recording(r: &RecordingReport) -> String {
    let mut s = format!(
        "# vaultbench recording: {}\n\nProfile {}, seed {}, median of {} samples, recorded {}.\n\n",
        r.scenario, r.profile, r.seed, r.samples, r.recorded_at
    );
    let sections = recording_sections(r);
    for sec in &sections {
        if sec.heading == "All metrics" {
            // The claims section belongs before the long reference table.
            s.push_str("## What these numbers are not\n\n");
            for c in &r.not_claims {
                s.push_str(&format!("- {c}\n"));
            }
            s.push('\n');
        }
        if sec.rows.is_empty() {
            continue;
        }
        s.push_str(&format!("## {}\n\n", sec.heading));
        if !sec.intro.is_empty() {
            s.push_str(&format!("{}\n\n", sec.intro));
        }
        s.push_str(&md_table(&sec.headers, &sec.rows));
        s.push('\n');
    }
    s
}

/// At most this many versions appear as columns in the Markdown trend table (the newest).
pub(crate) const TREND_COLUMNS: usize = 8;

pub(crate) fn history_rows(h: &super::history::ScenarioHistory) -> (Vec<String>, Vec<Vec<String>>) {
    let start = h.points.len().saturating_sub(TREND_COLUMNS);
    let mut headers = vec!["key".to_owned(), "unit".to_owned()];
    headers.extend(h.points[start..].iter().map(|p| p.label.clone()));
    headers.push("change".into());
    headers.push("latest noise".into());
    let rows = h
        .keys
        .iter()
        .map(|k| {
            let mut row = vec![k.key.clone(), k.unit.clone()];
            row.extend(
                k.values[start..]
                    .iter()
                    .map(|v| v.as_ref().map_or("–".into(), |v| num(v.value))),
            );
            row.push(k.change.map_or("–".into(), signed_pct));
            row.push(
                k.values
                    .last()
                    .and_then(|v| v.as_ref())
                    .map_or("–".into(), |v| {
                        if v.low == v.high {
                            "–".into()
                        } else {
                            format!("{}–{}", num(v.low), num(v.high))
                        }
                    }),
            );
            row
        })
        .collect();
    (headers, rows)
}

pub fn history(r: &HistoryReport) -> String {
    let mut s = String::from("# vaultbench baselines history\n\n");
    s.push_str(&format!("{}\n\n", r.source));
    for h in &r.scenarios {
        s.push_str(&format!("## {}\n\n", h.heading()));
        let vs: Vec<Vec<String>> = h
            .points
            .iter()
            .map(|p| {
                vec![
                    p.label.clone(),
                    p.date.clone().unwrap_or_else(|| "–".into()),
                    p.recorded_at.clone().unwrap_or_else(|| "–".into()),
                    p.samples.to_string(),
                    p.commit.clone().unwrap_or_else(|| "–".into()),
                ]
            })
            .collect();
        s.push_str(&md_table(
            &["version", "committed", "recorded at", "samples", "commit"],
            &vs,
        ));
        s.push('\n');
        if let Some(note) = h.machine_note() {
            s.push_str(&format!("{note}\n\n"));
        }
        if h.points.len() < 2 {
            s.push_str("One version only: no trend yet.\n\n");
            continue;
        }
        s.push_str(&format!(
            "Medians per version (newest {} shown); change is newest vs oldest version; the noise column is the newest version's raw min–max. A change inside the noise band is not a trend.\n\n",
            TREND_COLUMNS.min(h.points.len())
        ));
        let (headers, rows) = history_rows(h);
        let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
        s.push_str(&md_table(&hs, &rows));
        s.push('\n');
    }
    s
}

/// The per-phase cost table's columns: (header, key suffix after `<phase>.server.`); the
/// `per unit` columns take `_per_request` or `_per_file`, whichever the phase has.
const COST_COLUMNS: [(&str, &str); 13] = [
    ("phase / step", ""),
    ("cpu ms", "cpu_ms"),
    ("cpu µs per unit", "cpu_us_per_"),
    ("syscalls/request", "syscalls_per_request"),
    ("write bytes/file", "write_bytes_per_file"),
    ("instructions", "instructions"),
    ("instructions per unit", "instructions_per_"),
    ("fsync", "syscalls.fsync"),
    ("fdatasync", "syscalls.fdatasync"),
    ("rename", "syscalls.rename"),
    ("openat", "syscalls.openat"),
    ("mkdir", "syscalls.mkdir"),
    ("write", "syscalls.write"),
];

/// One row per phase or route-load step that has any cost key, in key order.
pub(crate) fn cost_rows(metrics: &[super::recording::Row]) -> Vec<Vec<String>> {
    use contract::key::{MetricKey, ServerKey};
    use std::collections::BTreeMap;
    let mut by: BTreeMap<String, BTreeMap<String, &super::recording::Row>> = BTreeMap::new();
    for m in metrics {
        if let Ok(MetricKey::Server(ServerKey {
            scope: Some(scope),
            stat,
        })) = m.key.parse()
            && COST_COLUMNS[1..].iter().any(|(_, s)| {
                if s.ends_with('_') {
                    stat.starts_with(s) && !stat.contains('.')
                } else {
                    stat == *s
                }
            })
        {
            by.entry(scope.to_string()).or_default().insert(stat, m);
        }
    }
    by.into_iter()
        .map(|(prefix, stats)| {
            let mut row = vec![prefix.to_owned()];
            for (_, s) in &COST_COLUMNS[1..] {
                let hit = stats.iter().find(|(k, _)| {
                    if s.ends_with('_') {
                        k.starts_with(s)
                    } else {
                        *k == s
                    }
                });
                row.push(hit.map_or_else(
                    || "–".into(),
                    |(k, m)| {
                        let unit = k.rsplit('_').next().unwrap_or("");
                        if s.ends_with('_') {
                            format!("{} /{unit}", num(m.value))
                        } else {
                            num(m.value)
                        }
                    },
                ));
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod cost_table_tests {
    use super::*;
    use crate::render::recording::Row;
    use crate::schema::{Better, MetricClass};

    fn row(key: &str, value: f64) -> Row {
        Row {
            key: key.into(),
            value,
            unit: "x".into(),
            class: MetricClass::Resource,
            better: Better::Lower,
            n: 1,
            min: value,
            max: value,
            spread: None,
        }
    }

    #[test]
    fn cost_rows_group_by_phase_and_step() {
        let rows = cost_rows(&[
            row("cold_push.server.cpu_ms", 12.0),
            row("cold_push.server.cpu_us_per_file", 120.0),
            row("cold_push.server.instructions_per_file", 9000.0),
            row("cold_push.server.syscalls.fsync", 310.0),
            row("cold_push.server.thread_cpu_ms.main", 1.0),
            row("cold_push.wall_ms", 5.0),
            row("route.post-version.c1.server.cpu_us_per_request", 80.0),
        ]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][0], "cold_push");
        assert_eq!(rows[0][2], "120 /file");
        assert_eq!(rows[0][6], "9,000 /file");
        assert_eq!(rows[0][7], "310");
        assert_eq!(rows[0][8], "–");
        assert_eq!(rows[1][0], "route.post-version.c1");
        assert_eq!(rows[1][2], "80 /request");
        assert!(cost_rows(&[row("cold_push.wall_ms", 1.0)]).is_empty());
    }
}

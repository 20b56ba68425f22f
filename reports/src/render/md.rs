//! Markdown rendering of the recording and history report models.

use super::fmt::{md_table, num, pct, signed_pct, with_unit};
use super::history::HistoryReport;
use super::recording::{Cell, RecordingReport};

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
    out.push(calibration_section(&r.calibration));
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

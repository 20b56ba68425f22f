//! The report model of one recording (a baseline and its provenance sidecar): phase, route and
//! route-load tables, server resources, the calibration gate's figures as shares of their
//! allowances, a provenance summary and the generated "what these numbers are not" section.
//! The JSON report is this model; Markdown and HTML render it.

use contract::key::{FSYNCS, MetricKey, PhaseKey, PhaseRouteKey, Scope, ServerKey};
use serde::Serialize;
use std::collections::BTreeMap;

use crate::schema::{Attempts, Baseline, Better, Contention, MetricClass, Provenance};
use contract::gate::{Gate, GateConfig};
use contract::key::RouteLoadKey;

/// Identifies the JSON report document.
pub const KIND_REPORT: &str = "vaultbench.report";

/// Phases in the order a scenario runs them (scenarios' `Phase::name`); unknown ones follow.
const PHASE_ORDER: [&str; 6] = contract::key::SYNC_PHASES;

/// One value with the spread of its raw series (min and max over the counted samples).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub value: f64,
    pub unit: String,
    pub min: f64,
    pub max: f64,
}

/// Every metric, as the closing table lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub key: String,
    pub value: f64,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
    /// Raw series length (the counted samples).
    pub n: usize,
    pub min: f64,
    pub max: f64,
    /// (max − min) / |median|: the noise the samples themselves show.
    pub spread: Option<f64>,
}

/// One phase's headline figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRow {
    pub phase: String,
    /// `<phase>.wall_ms`, or `cold_start.ready_ms`.
    pub wall_ms: Option<Cell>,
    /// `edit.p50_ms` / `edit.p95_ms` (edit propagation's round latencies).
    pub p50_ms: Option<Cell>,
    pub p95_ms: Option<Cell>,
    pub files_per_s: Option<Cell>,
    pub files: Option<Cell>,
    pub bytes: Option<Cell>,
    pub requests: Option<Cell>,
    /// Sum of the server's `fsyncs.*` counters over the phase.
    pub fsyncs: Option<f64>,
    pub fsyncs_per_file: Option<Cell>,
    pub errors: Option<Cell>,
}

/// One route's latency within a phase (`<phase>.<route>.p50_us` ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteRow {
    pub phase: String,
    pub route: String,
    pub requests: Option<Cell>,
    pub p50_us: Option<Cell>,
    pub p95_us: Option<Cell>,
    pub p99_us: Option<Cell>,
}

/// One route at one concurrency level (`route.<route>.c<N>.*`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadRow {
    pub route: String,
    pub in_flight: u32,
    pub p50_us: Option<Cell>,
    pub p99_us: Option<Cell>,
    pub rps: Option<Cell>,
    pub errors: Option<Cell>,
}

/// One calibration channel's statistics and each as a share of its allowance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelRow {
    pub channel: String,
    pub n: Option<u64>,
    pub median_ms: Option<f64>,
    pub cv: Option<f64>,
    pub cv_bound: Option<f64>,
    pub cv_share: Option<f64>,
    pub max_over_median: Option<f64>,
    pub max_over_median_bound: Option<f64>,
    pub max_over_median_share: Option<f64>,
    pub drift: Option<f64>,
    pub drift_bound: Option<f64>,
    pub drift_share: Option<f64>,
    pub failures: Vec<String>,
}

/// One in-sample contention channel over the samples, against its bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InSampleRow {
    pub channel: String,
    pub n: Option<u64>,
    pub median: Option<f64>,
    pub max: Option<f64>,
    pub max_share: Option<f64>,
    /// The worst sample as a share of the allowance.
    pub share: Option<f64>,
    pub failures: Vec<String>,
}

/// One sample's in-sample contention, as the sidecar kept it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContentionRow {
    /// `3`, `3 (warm-up)`, or `round 2 A` in an A/B result.
    pub sample: String,
    pub contention: Contention,
}

/// The gate's verdict as the sidecar recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    pub accepted: Option<bool>,
    pub drift_checked: Option<bool>,
    pub channels: Vec<ChannelRow>,
    /// The in-sample contention channels, judged over every sample's measured window.
    pub in_sample: Vec<InSampleRow>,
    /// In-sample counters this kernel did not offer (the kernels alone stood for them).
    pub unavailable: Vec<String>,
    /// Every sample's in-sample contention.
    pub samples: Vec<ContentionRow>,
}

/// Who, what and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProvenanceSummary {
    pub harness_version: String,
    pub harness_commit: Option<String>,
    pub harness_dirty: Option<bool>,
    pub toolchain: Option<String>,
    pub target_command: String,
    pub target_version: String,
    pub target_sha256: String,
    pub vault_digest: String,
    /// The machine fingerprint's identity fields (cpu_model, logical_cpus, ...).
    pub machine: BTreeMap<String, String>,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    pub attempts: Attempts,
    pub counted_samples: usize,
    pub warmup_samples: usize,
    pub failed_samples: usize,
    pub digest: String,
}

/// One per-file series of a checkpointed phase and its growth fit (`reports::growth`), from
/// the recording's medians.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrowthRow {
    pub phase: String,
    /// `log.NAME`, `server_cpu` or `time`.
    pub series: String,
    /// The one-line finding.
    pub finding: String,
    pub exponent: Option<f64>,
    pub exponent_lo: Option<f64>,
    pub exponent_hi: Option<f64>,
    /// The whole import's class, where one is named (`O(n²)`).
    pub class: Option<String>,
    pub superlinear: bool,
    /// (files on the server at the window's midpoint, cost per file), for the chart.
    pub points: Vec<(f64, f64)>,
}

/// The whole report of one recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordingReport {
    pub kind: String,
    pub report: String,
    pub format_version: u32,
    pub scenario: String,
    pub profile: String,
    /// The seed as `0x…` hex, as scenarios write it.
    pub seed: String,
    pub samples: u32,
    pub recorded_at: String,
    pub provenance: ProvenanceSummary,
    pub phases: Vec<PhaseRow>,
    pub phase_routes: Vec<RouteRow>,
    pub route_load: Vec<LoadRow>,
    pub server: Vec<Row>,
    /// How each per-file cost grows with the vault, per checkpointed phase (counts first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub growth: Vec<GrowthRow>,
    /// The target's own log counts (`PHASE.log.NAME`, `route.R.cN.log.NAME_per_request`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log_counts: Vec<Row>,
    pub calibration: Calibration,
    pub not_claims: Vec<String>,
    pub metrics: Vec<Row>,
    /// A `--cost` recording's top functions per part (from the sidecar's `cost`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub functions: BTreeMap<String, contract::profile::PartProfile>,
    /// A `--cost` recording's blocked time per part, from the traced run.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked: BTreeMap<String, contract::profile::PartBlocked>,
    /// Each traced part's untraced wall time (`<part>.wall_ms` of the timing samples), ms:
    /// the traced run's wall time over it is the tracer's overhead.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub untraced_wall_ms: BTreeMap<String, f64>,
}

/// Builds the report model of a baseline and its sidecar.
pub fn recording_report(b: &Baseline, p: &Provenance) -> RecordingReport {
    let metrics: Vec<Row> = b.metrics.keys().filter_map(|k| row(b, p, k)).collect();
    let provenance = provenance_summary(p);
    let mut calibration = calibration(p.gate.as_ref());
    calibration.samples = p
        .samples
        .iter()
        .filter_map(|m| {
            Some(ContentionRow {
                sample: if m.warmup {
                    format!("{} (warm-up)", m.index)
                } else {
                    m.index.to_string()
                },
                contention: m.contention.clone()?,
            })
        })
        .collect();
    let mut report = RecordingReport {
        kind: KIND_REPORT.into(),
        report: "recording".into(),
        format_version: crate::schema::FORMAT_VERSION,
        scenario: b.scenario.clone(),
        profile: p.profile.clone(),
        seed: format!("{:#x}", b.seed),
        samples: b.samples,
        recorded_at: p.recorded_at.clone(),
        provenance,
        phases: phases(b, p),
        phase_routes: phase_routes(b, p),
        route_load: route_load(b, p),
        server: metrics
            .iter()
            .filter(|r| r.key.starts_with("server."))
            .cloned()
            .collect(),
        growth: growth(b),
        log_counts: metrics
            .iter()
            .filter(|r| r.key.contains(".log.") && !r.key.contains(".checkpoint."))
            .cloned()
            .collect(),
        calibration,
        not_claims: Vec::new(),
        metrics,
        functions: p
            .cost
            .as_ref()
            .map(|c| c.functions.clone())
            .unwrap_or_default(),
        blocked: p
            .cost
            .as_ref()
            .map(|c| c.blocked.clone())
            .unwrap_or_default(),
        untraced_wall_ms: p
            .cost
            .iter()
            .flat_map(|c| c.blocked.keys())
            .filter_map(|part| {
                let m = b.metrics.get(&format!("{part}.wall_ms"))?;
                Some((part.clone(), m.value))
            })
            .collect(),
    };
    report.not_claims = not_claims(&report, b);
    report
}

/// The growth fits of every checkpointed phase, over the recording's medians.
pub fn growth(b: &Baseline) -> Vec<GrowthRow> {
    let keys = || b.metrics.iter().map(|(k, m)| (k.as_str(), m.value));
    let mut out = Vec::new();
    for phase in crate::growth::checkpointed_phases(b.metrics.keys().map(String::as_str)) {
        for f in crate::growth::findings(&phase, keys()) {
            let points = growth_points(b, &phase, &f.series);
            let g = f.growth.as_ref();
            out.push(GrowthRow {
                phase: phase.clone(),
                series: f.series.clone(),
                finding: f.line.clone(),
                exponent: g.map(|g| g.exponent),
                exponent_lo: g.map(|g| g.lo),
                exponent_hi: g.map(|g| g.hi),
                class: g.and_then(|g| g.class).map(|c| c.import().to_owned()),
                superlinear: g.is_some_and(|g| g.superlinear()),
                points,
            });
        }
    }
    out
}

/// Per checkpointed phase and series: how many counted samples, each fitted on its own raw
/// values, named a superlinear growth, of how many had a fit. Run against a server known to
/// be linear, this is the fit's false-finding rate on the machine.
pub fn superlinear_samples(b: &Baseline, p: &Provenance) -> Vec<(String, String, usize, usize)> {
    let n = p.raw.values().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<(String, String, usize, usize)> = Vec::new();
    for phase in crate::growth::checkpointed_phases(b.metrics.keys().map(String::as_str)) {
        for i in 0..n {
            let keys = p
                .raw
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), *v.get(i)?)));
            for f in crate::growth::findings(&phase, keys) {
                let row = match out.iter_mut().find(|r| r.0 == phase && r.1 == f.series) {
                    Some(r) => r,
                    None => {
                        out.push((phase.clone(), f.series.clone(), 0, 0));
                        out.last_mut().expect("just pushed")
                    }
                };
                if let Some(g) = &f.growth {
                    row.3 += 1;
                    row.2 += usize::from(g.superlinear());
                }
            }
        }
    }
    out
}

/// A series' (window midpoint, per-file value) points, as `growth::findings` reads them.
fn growth_points(b: &Baseline, phase: &str, series: &str) -> Vec<(f64, f64)> {
    let head = format!("{phase}.checkpoint.");
    let stat = match series {
        "server_cpu" => "server_cpu_us_per_file".to_owned(),
        "time" => "files_per_s".to_owned(),
        s => format!("{s}_per_file"),
    };
    let mut pts: Vec<(u64, f64)> = b
        .metrics
        .iter()
        .filter_map(|(k, m)| {
            let (files, st) = k.strip_prefix(&head)?.split_once('.')?;
            (st == stat).then_some((files.parse().ok()?, m.value))
        })
        .collect();
    pts.sort_by_key(|p| p.0);
    let mut from = 0u64;
    pts.into_iter()
        .map(|(to, v)| {
            let mid = (from + to) as f64 / 2.0;
            from = to;
            let y = if series == "time" && v > 0.0 {
                1e6 / v
            } else {
                v
            };
            (mid, y)
        })
        .collect()
}

/// A metric's cell with the spread of its raw series.
pub(crate) fn cell(b: &Baseline, p: &Provenance, key: &str) -> Option<Cell> {
    let m = b.metrics.get(key)?;
    let (min, max) =
        range(p.raw.get(key).map(Vec::as_slice).unwrap_or(&[])).unwrap_or((m.value, m.value));
    Some(Cell {
        value: m.value,
        unit: m.unit.clone(),
        min,
        max,
    })
}

fn row(b: &Baseline, p: &Provenance, key: &str) -> Option<Row> {
    let m = b.metrics.get(key)?;
    let series = p.raw.get(key).map(Vec::as_slice).unwrap_or(&[]);
    let (min, max) = range(series).unwrap_or((m.value, m.value));
    let spread = (m.value != 0.0 && !series.is_empty()).then(|| (max - min) / m.value.abs());
    Some(Row {
        key: key.to_owned(),
        value: m.value,
        unit: m.unit.clone(),
        class: m.class,
        better: m.better,
        n: series.len(),
        min,
        max,
        spread,
    })
}

/// Min and max of a series, ignoring NaN.
pub(crate) fn range(xs: &[f64]) -> Option<(f64, f64)> {
    crate::stats::range(xs)
}

/// The phase names present, in run order.
fn phase_names(b: &Baseline) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for k in b.metrics.keys() {
        let Ok(key) = k.parse::<MetricKey>() else {
            continue;
        };
        if let Some(phase) = key.phase_name()
            && !seen.iter().any(|s| s == phase)
        {
            seen.push(phase.to_owned());
        }
    }
    seen.sort_by_key(|p| {
        (
            PHASE_ORDER
                .iter()
                .position(|o| o == p)
                .unwrap_or(PHASE_ORDER.len()),
            p.clone(),
        )
    });
    seen
}

fn phases(b: &Baseline, p: &Provenance) -> Vec<PhaseRow> {
    phase_names(b)
        .into_iter()
        .map(|ph| {
            let c = |what: &str| cell(b, p, &PhaseKey::new(&ph, what).to_string());
            let scope = Scope::phase(&ph);
            let fsync_keys: Vec<f64> = b
                .metrics
                .iter()
                .filter(|(k, _)| {
                    matches!(k.parse(), Ok(MetricKey::Server(s))
                        if s.scope.as_ref() == Some(&scope) && s.is_scoped_member_of(FSYNCS))
                })
                .map(|(_, m)| m.value)
                .collect();
            PhaseRow {
                wall_ms: c("wall_ms").or_else(|| c("ready_ms")),
                p50_ms: c("p50_ms"),
                p95_ms: c("p95_ms"),
                files_per_s: c("files_per_s"),
                files: c("files").or_else(|| c("files_examined")),
                bytes: c("bytes"),
                requests: c("requests"),
                fsyncs: (!fsync_keys.is_empty()).then(|| fsync_keys.iter().sum()),
                fsyncs_per_file: cell(
                    b,
                    p,
                    &ServerKey::new(scope.clone(), "fsyncs_per_file").to_string(),
                ),
                errors: c("errors"),
                phase: ph,
            }
        })
        .collect()
}

fn phase_routes(b: &Baseline, p: &Provenance) -> Vec<RouteRow> {
    let mut out = Vec::new();
    for ph in phase_names(b) {
        let mut routes: Vec<String> = Vec::new();
        for k in b.metrics.keys() {
            if let Ok(MetricKey::PhaseRoute(k)) = k.parse()
                && k.phase == ph
                && k.quantile == 50
                && !routes.contains(&k.route)
            {
                routes.push(k.route);
            }
        }
        for route in routes {
            let c = |q: u32| cell(b, p, &PhaseRouteKey::new(&ph, &route, q).to_string());
            out.push(RouteRow {
                requests: cell(b, p, &PhaseKey::requests(&ph, &route).to_string()),
                p50_us: c(50),
                p95_us: c(95),
                p99_us: c(99),
                phase: ph.clone(),
                route,
            });
        }
    }
    out
}

fn route_load(b: &Baseline, p: &Provenance) -> Vec<LoadRow> {
    let mut levels: Vec<(String, u32)> = Vec::new();
    for k in b.metrics.keys() {
        if let Ok(key) = k.parse::<RouteLoadKey>() {
            let id = (key.route, key.in_flight);
            if !levels.contains(&id) {
                levels.push(id);
            }
        }
    }
    levels.sort();
    levels
        .into_iter()
        .map(|(route, n)| {
            let c = |what: &str| cell(b, p, &RouteLoadKey::new(&route, n, what).to_string());
            LoadRow {
                p50_us: c("p50_us"),
                p99_us: c("p99_us"),
                rps: c("rps"),
                errors: c("errors"),
                route,
                in_flight: n,
            }
        })
        .collect()
}

/// A target as a report names it: its command, and for a `git:REV` target the commit it
/// built (short hash and subject; `dirty` for an uncommitted worktree).
pub fn target_label(t: &crate::schema::TargetIdentity) -> String {
    match &t.git {
        None => t.command.clone(),
        Some(g) => format!(
            "{} (commit {}{} \"{}\")",
            t.command,
            &g.commit[..g.commit.len().min(12)],
            if g.dirty { ", dirty" } else { "" },
            g.subject
        ),
    }
}

fn provenance_summary(p: &Provenance) -> ProvenanceSummary {
    let machine = p.machine.identity.clone();
    let counted: Vec<_> = p.samples.iter().filter(|s| !s.warmup).collect();
    ProvenanceSummary {
        harness_version: p.harness.version.clone(),
        harness_commit: p.harness.git_commit.clone(),
        harness_dirty: p.harness.git_dirty,
        toolchain: p.harness.toolchain.clone(),
        target_command: target_label(&p.target),
        target_version: p.target.version.clone(),
        target_sha256: p.target.sha256.clone(),
        vault_digest: p.vault_digest.clone(),
        machine,
        loadavg_before: p.loadavg_before,
        loadavg_after: p.loadavg_after,
        attempts: p.attempts.clone(),
        counted_samples: counted.len(),
        warmup_samples: p.samples.iter().filter(|s| s.warmup).count(),
        failed_samples: p.samples.iter().filter(|s| !s.ok).count(),
        digest: p.digest.clone(),
    }
}

/// The gate's figures as the report shows them, from the recorded verdict (`None`: a
/// document without a gate, whose report shows no gate figures). Each channel's bounds are
/// the ones its statistics carry, the bounds it was judged by.
pub(crate) fn calibration(gate: Option<&Gate>) -> Calibration {
    let verdict = gate.and_then(|g| g.verdict.as_ref());
    let channels = verdict
        .map(|v| {
            v.channels
                .iter()
                .map(|(name, ch)| ChannelRow {
                    channel: name.clone(),
                    n: Some(ch.n as u64),
                    median_ms: Some(ch.median),
                    cv: Some(ch.cv),
                    cv_bound: Some(ch.bounds.max_cv),
                    cv_share: Some(ch.cv_share),
                    max_over_median: Some(ch.max_over_median),
                    max_over_median_bound: Some(ch.bounds.max_over_median),
                    max_over_median_share: Some(ch.max_over_median_share),
                    drift: ch.drift,
                    drift_bound: Some(ch.bounds.reference_tolerance),
                    drift_share: ch.drift_share,
                    failures: ch.failures.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let in_sample = verdict
        .map(|v| {
            v.in_sample
                .iter()
                .map(|(name, ch)| InSampleRow {
                    channel: name.clone(),
                    n: Some(ch.n as u64),
                    median: Some(ch.median),
                    max: Some(ch.max),
                    max_share: Some(ch.max_share),
                    share: Some(ch.share),
                    failures: ch.failures.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Calibration {
        accepted: verdict.map(|v| v.accepted),
        drift_checked: verdict.map(|v| v.drift_checked),
        channels,
        in_sample,
        unavailable: verdict.map(|v| v.unavailable.clone()).unwrap_or_default(),
        samples: Vec::new(),
    }
}

/// The generated "what these numbers are not" section (the seed report's closing section,
/// made from this recording's own facts).
fn not_claims(r: &RecordingReport, b: &Baseline) -> Vec<String> {
    let m = &r.provenance.machine;
    let get = |k: &str| m.get(k).map(String::as_str).unwrap_or("unknown");
    let mut out = Vec::new();
    out.push(format!(
        "Not a claim about other machines. Recorded on {} ({} logical CPUs, {} GiB, {}, {} filesystem, {} {}, kernel {}); absolute numbers move with the machine, so compare only recordings with the same machine fingerprint.",
        get("cpu_model"),
        get("logical_cpus"),
        get("memory_gib"),
        get("virtualisation"),
        get("fs_type"),
        get("os"),
        get("arch"),
        get("kernel"),
    ));
    let files = b.metrics.get("cold_push.files").map(|m| m.value);
    let bytes = b.metrics.get("cold_push.bytes").map(|m| m.value);
    out.push(match (files, bytes) {
        (Some(f), Some(by)) => format!(
            "Not a large-vault claim. Profile {} with seed {}: {} files, {} bytes pushed. Bigger vaults (vault1k, fixture, large, vault100k) are separate scenarios with their own baselines.",
            r.profile,
            r.seed,
            crate::fmt::num(f),
            crate::fmt::num(by)
        ),
        _ => format!("Not a large-vault claim. Profile {} with seed {}; bigger vaults are separate scenarios with their own baselines.", r.profile, r.seed),
    });
    let widest = r
        .metrics
        .iter()
        .filter(|x| x.class != MetricClass::Exact)
        .filter_map(|x| x.spread.map(|s| (s, &x.key)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = format!(
        "Not a tight estimate. Each value is the median of {} fresh-process samples (plus {} warm-up); the ranges in brackets are the raw minimum and maximum.",
        r.samples, r.provenance.warmup_samples
    );
    if let Some((spread, key)) = widest {
        s.push_str(&format!(" The widest timing/resource spread is {} on {key}; a change smaller than a key's spread is not evidence.", crate::fmt::pct(spread)));
    }
    if r.samples < 5 {
        s.push_str(" Fewer than 5 samples: the median can move with a single outlier.");
    }
    out.push(s);
    let a = &r.provenance.attempts;
    out.push(format!(
        "Not an unselected sample of machine conditions. This recording is the one accepted of {} attempt{} since the previous accepted recording: {} refused by the calibration gate, {} failed. Recordings that clear a variance gate are a selected sample of quiet moments.",
        a.attempted,
        if a.attempted == 1 { "" } else { "s" },
        a.refused,
        a.failed
    ));
    if r.provenance.failed_samples > 0 {
        out.push(format!(
            "{} sample(s) inside this recording reported errors; see the provenance sidecar.",
            r.provenance.failed_samples
        ));
    }
    let unsteady: Vec<&str> = r
        .metrics
        .iter()
        .filter(|x| x.class == MetricClass::Exact && x.min != x.max)
        .map(|x| x.key.as_str())
        .collect();
    if let Some(first) = unsteady.first() {
        out.push(format!(
            "Not fully deterministic. {} exact-class key{} varied across samples (e.g. {first}); exact counts should repeat for a build and seed, so the build or the scenario has a nondeterministic path there.",
            unsteady.len(),
            if unsteady.len() == 1 { "" } else { "s" }
        ));
    }
    // The one owner of the default bounds: a bound above its default is called out.
    let defaults = GateConfig::default();
    let loosened: Vec<String> = r
        .calibration
        .channels
        .iter()
        .flat_map(|c| {
            let d = defaults.bounds(&c.channel);
            [
                ("cv", c.cv_bound, d.map(|d| d.max_cv)),
                (
                    "max/median",
                    c.max_over_median_bound,
                    d.map(|d| d.max_over_median),
                ),
                (
                    "drift tolerance",
                    c.drift_bound,
                    d.map(|d| d.reference_tolerance),
                ),
            ]
            .into_iter()
            .filter_map(|(what, got, default)| match (got, default) {
                (Some(g), Some(d)) if g > d => Some(format!(
                    "{} {what} {} (default {})",
                    c.channel,
                    crate::fmt::num(g),
                    crate::fmt::num(d)
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
        })
        .collect();
    if !loosened.is_empty() {
        out.push(format!(
            "Not gated at the default strictness. The gate's bounds were loosened: {}. A recording that passes a looser gate may have been taken on a busier machine.",
            loosened.join(", ")
        ));
    }
    if r.calibration.drift_checked == Some(false) {
        out.push("Not checked against this machine's quiet reference. No `vaultbench calibrate` reference existed, so the gate judged only the recording's own variance, not drift from the machine's normal speed.".into());
    }
    if r.provenance.harness_dirty == Some(true) {
        out.push("Not from a clean checkout. The harness tree had uncommitted changes when this was recorded.".into());
    }
    out.push("Not a comparison between builds. Two baseline recordings are not a paired A/B; use `vaultbench ab` for that, and `vaultbench compare` only as a tripwire.".into());
    out.push("Not a merge gate. The post-merge trend job records on shared runners and is deliberately not a required check.".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_ignores_nan() {
        assert_eq!(range(&[3.0, f64::NAN, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(range(&[]), None);
    }
}

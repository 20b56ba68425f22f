//! The variance gate: per channel CV, max/median and drift from the machine reference, and the
//! in-sample contention channels (run-queue delay, PSI, steal over each sample's measured
//! window), against bounds from one config file.
//!
//! The default bounds are the recorded practice of a published MCP-server benchmark's gate
//! (its `eval/perf/contention.ts` table, recorded 2026-08-09: "cpuMs CV 0.20, max/median 1.6,
//! reference tolerance 0.5; ioMs 0.45, 2.5, 1.0"); the io bounds are looser because a quiet
//! reference host was itself measured at io CV 0.229.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use contract::gate::{
    CPU, ChannelBounds, ChannelStats, FOREIGN_CPU, FOREIGN_IO, GENERATOR_RUN_DELAY,
    GENERATOR_STARVED, GateConfig, GateVerdict, IN_SAMPLE, IO, InSampleStats, KERNELS,
    PSI_CPU_SOME, PSI_IO_SOME, RTT, ReportedStats, SERVER_RUN_DELAY, STEAL, ShareBound,
};
use contract::schema::{ChannelReading, Contention, GateFigure, SampleVerdict};

use crate::reference::Reference;

/// The value of one in-sample channel in a sample's contention reading.
pub fn in_sample_value(c: &Contention, channel: &str) -> Option<f64> {
    match channel {
        SERVER_RUN_DELAY => c.server_run_delay,
        GENERATOR_RUN_DELAY => c.generator_run_delay,
        PSI_CPU_SOME => c.psi_cpu_some,
        PSI_IO_SOME => c.psi_io_some,
        STEAL => c.steal,
        FOREIGN_CPU => c.foreign_cpu,
        FOREIGN_IO => c.foreign_io_mib_s,
        _ => None,
    }
}

/// The warning an accepted sample's reading earns, if any: a generator that waited for a CPU
/// at least as long as it ran (the target's own threads competing with it) has its wait in
/// every client latency it timed.
pub fn starvation_warning(c: &Contention) -> Option<String> {
    let d = c.generator_run_delay?;
    (d >= GENERATOR_STARVED).then(|| {
        format!(
            "the generator waited for a CPU {d:.2}x as long as it ran (the target used {:.2} CPUs): client latencies include that wait; server-side costs are unaffected",
            c.server_parallelism().unwrap_or(0.0)
        )
    })
}

/// A gate config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // `error`, not `source`: the message already holds it, and a source would print it twice
    // in the binary's `{:#}`.
    #[error("gate config {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("gate config {}: not valid TOML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("gate config {}: unknown key `{key}`", path.display())]
    UnknownKey { path: PathBuf, key: String },
    #[error("gate config {}: `{key}` must be a number, {problem}", path.display())]
    BadValue {
        path: PathBuf,
        key: String,
        problem: String,
    },
}

/// The gate file: reading a [`GateConfig`] from TOML over the defaults, and writing one.
/// (The config type is the contract's; the file and its errors are this crate's.)
pub trait GateFile: Sized {
    /// Env var naming a gate config file, used when no path is given.
    const ENV: &'static str = "VAULTBENCH_GATE_CONFIG";

    /// Loads thresholds from a TOML file (`[cpu_ms]` / `[io_ms]` tables with `max_cv`,
    /// `max_over_median`, `reference_tolerance`; missing keys keep their defaults).
    /// `None` reads the file named by `$VAULTBENCH_GATE_CONFIG`, or returns the defaults.
    /// An unknown key or a negative, non-finite or non-numeric bound is an error naming the
    /// file and the key.
    fn load(path: Option<&Path>) -> Result<Self, ConfigError>;
    /// Parses config text; `path` only names the file in errors.
    fn parse(path: &Path, text: &str) -> Result<Self, ConfigError>;
    /// The config as a TOML document (what `calibrate --print-config` writes).
    fn to_toml(&self) -> String;
}

impl GateFile for GateConfig {
    fn load(path: Option<&Path>) -> Result<GateConfig, ConfigError> {
        let env_path;
        let path = match path {
            Some(p) => p,
            None => match std::env::var_os(Self::ENV) {
                Some(p) if !p.is_empty() => {
                    env_path = PathBuf::from(p);
                    &env_path
                }
                _ => return Ok(GateConfig::default()),
            },
        };
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        Self::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<GateConfig, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    // toml's Display is a multi-line snippet; the message alone is one line.
                    message: e.message().to_owned(),
                })?;
        let mut cfg = GateConfig::default();
        for (section, value) in &table {
            let Some(inner) = value.as_table() else {
                return Err(ConfigError::BadValue {
                    path: path.to_owned(),
                    key: section.clone(),
                    problem: "found a value where a table was expected".into(),
                });
            };
            if let Some(share) = cfg.share_bound_mut(section) {
                for (key, value) in inner {
                    let full = format!("{section}.{key}");
                    if key != "max_share" {
                        return Err(ConfigError::UnknownKey {
                            path: path.to_owned(),
                            key: full,
                        });
                    }
                    share.max_share = bound_number(path, &full, value)?;
                }
                continue;
            }
            let Some(bounds) = cfg.bounds_mut(section) else {
                return Err(ConfigError::UnknownKey {
                    path: path.to_owned(),
                    key: section.clone(),
                });
            };
            for (key, value) in inner {
                let full = format!("{section}.{key}");
                let slot = match key.as_str() {
                    "max_cv" => &mut bounds.max_cv,
                    "max_over_median" => &mut bounds.max_over_median,
                    "reference_tolerance" => &mut bounds.reference_tolerance,
                    _ => {
                        return Err(ConfigError::UnknownKey {
                            path: path.to_owned(),
                            key: full,
                        });
                    }
                };
                *slot = bound_number(path, &full, value)?;
            }
        }
        Ok(cfg)
    }
    fn to_toml(&self) -> String {
        // Serialising flat tables of floats cannot fail.
        let plain = toml::to_string(self).unwrap_or_default();
        let mut out = String::from(
            "# vaultbench gate bounds. Edit, then pass --gate-config FILE; a missing key keeps its\n\
             # default, and the recording's report names every bound that differs from the default.\n",
        );
        for line in plain.lines() {
            if line.starts_with('[') && !out.ends_with("\n\n") {
                out.push('\n');
            }
            out.push_str(line);
            out.push('\n');
            if let Some(table) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                out.push_str(unit_comment(table));
            }
        }
        out
    }
}

/// What the numbers of one gate table mean, with their units, as comment lines.
fn unit_comment(table: &str) -> &'static str {
    match table {
        "cpu_ms" | "io_ms" | "rtt_ms" => {
            "# A kernel's readings (milliseconds): max_cv is their largest coefficient of variation\n\
             # (sd / mean, a ratio), max_over_median the slowest reading over the median (a ratio),\n\
             # reference_tolerance the largest |median / this machine's reference - 1| (a ratio).\n"
        }
        "foreign_cpu" => {
            "# CPU time of processes outside vaultbench and the target, as a share of all CPU time\n\
             # (0 to 1; 0.5 on two CPUs is one CPU's worth).\n"
        }
        "foreign_io" => {
            "# Storage bytes read and written by processes outside vaultbench and the target,\n\
             # in MiB per second of the window.\n"
        }
        "steal" => "# Steal time as a share of all CPU time (0 to 1).\n",
        "server_run_delay" | "generator_run_delay" => {
            "# Run-queue wait of those threads over their CPU time (a ratio); reported, and bounded\n\
             # only when this table is here.\n"
        }
        "psi_cpu_some" | "psi_io_some" => {
            "# Pressure-stall time over the window (0 to 1); reported, and bounded only when this\n\
             # table is here.\n"
        }
        _ => "",
    }
}

/// A bound's value from the config file: a finite, non-negative number.
fn bound_number(path: &Path, full: &str, value: &toml::Value) -> Result<f64, ConfigError> {
    let number = match value {
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        other => {
            return Err(ConfigError::BadValue {
                path: path.to_owned(),
                key: full.to_owned(),
                problem: format!("found a {}", other.type_str()),
            });
        }
    };
    if !number.is_finite() || number < 0.0 {
        return Err(ConfigError::BadValue {
            path: path.to_owned(),
            key: full.to_owned(),
            problem: format!("found {number}, bounds must be finite and >= 0"),
        });
    }
    Ok(number)
}

/// Judges a recording's readings of both channels.
pub fn judge(
    cpu: &[f64],
    io: &[f64],
    reference: Option<&Reference>,
    cfg: &GateConfig,
) -> GateVerdict {
    let mut channels = BTreeMap::new();
    let mut failures = Vec::new();
    for (name, values, bounds, reference_median) in [
        (CPU, cpu, &cfg.cpu_ms, reference.map(|r| r.cpu_ms)),
        (IO, io, &cfg.io_ms, reference.map(|r| r.io_ms)),
    ] {
        let stats = channel_stats(name, values, bounds, reference_median);
        failures.extend(stats.failures.iter().cloned());
        channels.insert(name.to_owned(), stats);
    }
    GateVerdict {
        accepted: failures.is_empty(),
        drift_checked: reference.is_some(),
        reference_id: reference.map(|r| r.fingerprint_id.clone()),
        channels,
        in_sample: BTreeMap::new(),
        unavailable: Vec::new(),
        failures,
        reported: BTreeMap::new(),
        warnings: Vec::new(),
        pre_check: BTreeMap::new(),
    }
}

/// Adds the round-trip channel's judgement to a verdict of the other two kernels: its readings
/// (`rtt`, empty when the readings came from a build before the channel, and then nothing is
/// added) against `cfg.rtt_ms` (a config without them, recorded before the channel, judges
/// nothing either) and this machine's reference. A reference stored before the channel has no
/// round-trip median: the channel's drift is not judged then, and the verdict warns so. Its
/// failures go after the other kernels' and before the in-sample channels'.
pub fn judge_rtt(
    v: &mut GateVerdict,
    rtt: &[f64],
    reference: Option<&Reference>,
    cfg: &GateConfig,
) {
    let Some(bounds) = cfg.rtt_ms.as_ref() else {
        return;
    };
    if rtt.is_empty() {
        return;
    }
    let reference_median = reference.and_then(|r| r.rtt_ms);
    if reference.is_some() && reference_median.is_none() {
        v.warnings.push(format!(
            "this machine's calibration reference has no {RTT} median (stored by an earlier vaultbench): the round trip's drift was not judged; run `vaultbench calibrate` to store one"
        ));
    }
    let stats = channel_stats(RTT, rtt, bounds, reference_median);
    let at = [CPU, IO]
        .iter()
        .filter_map(|c| v.channels.get(*c))
        .map(|s| s.failures.len())
        .sum::<usize>()
        .min(v.failures.len());
    for (i, f) in stats.failures.iter().enumerate() {
        v.failures.insert(at + i, f.clone());
    }
    v.channels.insert(RTT.to_owned(), stats);
    v.accepted = v.failures.is_empty();
}

/// Judges a recording: both kernels over all readings, and every sample's in-sample contention
/// (`contention[i]` is sample i's, `None` when it had none).
pub fn judge_with_contention(
    cpu: &[f64],
    io: &[f64],
    contention: &[Option<&Contention>],
    reference: Option<&Reference>,
    cfg: &GateConfig,
) -> GateVerdict {
    let mut v = judge(cpu, io, reference, cfg);
    let (in_sample, unavailable) = in_sample_stats(contention, cfg);
    for name in IN_SAMPLE {
        if let Some(stats) = in_sample.get(name) {
            v.failures.extend(stats.failures.iter().cloned());
        }
    }
    v.in_sample = in_sample;
    v.unavailable = unavailable;
    v.reported = reported_stats(contention, cfg);
    let mut warned = 0;
    for c in contention.iter().flatten() {
        if starvation_warning(c).is_some() {
            warned += 1;
        }
    }
    if warned > 0 {
        let worst = contention
            .iter()
            .flatten()
            .filter_map(|c| c.generator_run_delay)
            .fold(0.0, f64::max);
        v.warnings.push(format!(
            "in {warned} of {} samples the generator waited for a CPU at least as long as it ran (worst {worst:.2}x): the target's own threads competed with it, so client latencies include that wait; server-side costs are unaffected",
            contention.len()
        ));
    }
    v.accepted = v.failures.is_empty();
    v
}

/// The in-sample channels without a bound, over every sample: reported, not judged.
fn reported_stats(
    contention: &[Option<&Contention>],
    cfg: &GateConfig,
) -> BTreeMap<String, ReportedStats> {
    let mut out = BTreeMap::new();
    for name in IN_SAMPLE {
        if cfg.share_bound(name).is_some() {
            continue;
        }
        let per_sample: Vec<Option<f64>> = contention
            .iter()
            .map(|c| c.and_then(|c| in_sample_value(c, name)))
            .collect();
        let values: Vec<f64> = per_sample.iter().flatten().copied().collect();
        if values.is_empty() {
            continue;
        }
        out.insert(
            name.to_owned(),
            ReportedStats {
                n: values.len(),
                median: median(&values),
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                per_sample,
            },
        );
    }
    // The target's parallelism: CPUs its process tree used on average over the window.
    let per_sample: Vec<Option<f64>> = contention
        .iter()
        .map(|c| c.and_then(Contention::server_parallelism))
        .collect();
    let values: Vec<f64> = per_sample.iter().flatten().copied().collect();
    if !values.is_empty() {
        out.insert(
            "server_parallelism".to_owned(),
            ReportedStats {
                n: values.len(),
                median: median(&values),
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                per_sample,
            },
        );
    }
    out
}

fn in_sample_stats(
    contention: &[Option<&Contention>],
    cfg: &GateConfig,
) -> (BTreeMap<String, InSampleStats>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut unavailable: Vec<String> = Vec::new();
    let missing = contention.iter().filter(|c| c.is_none()).count();
    if missing > 0 {
        unavailable.push(format!(
            "{missing} of {} samples have no in-sample reading",
            contention.len()
        ));
    }
    for c in contention.iter().flatten() {
        for u in &c.unavailable {
            if !unavailable.contains(u) {
                unavailable.push(u.clone());
            }
        }
    }
    for name in IN_SAMPLE {
        let Some(bound) = cfg.share_bound(name) else {
            continue;
        };
        let per_sample: Vec<Option<f64>> = contention
            .iter()
            .map(|c| c.and_then(|c| in_sample_value(c, name)))
            .collect();
        let values: Vec<f64> = per_sample.iter().flatten().copied().collect();
        if values.is_empty() {
            continue;
        }
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let failures = per_sample
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let v = (*v)?;
                exceeds(v, bound.max_share)
                    .then(|| format!("{name} {v:.3} > {:.2} in sample {}", bound.max_share, i + 1))
            })
            .collect();
        out.insert(
            name.to_owned(),
            InSampleStats {
                n: values.len(),
                median: median(&values),
                max,
                max_share: bound.max_share,
                share: max / bound.max_share,
                per_sample,
                failures,
            },
        );
    }
    (out, unavailable)
}

/// The channels a pre-check judges: those that tell load from outside the run from the run's
/// own. Before the first sample nothing of the run is running, so every process counts as
/// foreign, and these are the only in-sample channels that mean the same thing then.
pub const PRE_CHECK: [&str; 3] = [FOREIGN_CPU, FOREIGN_IO, STEAL];

/// Judges a look at the machine taken before the first sample (`c`, over a window in which only
/// this process, idle, was measured) by the pre-check channels' bounds. Returns the failures,
/// in channel order, and every figure that was read, by channel. A channel the config leaves
/// unbounded, or that this kernel did not offer, is not judged.
pub fn judge_pre_check(c: &Contention, cfg: &GateConfig) -> (Vec<String>, BTreeMap<String, f64>) {
    let mut failures = Vec::new();
    let mut figures = BTreeMap::new();
    for name in PRE_CHECK {
        let Some(value) = in_sample_value(c, name) else {
            continue;
        };
        figures.insert(name.to_owned(), value);
        if let Some(bound) = cfg.share_bound(name)
            && exceeds(value, bound.max_share)
        {
            failures.push(format!("{name} {value:.3} > {:.2}", bound.max_share));
        }
    }
    (failures, figures)
}

/// Judges one A/B sample on its own: each in-sample channel against its bound, and each
/// kernel reading against the run's pooled readings so far (`pool`: earlier samples' readings,
/// warm-ups included) with this machine's reference median as one more pooled value, by the
/// channel's max/median bound. A slow reading is judged against what the run and the machine
/// normally read, not against the sample's one other reading.
pub fn judge_sample(
    readings: &[ChannelReading],
    contention: Option<&Contention>,
    pool: &[ChannelReading],
    reference: Option<&Reference>,
    cfg: &GateConfig,
) -> SampleVerdict {
    let mut v = SampleVerdict::default();
    match contention {
        None => v
            .notes
            .push("no in-sample reading: judged by the kernels alone".to_owned()),
        Some(c) => {
            for u in &c.unavailable {
                v.notes.push(format!("not offered: {u}"));
            }
            if let Some(w) = starvation_warning(c) {
                v.notes.push(w);
            }
            for name in IN_SAMPLE {
                let (Some(value), Some(bound)) = (in_sample_value(c, name), cfg.share_bound(name))
                else {
                    continue;
                };
                if exceeds(value, bound.max_share) {
                    v.failures
                        .push(format!("{name} {value:.3} > {:.2}", bound.max_share));
                }
                v.figures.push(GateFigure {
                    channel: name.to_owned(),
                    figure: "share".to_owned(),
                    value,
                    bound: bound.max_share,
                    share: value / bound.max_share,
                });
            }
        }
    }
    type Pick = fn(&ChannelReading) -> Option<f64>;
    let kernels: [(&str, Pick, Option<&ChannelBounds>, Option<f64>); 3] = [
        (
            CPU,
            |r| Some(r.cpu_ms),
            Some(&cfg.cpu_ms),
            reference.map(|r| r.cpu_ms),
        ),
        (
            IO,
            |r| Some(r.io_ms),
            Some(&cfg.io_ms),
            reference.map(|r| r.io_ms),
        ),
        // The round trip: judged when the readings have it and the config bounds it; a
        // reference stored before the channel has no median for it (drift not judged).
        (
            RTT,
            |r| r.rtt_ms,
            cfg.rtt_ms.as_ref(),
            reference.and_then(|r| r.rtt_ms),
        ),
    ];
    for (name, pick, bounds, reference_median) in kernels {
        let Some(bounds) = bounds else { continue };
        if name == RTT && readings.iter().all(|r| r.rtt_ms.is_none()) {
            continue;
        }
        let mine: Vec<f64> = readings
            .iter()
            .map(|r| pick(r).unwrap_or(f64::NAN))
            .collect();
        if mine.is_empty() || mine.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            v.failures.push(format!(
                "{name} has a reading that is not a positive number"
            ));
            continue;
        }
        let mut pooled: Vec<f64> = pool
            .iter()
            .filter_map(pick)
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        pooled.extend(reference_median);
        if pooled.is_empty() {
            v.notes.push(format!(
                "{name}: no pooled readings yet and no machine reference, not judged"
            ));
            continue;
        }
        let base = median(&pooled);
        let worst = mine.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ratio = worst / base;
        if exceeds(ratio, bounds.max_over_median) {
            v.failures.push(format!(
                "{name} {worst:.2} ms = {ratio:.2} x the pooled median {base:.2} ms > {:.2}",
                bounds.max_over_median
            ));
        }
        v.figures.push(GateFigure {
            channel: name.to_owned(),
            figure: "over_pooled_median".to_owned(),
            value: ratio,
            bound: bounds.max_over_median,
            share: (ratio - 1.0).max(0.0) / (bounds.max_over_median - 1.0),
        });
        if let Some(r) = reference_median {
            let drift = median(&mine) / r - 1.0;
            if exceeds(drift.abs(), bounds.reference_tolerance) {
                v.failures.push(format!(
                    "{name} drift {drift:+.3} from reference {r:.3} ms, |drift| > {:.2}",
                    bounds.reference_tolerance
                ));
            }
            v.figures.push(GateFigure {
                channel: name.to_owned(),
                figure: "drift_from_reference".to_owned(),
                value: drift,
                bound: bounds.reference_tolerance,
                share: drift.abs() / bounds.reference_tolerance,
            });
        } else if reference.is_some() {
            v.notes.push(format!(
                "{name}: this machine's reference has no median for it (stored by an earlier vaultbench), drift not judged"
            ));
        } else {
            v.notes
                .push(format!("{name}: no machine reference, drift not judged"));
        }
    }
    v.accepted = v.failures.is_empty();
    v
}

/// The workspace's one median (`contract`'s; the mean of the middle two for even lengths), NaN
/// for none: an empty channel, or a NaN reading, which the gate has already refused as "not
/// a positive number" and reports with a NaN median.
fn median(values: &[f64]) -> f64 {
    contract::schema::median(values).unwrap_or(f64::NAN)
}

/// True unless `figure <= bound`: a NaN figure (e.g. a zero reference) fails rather than passes.
fn exceeds(figure: f64, bound: f64) -> bool {
    !matches!(
        figure.partial_cmp(&bound),
        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
    )
}

fn channel_stats(
    name: &str,
    values: &[f64],
    bounds: &ChannelBounds,
    reference_median: Option<f64>,
) -> ChannelStats {
    let n = values.len();
    let mut failures = Vec::new();
    let usable = values.iter().all(|v| v.is_finite() && *v > 0.0);
    if !usable {
        failures.push(format!(
            "{name} has a reading that is not a positive number"
        ));
    }
    if n < 2 {
        failures.push(format!("{name} n {n} < 2 readings"));
    }
    let median = median(values);
    let mean = values.iter().sum::<f64>() / n as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let var = if n >= 2 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        f64::NAN
    };
    let cv = var.sqrt() / mean;
    let max_over_median = max / median;
    let drift = reference_median.map(|r| median / r - 1.0);
    let ok = usable && n >= 2;
    if ok && exceeds(cv, bounds.max_cv) {
        failures.push(format!("{name} cv {cv:.3} > {:.2}", bounds.max_cv));
    }
    if ok && exceeds(max_over_median, bounds.max_over_median) {
        failures.push(format!(
            "{name} max/median {max_over_median:.3} > {:.2}",
            bounds.max_over_median
        ));
    }
    if let (true, Some(d)) = (ok, drift)
        && exceeds(d.abs(), bounds.reference_tolerance)
    {
        failures.push(format!(
            "{name} drift {d:+.3} from reference {:.3} ms, |drift| > {:.2}",
            reference_median.unwrap_or(f64::NAN),
            bounds.reference_tolerance
        ));
    }
    ChannelStats {
        channel: None,
        n,
        median,
        mean,
        min,
        max,
        cv,
        max_over_median,
        reference_median,
        drift,
        bounds: *bounds,
        cv_share: cv / bounds.max_cv,
        max_over_median_share: (max_over_median - 1.0) / (bounds.max_over_median - 1.0),
        drift_share: drift.map(|d| d.abs() / bounds.reference_tolerance),
        failures,
    }
}

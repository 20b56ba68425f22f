//! The variance gate: per channel CV, max/median and drift from the machine reference, against bounds from one config file.
//!
//! The default bounds are the recorded practice in `shared/seeds/mcp-server-perf-baselines.txt`
//! ("cpuMs CV 0.20, max/median 1.6, reference tolerance 0.5; ioMs 0.45, 2.5, 1.0"); the io
//! bounds are looser because a quiet reference host was itself measured at io CV 0.229.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::reference::Reference;

/// Channel names, in the order they are reported.
pub const CPU: &str = "cpu_ms";
/// See [`CPU`].
pub const IO: &str = "io_ms";

/// The bounds one channel must stay within over a recording.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelBounds {
    /// Largest allowed coefficient of variation (sample standard deviation / mean).
    pub max_cv: f64,
    /// Largest allowed ratio of the slowest reading to the median.
    pub max_over_median: f64,
    /// Largest allowed |median / reference median - 1|.
    pub reference_tolerance: f64,
}

/// Gate thresholds for both channels. `Default` is the seed document's practice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    pub cpu_ms: ChannelBounds,
    pub io_ms: ChannelBounds,
}

impl Default for GateConfig {
    fn default() -> Self {
        // shared/seeds/mcp-server-perf-baselines.txt, "Method": the contention.ts table.
        GateConfig {
            cpu_ms: ChannelBounds {
                max_cv: 0.20,
                max_over_median: 1.6,
                reference_tolerance: 0.5,
            },
            io_ms: ChannelBounds {
                max_cv: 0.45,
                max_over_median: 2.5,
                reference_tolerance: 1.0,
            },
        }
    }
}

/// A gate config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("gate config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
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

impl GateConfig {
    /// Env var naming a gate config file, used when no path is given.
    pub const ENV: &'static str = "VAULTBENCH_GATE_CONFIG";

    /// Loads thresholds from a TOML file (`[cpu_ms]` / `[io_ms]` tables with `max_cv`,
    /// `max_over_median`, `reference_tolerance`; missing keys keep their defaults).
    /// `None` reads the file named by `$VAULTBENCH_GATE_CONFIG`, or returns the defaults.
    /// An unknown key or a negative, non-finite or non-numeric bound is an error naming the
    /// file and the key.
    pub fn load(path: Option<&Path>) -> Result<GateConfig, ConfigError> {
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
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses config text; `path` only names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<GateConfig, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    // toml's Display is a multi-line snippet; the message alone is one line.
                    message: e.message().to_owned(),
                })?;
        let mut cfg = GateConfig::default();
        for (section, value) in &table {
            let bounds = match section.as_str() {
                CPU => &mut cfg.cpu_ms,
                IO => &mut cfg.io_ms,
                _ => {
                    return Err(ConfigError::UnknownKey {
                        path: path.to_owned(),
                        key: section.clone(),
                    });
                }
            };
            let Some(inner) = value.as_table() else {
                return Err(ConfigError::BadValue {
                    path: path.to_owned(),
                    key: section.clone(),
                    problem: "found a value where a table was expected".into(),
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
                let number = match value {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(i) => *i as f64,
                    other => {
                        return Err(ConfigError::BadValue {
                            path: path.to_owned(),
                            key: full,
                            problem: format!("found a {}", other.type_str()),
                        });
                    }
                };
                if !number.is_finite() || number < 0.0 {
                    return Err(ConfigError::BadValue {
                        path: path.to_owned(),
                        key: full,
                        problem: format!("found {number}, bounds must be finite and >= 0"),
                    });
                }
                *slot = number;
            }
        }
        Ok(cfg)
    }

    /// The bounds of one channel by name.
    pub fn bounds(&self, channel: &str) -> Option<&ChannelBounds> {
        match channel {
            CPU => Some(&self.cpu_ms),
            IO => Some(&self.io_ms),
            _ => None,
        }
    }

    /// The config as a TOML document (what `calibrate --print-config` writes).
    pub fn to_toml(&self) -> String {
        // Serialising two flat tables of floats cannot fail.
        toml::to_string(self).unwrap_or_default()
    }
}

/// One channel's statistics over a recording and how they compare with the bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelStats {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation (n - 1) / mean.
    pub cv: f64,
    pub max_over_median: f64,
    /// The reference median this recording was compared with, when there was one.
    pub reference_median: Option<f64>,
    /// median / reference median - 1 (signed), when there was a reference.
    pub drift: Option<f64>,
    pub bounds: ChannelBounds,
    /// cv / max_cv.
    pub cv_share: f64,
    /// (max/median - 1) / (bound - 1): the allowance is the excess over 1, since max/median
    /// is never below 1.
    pub max_over_median_share: f64,
    /// |drift| / reference_tolerance.
    pub drift_share: Option<f64>,
    /// Each bound this channel broke, e.g. `cpu_ms cv 0.310 > 0.20`.
    pub failures: Vec<String>,
}

/// The gate's judgement of one recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    pub accepted: bool,
    /// False when no reference was stored for this machine: drift was not judged.
    pub drift_checked: bool,
    /// Fingerprint id of the reference used, if any.
    pub reference_id: Option<String>,
    pub channels: BTreeMap<String, ChannelStats>,
    /// All failures of all channels, in channel order.
    pub failures: Vec<String>,
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
        failures,
    }
}

/// Median of a non-empty slice (mean of the middle two for even lengths).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
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

impl GateVerdict {
    /// Human lines: one per channel with each figure as a share of its allowance, then the verdict.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, s) in &self.channels {
            let mut line = format!(
                "{name:<7} n {}  median {:.2} ms  cv {:.3} = {:.1} % of allowance  max/median {:.3} = {:.1} % of allowance",
                s.n,
                s.median,
                s.cv,
                s.cv_share * 100.0,
                s.max_over_median,
                s.max_over_median_share * 100.0
            );
            match (s.drift, s.drift_share) {
                (Some(d), Some(share)) => {
                    let _ = write!(
                        line,
                        "  drift {d:+.3} = {:.1} % of allowance",
                        share * 100.0
                    );
                }
                _ => line.push_str("  drift not checked"),
            }
            out.push(line);
        }
        if !self.drift_checked {
            out.push(
                "no calibration reference for this machine: drift was not checked (run `vaultbench calibrate`)"
                    .to_owned(),
            );
        }
        if self.accepted {
            out.push("gate: accepted".to_owned());
        } else {
            out.push(format!("gate: refused: {}", self.failures.join("; ")));
        }
        out
    }

    /// The failures as one line, for an error message.
    pub fn summary(&self) -> String {
        if self.accepted {
            "accepted".to_owned()
        } else {
            self.failures.join("; ")
        }
    }
}

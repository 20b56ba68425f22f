//! What a sample is asked to do (the plan the parent hands the child) and the small pieces
//! both the child and its phases build a result with.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reports::schema::{Better, Metric};
use scenarios::scenario::Scenario;

use crate::sample::target::TargetSpec;

/// What the parent hands a sample subprocess.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SamplePlan {
    pub scenario: Scenario,
    pub seed: u64,
    pub target: TargetSpec,
    pub vault_dir: PathBuf,
    pub vault_digest: String,
    pub work_dir: PathBuf,
    pub index: u32,
    pub warmup: bool,
    /// Run the server and the generator on the same CPUs (`--no-pin`).
    #[serde(default)]
    pub no_pin: bool,
    /// A cost sample: the scenario under callgrind and under strace, side by side (`sample::cost`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost: bool,
    /// A paired sample (`ab --paired`): B's target, up at the same time as `target` (A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_with: Option<TargetSpec>,
    /// In a paired sample, whether A starts first (and runs first in the first pair).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub a_first: bool,
    /// A cost sample copies its raw profiles (`callgrind.out.*`, `strace.log`) here, into a
    /// folder named after the sample (`--keep-profiles DIR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_profiles: Option<PathBuf>,
    /// `--phase-timeout`: how long one phase may take before the sample fails naming it.
    #[serde(default = "default_phase_timeout", with = "duration_ms")]
    pub phase_timeout: std::time::Duration,
}

/// The default of `--phase-timeout` (and of `load push|pull --transfer-timeout`), 1 h: sized
/// from the largest built-in scenario, `vault100k`. Its slowest phase is a cold push or pull
/// as replication documents, 1,167,567 of them; that protocol's `personal` scenario moved 20,366 documents in 9.3 s
/// (push) and 8.0 s (pull) on the quiet 2-CPU VM (the measured chapter), 2,200 to 2,500
/// documents a second, so `vault100k` takes about 8 to 9 minutes a transfer: 1 h is 6.5
/// times that, room for a busy machine and a slower server.
pub const DEFAULT_PHASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

fn default_phase_timeout() -> std::time::Duration {
    DEFAULT_PHASE_TIMEOUT
}

/// A duration as whole milliseconds in a plan.
mod duration_ms {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = <u64 as serde::Deserialize>::deserialize(d)?;
        Ok(Duration::from_millis(ms))
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// Metric keys being built for one sample.
#[derive(Default)]
pub struct Metrics {
    pub map: BTreeMap<String, Metric>,
    pub histograms: BTreeMap<String, String>,
    /// A cost sample's callgrind profiles per part.
    pub profiles: contract::profile::Profiles,
    /// A cost sample's blocked time per part (traced run).
    pub blocked: contract::profile::Blocked,
}

impl Metrics {
    pub fn exact(&mut self, key: impl Into<String>, v: f64, unit: &str) {
        self.map.insert(key.into(), Metric::exact(v, unit));
    }
    pub fn timing(&mut self, key: impl Into<String>, v: f64, unit: &str, better: Better) {
        self.map.insert(key.into(), Metric::timing(v, unit, better));
    }
    pub fn resource(&mut self, key: impl Into<String>, v: f64, unit: &str) {
        self.map.insert(key.into(), Metric::resource(v, unit));
    }
    pub fn cost(&mut self, key: impl Into<String>, v: f64, unit: &str) {
        self.map.insert(key.into(), Metric::cost(v, unit));
    }
    /// A check the sample passed (unit `bool`, 1 = passed; higher is better). A failed check
    /// fails the sample instead, so a recording only ever holds 1; the direction still says
    /// which way is good, for `compare`, A/B and the dashboard exports.
    pub fn passed(&mut self, key: impl Into<String>) {
        self.map.insert(
            key.into(),
            Metric::new(
                1.0,
                "bool",
                reports::schema::MetricClass::Exact,
                Better::Higher,
            ),
        );
    }
}

/// Milliseconds of a duration, as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Elapsed since `t0` in ms.
pub fn since_ms(t0: Instant) -> f64 {
    ms(t0.elapsed())
}

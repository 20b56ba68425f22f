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

//! The A/B result document (`vaultbench.ab`). Its round order, analyses and decision are
//! the A/B module's types, so the document lives beside them; every other persisted format,
//! and the kind/version check this one also goes through, is the `contract` crate's
//! (re-exported here so `reports::schema::*` keeps reading as before).

pub use contract::schema::*;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One build's sample in one A/B round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbSample {
    pub pid: u32,
    pub server_pid: u32,
    /// Attempts it took (1 = first try); refused or failed attempts are retried a bounded number of times.
    pub attempts: u32,
    pub calibration: Vec<ChannelReading>,
    /// In-sample contention over the kept attempt's measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
    /// The per-sample gate's figures for the kept attempt (in-sample channels, and its kernel
    /// readings against the run's pooled readings and the machine's reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<SampleVerdict>,
    /// Why earlier attempts of this sample were not used.
    pub retried_because: Vec<String>,
}

/// One A/B round: one sample of each build, in the planned order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbRound {
    pub index: usize,
    pub order: crate::ab::Order,
    pub a: Option<AbSample>,
    pub b: Option<AbSample>,
    /// Why the round failed, when it did.
    pub failure: Option<String>,
}

/// One exact-class key whose A and B values differ (reported as a fact, not a statistic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbExact {
    pub unit: String,
    pub diff: crate::ab::ExactDiff,
}

/// The result of `vaultbench ab`: everything the reports need (per-round raw values, order,
/// seeds, gate statistics, analyses, decision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbResult {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub profile: String,
    /// Vault seed.
    pub seed: u64,
    pub vault_digest: String,
    /// Seed of the order shuffle and of the permutation draws.
    pub order_seed: u64,
    pub aa: bool,
    pub recorded_at: String,
    pub harness: HarnessIdentity,
    pub machine: contract::machine::Fingerprint,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    pub a: TargetIdentity,
    pub b: TargetIdentity,
    pub rounds_planned: usize,
    pub rounds: Vec<AbRound>,
    pub balance: crate::ab::BalancePlan,
    /// Rounds per order, planned and kept ("2 A-first, 1 B-first": an odd plan runs one
    /// order once more). Absent in results written before odd plans existed; a reader then
    /// counts `rounds` and `balance.kept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_counts: Option<crate::ab::OrderCounts>,
    /// Practical threshold as a fraction, and where it came from (`flag`, `aa-reference`, `default`).
    pub tau: f64,
    pub tau_source: String,
    /// Units of every compared key.
    pub units: BTreeMap<String, String>,
    /// Timing and resource keys.
    pub metrics: BTreeMap<String, crate::ab::MetricAnalysis>,
    /// Exact keys that differ between A and B.
    pub exact_differences: BTreeMap<String, AbExact>,
    /// Exact keys that agree.
    pub exact_same: Vec<String>,
    /// Gate over every kept sample's readings (both builds).
    pub gate: Option<contract::gate::Gate>,
    /// The rule texts and the decision, when rules were given.
    pub rules: Vec<String>,
    pub decision: Option<crate::ab::Decision>,
}

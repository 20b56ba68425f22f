//! The `vaultbench trend detect` result (`kind: "vaultbench.trend"`): the change points found
//! per key over a history, each with its commit range, the size of the change with an
//! interval, and whether it is a step, a drift or a machine change; with `--bisect`, what the
//! bisect of each range named.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ab::Interval;
use crate::bisect::BisectOutcome;
use crate::schema::{Better, MetricClass};

/// The `kind` of a trend result.
pub const KIND_TREND: &str = "vaultbench.trend";

/// The key a calibration channel's own series is reported under (`calibration.io_ms`).
pub const CHANNEL_PREFIX: &str = "calibration.";

/// What kind of change a point is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointKind {
    /// The key moved between two neighbouring history entries and held its new level.
    Step,
    /// The key moved gradually over a run of entries: a line fits the run better than a step.
    Drift,
    /// A calibration channel moved beyond its tolerance at the same place: the machine
    /// changed, not the code. Keys that depend on the channel are named as this, never as a
    /// regression.
    Machine,
}

impl PointKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PointKind::Step => "step",
            PointKind::Drift => "drift",
            PointKind::Machine => "machine change",
        }
    }
}

/// An entry of the history, as the result refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRef {
    /// The entry's position in the history (0 is the oldest).
    pub index: usize,
    /// Its commit, when the history line has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub date: String,
}

/// One change point of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendPoint {
    pub key: String,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
    pub kind: PointKind,
    /// Whether the change is for the worse (by the key's direction); `false` for a machine
    /// change, which is neither.
    pub worse: bool,
    /// A step: the last entry before the change. A drift: the entry it starts from.
    pub before: EntryRef,
    /// A step: the first entry after the change. A drift: the entry it ends at.
    pub after: EntryRef,
    /// The change in percent of the level before: a step's two-sample Hodges–Lehmann shift of
    /// the segments on either side; a drift's fitted line from its start to its end.
    pub estimate_pct: f64,
    /// The 95 % interval of `estimate_pct`.
    pub ci_pct: Interval,
    /// The permutation test's p-value of the split that found the point.
    pub p_value: f64,
    /// The effect below which a point of this key is not reported, in percent (the class's
    /// minimum, or the key's recorded spread where that is larger).
    pub min_effect_pct: f64,
    /// A machine change: each channel that moved, with its ratio (`io_ms ×2.00`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// With `--bisect`: what the bisect of this point's commit range found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisect: Option<TrendBisect>,
}

/// The hand-off of one change point to `vaultbench bisect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendBisect {
    /// `cost`, `paired` or `sequential`, as `bisect` chose it from the key; `None` when
    /// bisect was not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Commits on the first-parent path from `before` to `after` (0 when not looked up).
    pub path_len: usize,
    /// How the search ended; a range of one commit is `found` without a search (that commit
    /// is the answer). `None` when bisect was not run or failed (`note` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<BisectOutcome>,
    /// The first bad commit bisect named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_bad: Option<String>,
    /// Why bisect was not run, or how it failed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The settings a detection ran with (echoed so a result can be reproduced).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendSettings {
    /// Seed of the permutation draws.
    pub seed: u64,
    /// Permutations per significance test.
    pub permutations: u32,
    /// A split is kept when its p-value is at most this.
    pub max_p: f64,
    /// The smallest segment either side of a split, in entries.
    pub min_segment: usize,
    /// The minimum effect per class, in percent.
    pub min_effect_pct: BTreeMap<String, f64>,
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendResult {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub machine_class: String,
    pub settings: TrendSettings,
    /// Every entry of the history, oldest first.
    pub entries: Vec<EntryRef>,
    /// How many keys were examined (channels included).
    pub keys_examined: usize,
    /// The change points, by key and position.
    pub points: Vec<TrendPoint>,
}

//! The `vaultbench bisect` result document (`kind: "vaultbench.bisect"`): the first commit on
//! a first-parent path at which a key got worse, the estimate of that step, every commit
//! measured with its verdict, and the builds and wall time the search used.

use serde::{Deserialize, Serialize};

use crate::ab::Interval;
use crate::schema::{HarnessIdentity, TargetIdentity};

/// The `kind` of a bisect result.
pub const KIND_BISECT: &str = "vaultbench.bisect";

/// A commit on the bisected path: its position (0 is `--good`; the last is `--bad`), hash and
/// subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRef {
    pub index: usize,
    pub commit: String,
    pub subject: String,
}

/// Where a commit stands after the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitVerdict {
    /// Not worse than its last known good neighbour (the same at the stated confidence).
    Good,
    /// Worse than its last known good neighbour by more than the threshold.
    Bad,
    /// It did not build: left out, like `git bisect skip`.
    Skipped,
    /// The comparison stayed undecided up to the round cap: "measure more".
    Unknown,
}

/// The three-valued answer of one comparison (Pinpoint's): `different` (worse beyond the
/// threshold at the stated confidence), `same` (inside it), `unknown` (neither at the round
/// cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Different,
    Same,
    Unknown,
}

/// One comparison of the search: a candidate against its last known good neighbour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectStep {
    /// The candidate's position on the path.
    pub candidate: usize,
    /// The position of the commit it was compared with.
    pub against: usize,
    pub answer: Answer,
    /// Rounds the answer took.
    pub rounds: usize,
    /// The candidate's change against `against`, in percent, with its interval.
    pub estimate_pct: Option<f64>,
    pub ci_pct: Option<Interval>,
    /// The interval's verdict in words.
    pub reason: String,
}

/// A commit the search touched, in path order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectCommit {
    #[serde(flatten)]
    pub at: CommitRef,
    pub verdict: CommitVerdict,
    /// The key's values measured at this commit (cost keys: one per cost sample).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
    /// Whether this run built it (false: the build cache had it).
    pub built_now: bool,
    /// A skipped commit: why (the build's exit and log tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BisectOutcome {
    /// One first bad commit.
    Found,
    /// The first bad commit is one of `candidates` (skipped or unknown commits sit just before
    /// the first known bad one).
    Ambiguous,
    /// `--bad` is not worse than `--good` beyond the threshold: nothing to find.
    NoRegression,
    /// `--good` against `--bad` stayed undecided up to the round cap.
    Unknown,
}

/// Builds the search used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildCount {
    /// Builds run by this invocation (the ends included).
    pub built: usize,
    /// Builds found in the cache.
    pub cached: usize,
    /// Commits other than the two ends that the search built or found built (the
    /// acceptance's "builds beyond the two ends").
    pub beyond_ends: usize,
}

/// The whole result of `vaultbench bisect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectResult {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    pub vault_digest: String,
    /// The key searched for and its unit.
    pub key: String,
    pub unit: String,
    /// `cost` (cost samples under callgrind), `paired` (paired timing samples) or
    /// `sequential` (timing samples one build after the other).
    pub mode: String,
    /// Practical threshold as a fraction.
    pub tau: f64,
    pub order_seed: u64,
    /// Rounds every comparison starts with, and the cap.
    pub rounds: usize,
    pub max_rounds: usize,
    pub repo: String,
    pub build_command: String,
    /// The server's command line in a worktree (`--bin` or `--run`).
    pub run: String,
    pub good: CommitRef,
    pub bad: CommitRef,
    /// Commits on the first-parent path after `good`, `bad` included.
    pub path_len: usize,
    pub outcome: BisectOutcome,
    pub first_bad: Option<CommitRef>,
    /// With [`BisectOutcome::Ambiguous`]: every commit that may be the first bad one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CommitRef>,
    /// The first bad commit (or `bad`) against its last known good neighbour.
    pub estimate_pct: Option<f64>,
    pub ci_pct: Option<Interval>,
    /// Every commit the search touched, in path order.
    pub commits: Vec<BisectCommit>,
    /// The comparisons, in the order they were made.
    pub steps: Vec<BisectStep>,
    pub builds: BuildCount,
    /// Measurements taken from an earlier, interrupted run of the same search.
    pub resumed_measurements: usize,
    pub wall_s: f64,
    pub recorded_at: String,
    pub harness: HarnessIdentity,
    pub machine: crate::machine::Fingerprint,
    /// The identities of the two ends' builds.
    pub good_target: TargetIdentity,
    pub bad_target: TargetIdentity,
}

//! The A/B result document (`vaultbench.ab`) and every part it persists: the round order and
//! the balance after failures, per-round samples, each metric's analysis with the statistics
//! results it embeds (Hodges–Lehmann, Wilcoxon, permutation, order effect), exact-key
//! differences and the decision. Plain serde types; `reports` computes the statistics and
//! the decision and fills them, and reads them back to render a report.
//!
//! A result of an older harness lacks some fields (`order_counts`, a round's samples, the
//! per-metric `interval_method`); those are `Option` or `#[serde(default)]`, so every result
//! ever written still reads.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::schema::{ChannelReading, Contention, HarnessIdentity, SampleVerdict, TargetIdentity};

/// Which build runs first in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    AFirst,
    BFirst,
}

/// How many rounds ran (or were planned) in each order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCount {
    pub a_first: usize,
    pub b_first: usize,
}

impl OrderCount {
    /// `true` when one order ran once more than the other: an order effect is then not
    /// cancelled for that one round.
    pub fn is_uneven(&self) -> bool {
        self.a_first != self.b_first
    }
}

impl std::fmt::Display for OrderCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} A-first, {} B-first", self.a_first, self.b_first)
    }
}

/// The order counts of an A/B run: as planned and as kept for the analysis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCounts {
    pub planned: OrderCount,
    pub kept: OrderCount,
}

/// Why a round was left out of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// A sample of this round failed or was refused by the calibration gate (after retries).
    Failed,
    /// The round succeeded but was dropped to keep A-first and B-first counts equal.
    Balance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedRound {
    /// 0-based round index in the plan.
    pub round: usize,
    pub order: Order,
    pub reason: DropReason,
}

/// Which rounds to analyse after failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalancePlan {
    /// 0-based indices of the rounds kept, ascending; A-first and B-first counts are equal
    /// (an odd plan may keep one more of either order).
    pub kept: Vec<usize>,
    /// Rounds left out, ascending by index, with the reason.
    pub dropped: Vec<DroppedRound>,
}

/// How the signed-rank p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PMethod {
    /// Exact null distribution (no ties, no zeros, n <= `reports::stats::EXACT_MAX_N`).
    Exact,
    /// Normal approximation with tie correction of the variance and continuity correction;
    /// `z` is the corrected statistic.
    Normal { z: f64 },
    /// Every difference was zero: there is no evidence of a shift and p is 1.
    AllZero,
}

/// Result of the two-sided Wilcoxon signed-rank test on paired differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedRankTest {
    /// Differences left after dropping exact zeros (R drops them too).
    pub n_used: usize,
    /// Exact zeros dropped; any zero forces the normal approximation, as in R.
    pub n_zeros: usize,
    /// Whether |differences| had tied ranks (forces the normal approximation, as in R).
    pub ties: bool,
    /// R's V: the sum of the ranks of the positive differences.
    pub v: f64,
    /// Two-sided p-value.
    pub p_two_sided: f64,
    pub method: PMethod,
}

/// How the Hodges–Lehmann interval was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// Order statistics of the Walsh averages at the exact signed-rank quantile (R's exact case).
    Exact,
    /// Order statistics at the normal-approximation critical value (Hollander & Wolfe 1999,
    /// eq. 3.25), used above `reports::stats::EXACT_MAX_N`.
    Normal,
}

/// Hodges–Lehmann location estimate of paired differences with a confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HodgesLehmann {
    pub n: usize,
    /// Median of the n(n+1)/2 Walsh averages (d_i + d_j)/2, i <= j.
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    /// The level that was asked for (e.g. 0.95).
    pub conf_level_requested: f64,
    /// The level the discrete distribution actually achieves with these order statistics
    /// (n = 6: 1 - 2/64 = 0.96875; n = 5: 0.9375; n = 4: 0.875).
    pub conf_level_achieved: f64,
    pub method: CiMethod,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PermutationMethod {
    /// All 2^n sign patterns.
    Exact { patterns: u64 },
    /// `draws` random sign patterns from `ChaCha8Rng::seed_from_u64(seed)`;
    /// p = (1 + hits) / (1 + draws) (Phipson & Smyth 2010), so p is never 0.
    MonteCarlo { draws: usize, seed: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermutationTest {
    /// Observed mean of the differences.
    pub mean: f64,
    /// Share of sign patterns whose |mean| is at least the observed |mean|; in (0, 1].
    pub p_two_sided: f64,
    pub method: PermutationMethod,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderEffect {
    pub n_a_first: usize,
    pub n_b_first: usize,
    pub mean_a_first: f64,
    pub mean_b_first: f64,
    /// mean(A-first) − mean(B-first).
    pub difference: f64,
    /// Two-sided permutation p of the difference of means over all relabellings that keep
    /// the group sizes; in (0, 1]. (n = 6 split 3/3 has only 20 relabellings: p >= 0.1.)
    pub p_two_sided: f64,
    pub method: PermutationMethod,
}

/// Which direction of change is an improvement for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// Four-way verdict for B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is on the improving side of 0 and not inside ±tau.
    Better,
    /// The whole interval is on the worsening side of 0 and not inside ±tau.
    Worse,
    /// The whole interval lies inside [-tau, +tau] (or every round was identical).
    NoChange,
    /// Anything else: the interval crosses 0 and reaches beyond ±tau, too few rounds, or no
    /// percent scale could be defined.
    Inconclusive,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// A closed interval; in percent when it comes from a `*_pct` field.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// How per-round values were compared.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Scale {
    /// d = ln(B/A); percent = 100 (e^d − 1). Used when every value is > 0.
    LogRatio,
    /// A value was <= 0 so a ratio is undefined: d = B − A in the metric's unit; percent =
    /// 100 d / `reference`, the median of A.
    DifferenceOverMedianA { reference: f64 },
    /// As above but A's median is 0 too: no percent can be given; tests still run on B − A.
    Difference,
}

/// Everything the reports need about one timing/resource metric of an A/B run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricAnalysis {
    pub better: Better,
    /// Practical threshold as a fraction (0.03 = 3 %).
    pub tau: f64,
    /// Seed for the Monte Carlo permutation draws (recorded even when enumeration was exact).
    pub seed: u64,
    pub n_rounds: usize,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub orders: Vec<Order>,
    pub a_median: f64,
    pub b_median: f64,
    pub scale: Scale,
    /// Per-round d (see [`Scale`]), in round order.
    pub per_round: Vec<f64>,
    /// Hodges–Lehmann estimate and interval of d, in d's units.
    pub hodges_lehmann: HodgesLehmann,
    /// The estimate as a percent change of B against A (`None` for [`Scale::Difference`]).
    pub estimate_pct: Option<f64>,
    pub ci_pct: Option<Interval>,
    pub wilcoxon: SignedRankTest,
    pub permutation: PermutationTest,
    /// Minimum detectable effect at `reports::ab::ALPHA`, `reports::ab::POWER`, in percent; `None` when no effect is
    /// detectable with this many rounds or no percent scale exists.
    pub mde_pct: Option<f64>,
    /// A-first vs B-first rounds; `None` when one of the groups is empty.
    pub order_effect: Option<OrderEffect>,
    /// Benjamini–Hochberg-adjusted Wilcoxon p across the metrics of the run; filled by
    /// `reports::ab::adjust_across_metrics`.
    pub p_bh: Option<f64>,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in words, for the report.
    pub reason: String,
    /// Which interval the estimate, interval and verdict come from (absent: Hodges–Lehmann,
    /// so documents of timing keys read as before).
    #[serde(default, skip_serializing_if = "IntervalMethod::is_hodges_lehmann")]
    pub interval_method: IntervalMethod,
}

/// How a metric's estimate and interval were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    /// Hodges–Lehmann with the exact Wilcoxon interval (timing and resource keys).
    #[default]
    HodgesLehmann,
    /// Student's t interval on the per-round log ratios (cost keys): valid at R = 3 or 4,
    /// where the exact Wilcoxon cannot reach p < 0.125, for keys whose rounds barely vary.
    TLogRatio,
    /// Hodges–Lehmann over blocks of pairs from a paired run (`ab --paired`), widened for the
    /// blocks' autocorrelation and the rounds' own offsets.
    PairedBlocks,
}

impl IntervalMethod {
    fn is_hodges_lehmann(&self) -> bool {
        *self == IntervalMethod::HodgesLehmann
    }
}

/// A difference in an exact-class metric (deterministic for a build and seed), reported as
/// values, never as statistics: "4.9 -> 5.9".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactDiff {
    /// A's value (the median if A's samples disagree).
    pub a: f64,
    /// B's value (the median if B's samples disagree).
    pub b: f64,
    /// Whether every A sample gave the same value (an exact key should).
    pub a_stable: bool,
    pub b_stable: bool,
}

impl fmt::Display for ExactDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.a, self.b)?;
        match (self.a_stable, self.b_stable) {
            (true, true) => Ok(()),
            (false, true) => write!(f, " (A varies between samples)"),
            (true, false) => write!(f, " (B varies between samples)"),
            (false, false) => write!(f, " (A and B vary between samples)"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleStatus {
    Holds,
    Violated,
    Unknown,
}

/// One rule applied to one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleCheck {
    pub rule: String,
    pub metric: String,
    /// Whether `interval_pct` is the plain change or the worsening-frame change (`all`).
    pub worsening_frame: bool,
    pub interval_pct: Option<Interval>,
    pub status: RuleStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    Keep,
    Reject,
    Inconclusive,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Keep => "KEEP",
            Outcome::Reject => "REJECT",
            Outcome::Inconclusive => "INCONCLUSIVE",
        })
    }
}

/// The decision and the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub outcome: Outcome,
    pub keep_if: Option<RuleCheck>,
    /// One check per (guard, metric); an `all` guard expands to every metric it covers.
    pub guards: Vec<RuleCheck>,
    pub reason: String,
}

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
    pub order: Order,
    pub a: Option<AbSample>,
    pub b: Option<AbSample>,
    /// Why the round failed, when it did.
    pub failure: Option<String>,
}

/// One exact-class key whose A and B values differ (reported as a fact, not a statistic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbExact {
    pub unit: String,
    pub diff: ExactDiff,
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
    pub machine: crate::machine::Fingerprint,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    pub a: TargetIdentity,
    pub b: TargetIdentity,
    pub rounds_planned: usize,
    pub rounds: Vec<AbRound>,
    pub balance: BalancePlan,
    /// Rounds per order, planned and kept ("2 A-first, 1 B-first": an odd plan runs one
    /// order once more). Absent in results written before odd plans existed; a reader then
    /// counts `rounds` and `balance.kept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_counts: Option<OrderCounts>,
    /// Practical threshold as a fraction, and where it came from (`flag`, `aa-reference`, `default`).
    pub tau: f64,
    pub tau_source: String,
    /// Units of every compared key.
    pub units: BTreeMap<String, String>,
    /// Timing and resource keys.
    pub metrics: BTreeMap<String, MetricAnalysis>,
    /// Exact keys that differ between A and B.
    pub exact_differences: BTreeMap<String, AbExact>,
    /// Exact keys that agree.
    pub exact_same: Vec<String>,
    /// Gate over every kept sample's readings (both builds).
    pub gate: Option<crate::gate::Gate>,
    /// The rule texts and the decision, when rules were given.
    pub rules: Vec<String>,
    pub decision: Option<Decision>,
    /// A paired run (`ab --paired`): both builds up at once in each round, alternated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<PairedRun>,
    /// A `--vault DIR` run: the user's vault as carried (no names, no content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_vault: Option<crate::schema::UserVault>,
    /// An `ab --cost` run: per part, the functions whose instructions changed most (medians
    /// over the kept rounds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub functions: BTreeMap<String, crate::profile::PartChanges>,
}

/// How a paired run measured: what its pairs and blocks were, per key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedRun {
    /// Pairs cut into this many blocks per round.
    pub blocks_per_round: usize,
    /// Phases the paired mode did not run (their keys are absent from the result).
    pub skipped_phases: Vec<String>,
    pub keys: BTreeMap<String, PairedKey>,
}

/// One paired key's pairs, blocks and the interval's widening.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedKey {
    /// Requests per connection and arm in one pair (1: request by request; a file for a push).
    pub slice: u64,
    /// Pairs per kept round.
    pub pairs: Vec<usize>,
    /// Pairs per block, per kept round.
    pub block_len: Vec<usize>,
    pub blocks: usize,
    /// Pooled lag-1 autocorrelation of the blocks within rounds.
    pub rho: Option<f64>,
    /// Between-round variance beyond the blocks' own (log-ratio units squared).
    pub tau2: Option<f64>,
    /// Factor the interval's half-widths were widened by.
    pub widening: Option<f64>,
    /// Every kept round's pairs (A's and B's value of each pair, in the order measured), so
    /// the analysis can be redone from the result alone. Empty in results written before the
    /// pairs were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<crate::schema::PairSeries>,
}

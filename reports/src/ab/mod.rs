//! A/B comparison of two server builds, pure: the harness runs the samples, this
//! module plans the round orders, balances after failures, analyses each metric, applies the
//! decision rule and derives the noise floor from A/A runs.
//!
//! Pipeline: [`plan_orders`] → (harness runs rounds) → [`drop_to_balance`] →
//! [`analyse_metric`] per timing/resource metric, [`exact_difference`] per exact metric →
//! [`adjust_across_metrics`] → [`decide`] (or [`decide_with_exact`]) with rules from
//! [`DecisionRules::parse`]; [`analyse_rounds`] does all of it for an A/B run's kept samples.

mod aa;
mod analysis;
mod error;
mod functions;
mod paired;
mod plan;
mod rounds;
mod rules;

pub use aa::{FalsePositives, MetricFalsePositives, count_false_positives, tau_from_aa};
pub use analysis::{
    ALPHA, Better, CONF_LEVEL, ExactDiff, Interval, IntervalMethod, MIN_VERDICT_CONF,
    MetricAnalysis, PERMUTATION_DRAWS, POWER, Scale, TInterval, Verdict, adjust_across_metrics,
    analyse_cost_metric, analyse_metric, exact_difference, t_interval, worsening_ci_pct,
};
pub use error::AbError;
pub use functions::{MIN_CHANGE_FOR_SHARES, function_changes};
pub use paired::{
    BLOCKS_PER_ROUND, PAIRED_DEFAULT_TAU, PairedDetail, Widening, analyse_paired_metric,
    block_values, widening,
};
pub use plan::{
    BalancePlan, DropReason, DroppedRound, MAX_ROUNDS, Order, OrderCount, OrderCounts,
    drop_to_balance, order_count, order_counts, plan_orders,
};
pub use rounds::{
    DEFAULT_TAU, RoundsAnalysis, RoundsError, RoundsOpts, analyse_rounds, better, default_tau,
};
pub use rules::{
    Cmp, Decision, DecisionRules, Outcome, Rule, RuleCheck, RuleError, RuleStatus, RuleTarget,
    decide, decide_with_exact, parse_rule,
};

//! Decision rules: `--keep-if 'server.cpu_s <= -10%'` and `--guard 'all <= +3%'`, parsed and
//! evaluated to KEEP / REJECT / INCONCLUSIVE against the per-metric intervals.
//!
//! Semantics (documented once, here):
//! - A rule is `<metric> <= <signed percent>%` or `<metric> >= <signed percent>%`.
//! - For a named metric the percent is the metric's own change of B against A, as printed
//!   (`server.cpu_s <= -10%`: CPU fell by at least 10 %; `rps >= +5%`: throughput rose 5 %).
//! - `all` (guards only) means every analysed metric except the keep-if's own, read in the
//!   *worsening* frame: the change for lower-is-better metrics, the change with its sign
//!   flipped for higher-is-better ones. So `all <= +3%` says no metric got more than 3 %
//!   worse (a latency rose at most 3 %, a throughput fell at most 3 %).
//! - With the 95 % Hodges–Lehmann interval [lo, hi] of that change, `<= T` *holds* when
//!   hi <= T, is *violated* when lo > T, and is *unknown* otherwise; `>= T` holds when
//!   lo >= T, is violated when hi < T. An interval below [`MIN_VERDICT_CONF`] (too few rounds)
//!   or without a percent scale is unknown, unless every round was identical (then [0, 0]).
//! - A named exact-class metric (via [`decide_with_exact`]) is judged on its exact change,
//!   the zero-width interval [c, c].
//! - REJECT if the keep-if is violated or any guard is violated; else KEEP if the keep-if
//!   holds (or there is none); else INCONCLUSIVE. An unknown guard does not block KEEP: the
//!   guard asks "no metric got confidently worse", which is what R = 6 rounds can answer.

use std::collections::BTreeMap;

use contract::parse::SignedPercentError;
use serde::{Deserialize, Serialize};

use super::analysis::{Interval, MIN_VERDICT_CONF, MetricAnalysis, worsening_ci_pct};
pub use contract::ab::{Decision, Outcome, RuleCheck, RuleStatus};

/// A malformed or inapplicable rule; the variant names the rule text and the metric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error(
        "malformed rule '{text}': {reason} (expected '<metric> <= <percent>%' or '<metric> >= <percent>%', e.g. 'server.cpu_s <= -10%')"
    )]
    Malformed { text: String, reason: String },
    #[error("unknown metric '{metric}' in rule '{text}' (known: {known})")]
    UnknownMetric {
        metric: String,
        text: String,
        known: String,
    },
    #[error("keep-if rule '{text}' must name one metric, not 'all'")]
    AllInKeepIf { text: String },
}

/// What a rule speaks about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleTarget {
    All,
    Metric(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    Le,
    Ge,
}

/// One parsed rule; `text` is what the user wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub text: String,
    pub target: RuleTarget,
    pub cmp: Cmp,
    /// Threshold in percent (−10.0 for `-10%`).
    pub threshold_pct: f64,
}

/// Parse one rule. Accepts `<=`/`>=` (and `≤`/`≥`), optional spaces, a signed decimal percent
/// with a trailing `%`. Metric names are any run of non-space characters without `<`, `>`, `=`.
pub fn parse_rule(text: &str) -> Result<Rule, RuleError> {
    let bad = |reason: &str| RuleError::Malformed {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let t = text.trim();
    let ops = [
        ("<=", Cmp::Le),
        (">=", Cmp::Ge),
        ("≤", Cmp::Le),
        ("≥", Cmp::Ge),
    ];
    let found: Vec<(usize, &str, Cmp)> = ops
        .iter()
        .flat_map(|(s, c)| t.match_indices(s).map(move |(i, _)| (i, *s, *c)))
        .collect();
    let (pos, op, cmp) = match found.as_slice() {
        [one] => *one,
        [] => return Err(bad("no '<=' or '>=' comparison")),
        _ => return Err(bad("more than one comparison")),
    };
    let metric = t[..pos].trim();
    let rhs = t[pos + op.len()..].trim();
    if metric.is_empty() {
        return Err(bad("no metric before the comparison"));
    }
    if metric
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '='))
    {
        return Err(bad("the metric name contains a space or a comparison sign"));
    }
    let threshold_pct = contract::parse::signed_percent_points(rhs).map_err(|e| match e {
        SignedPercentError::NoPercentSign(_) => {
            bad("the threshold must be a percent ending in '%'")
        }
        SignedPercentError::NotDecimal(number) => {
            bad(&format!("'{number}' is not a signed decimal number"))
        }
    })?;
    if threshold_pct <= -100.0 {
        return Err(bad("a change cannot reach -100 % or below"));
    }
    let target = if metric == "all" {
        RuleTarget::All
    } else {
        RuleTarget::Metric(metric.to_string())
    };
    Ok(Rule {
        text: text.to_string(),
        target,
        cmp,
        threshold_pct,
    })
}

/// The keep-if rule (optional) and the guards of one A/B run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DecisionRules {
    pub keep_if: Option<Rule>,
    pub guards: Vec<Rule>,
}

impl DecisionRules {
    /// Parse the command-line texts; fails on the first malformed rule, and on `all` in keep-if.
    pub fn parse(keep_if: Option<&str>, guards: &[&str]) -> Result<Self, RuleError> {
        let keep_if = keep_if.map(parse_rule).transpose()?;
        if let Some(r) = &keep_if
            && r.target == RuleTarget::All
        {
            return Err(RuleError::AllInKeepIf {
                text: r.text.clone(),
            });
        }
        let guards = guards
            .iter()
            .map(|g| parse_rule(g))
            .collect::<Result<_, _>>()?;
        Ok(Self { keep_if, guards })
    }

    /// Whether there is any rule at all.
    pub fn is_empty(&self) -> bool {
        self.keep_if.is_none() && self.guards.is_empty()
    }

    /// Check that every named metric is one of `known` (call before running, to fail fast).
    pub fn check_metrics<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<(), RuleError> {
        for r in self.keep_if.iter().chain(&self.guards) {
            if let RuleTarget::Metric(m) = &r.target
                && !known.clone().into_iter().any(|k| k == m)
            {
                return Err(RuleError::UnknownMetric {
                    metric: m.clone(),
                    text: r.text.clone(),
                    known: known.into_iter().collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(())
    }
}

/// The interval a rule is judged on, or `None` when it carries no confidence.
fn judged_interval(m: &MetricAnalysis, worsening: bool) -> Option<Interval> {
    let identical = m.per_round.iter().all(|d| *d == 0.0);
    if identical {
        return Some(Interval { lo: 0.0, hi: 0.0 });
    }
    if m.hodges_lehmann.conf_level_achieved < MIN_VERDICT_CONF {
        return None;
    }
    if worsening {
        worsening_ci_pct(m)
    } else {
        m.ci_pct
    }
}

/// Thresholds are met with a tolerance of 1e-9 percentage points, so that an exact change
/// computed in binary floating point (5 -> 4 gives -19.999999999999996 %) meets `<= -20%`.
const THRESHOLD_TOL_PCT: f64 = 1e-9;

fn check(rule: &Rule, metric: &str, interval: Option<Interval>, worsening: bool) -> RuleCheck {
    let t = rule.threshold_pct;
    let status = match (interval, rule.cmp) {
        (None, _) => RuleStatus::Unknown,
        (Some(i), Cmp::Le) if i.hi <= t + THRESHOLD_TOL_PCT => RuleStatus::Holds,
        (Some(i), Cmp::Le) if i.lo > t + THRESHOLD_TOL_PCT => RuleStatus::Violated,
        (Some(i), Cmp::Ge) if i.lo >= t - THRESHOLD_TOL_PCT => RuleStatus::Holds,
        (Some(i), Cmp::Ge) if i.hi < t - THRESHOLD_TOL_PCT => RuleStatus::Violated,
        _ => RuleStatus::Unknown,
    };
    RuleCheck {
        rule: rule.text.clone(),
        metric: metric.to_string(),
        worsening_frame: worsening,
        interval_pct: interval,
        status,
    }
}

/// The exact change of an exact-class metric as a zero-width interval: 100 (B/A − 1) %.
/// Equal values are 0 %; a change from A = 0 has no percent (unknown).
fn exact_interval(a: f64, b: f64) -> Option<Interval> {
    let pct = if a == b {
        0.0
    } else if a != 0.0 {
        100.0 * (b / a - 1.0)
    } else {
        return None;
    };
    pct.is_finite().then_some(Interval { lo: pct, hi: pct })
}

/// Evaluate the rules against the analyses of one run (keys = the timing/resource metric
/// names). A rule naming a metric that is not a key is an error naming it.
pub fn decide(
    rules: &DecisionRules,
    analyses: &BTreeMap<String, MetricAnalysis>,
) -> Result<Decision, RuleError> {
    decide_with_exact(rules, analyses, &BTreeMap::new())
}

/// As [`decide`], but a rule may also name an exact-class metric, given in `exact` as
/// (A value, B value) for every exact key compared, whether it changed or not. Its change is
/// known exactly, so it is judged on the zero-width interval [c, c] with c = 100 (B/A − 1) %
/// (e.g. `--keep-if 'server.fsyncs_per_post <= -20%'`). `all` still covers only the
/// timing/resource metrics in `analyses`. A name in both maps is read from `analyses`.
pub fn decide_with_exact(
    rules: &DecisionRules,
    analyses: &BTreeMap<String, MetricAnalysis>,
    exact: &BTreeMap<String, (f64, f64)>,
) -> Result<Decision, RuleError> {
    rules.check_metrics(analyses.keys().chain(exact.keys()).map(String::as_str))?;
    let named = |r: &Rule, name: &str| match analyses.get(name) {
        Some(m) => check(r, name, judged_interval(m, false), false),
        None => {
            let interval = exact.get(name).and_then(|(a, b)| exact_interval(*a, *b));
            check(r, name, interval, false)
        }
    };
    let keep_metric = rules.keep_if.as_ref().and_then(|r| match &r.target {
        RuleTarget::Metric(m) => Some(m.as_str()),
        RuleTarget::All => None,
    });
    let keep_if = match (&rules.keep_if, keep_metric) {
        (Some(r), Some(name)) => Some(named(r, name)),
        _ => None,
    };
    let mut guards = Vec::new();
    for g in &rules.guards {
        match &g.target {
            RuleTarget::Metric(name) => guards.push(named(g, name)),
            RuleTarget::All => {
                for (name, m) in analyses {
                    if Some(name.as_str()) != keep_metric {
                        guards.push(check(g, name, judged_interval(m, true), true));
                    }
                }
            }
        }
    }
    let violated: Vec<&RuleCheck> = keep_if
        .iter()
        .chain(&guards)
        .filter(|c| c.status == RuleStatus::Violated)
        .collect();
    let (outcome, reason) = if !violated.is_empty() {
        let list: Vec<String> = violated
            .iter()
            .map(|c| format!("'{}' violated by {}", c.rule, c.metric))
            .collect();
        (Outcome::Reject, list.join("; "))
    } else {
        match &keep_if {
            None => (
                Outcome::Keep,
                if rules.is_empty() {
                    "no rule given".to_string()
                } else {
                    "no guard is violated".to_string()
                },
            ),
            Some(k) if k.status == RuleStatus::Holds => (
                Outcome::Keep,
                format!("'{}' holds and no guard is violated", k.rule),
            ),
            Some(k) => (
                Outcome::Inconclusive,
                format!(
                    "'{}' is neither confidently met nor confidently missed",
                    k.rule
                ),
            ),
        }
    };
    Ok(Decision {
        outcome,
        keep_if,
        guards,
        reason,
    })
}

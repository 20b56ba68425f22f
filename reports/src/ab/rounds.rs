//! The analysis of an A/B run's kept rounds, pure: from the two builds' samples of every
//! kept round to each metric's verdict, the exact differences, the paired details, the
//! decision and the function changes. The harness runs and balances the rounds; a test can
//! call this with samples it built itself.

use std::collections::{BTreeMap, BTreeSet};

use contract::ab::{AbExact, Decision, PairedKey, PairedRun};
use contract::schema::{MetricClass, PairSeries, SampleResult};

use super::analysis::{
    Better, MetricAnalysis, adjust_across_metrics, analyse_cost_metric, analyse_metric,
    exact_difference,
};
use super::error::AbError;
use super::functions::function_changes;
use super::paired::{BLOCKS_PER_ROUND, PAIRED_DEFAULT_TAU, analyse_paired_metric};
use super::plan::Order;
use super::rules::{DecisionRules, RuleError, decide};

/// The practical threshold of a sequential run's timing keys when neither `--tau` nor a
/// stored A/A noise floor gives one: 5 % (a paired run's is [`PAIRED_DEFAULT_TAU`]). A
/// decision rule may guard "no other tracked metric > 3 % worse", but a 2-core shared
/// machine's A/A noise on timing keys is usually wider, so 5 % is the honest default until an
/// A/A run has measured the machine.
pub const DEFAULT_TAU: f64 = 0.05;

/// The default threshold of a run's timing keys: the paired one for a paired run.
pub fn default_tau(paired: bool) -> f64 {
    if paired {
        PAIRED_DEFAULT_TAU
    } else {
        DEFAULT_TAU
    }
}

/// What the analysis needs besides the samples.
#[derive(Debug, Clone, Copy)]
pub struct RoundsOpts<'a> {
    /// `--tau`: one threshold for every timing key, over any stored one.
    pub tau: Option<f64>,
    /// This machine's A/A noise floor, per key, when one is stored.
    pub stored_tau: Option<&'a BTreeMap<String, f64>>,
    /// The rounds are paired samples (the pairs ride on A's sample).
    pub paired: bool,
    /// The cost keys' threshold.
    pub cost_tau: f64,
    /// Seed of the permutation draws.
    pub order_seed: u64,
    /// The decision rule; empty for none.
    pub rules: &'a DecisionRules,
}

impl RoundsOpts<'_> {
    /// The threshold of `key`: the flag, else the stored floor's, else the default.
    pub fn tau_for(&self, key: &str) -> f64 {
        match (self.tau, self.stored_tau) {
            (Some(t), _) => t,
            (None, Some(m)) => m.get(key).copied().unwrap_or(default_tau(self.paired)),
            (None, None) => default_tau(self.paired),
        }
    }

    /// The run-wide threshold written in the result, and where it came from.
    pub fn tau_and_source(&self) -> (f64, &'static str) {
        match (self.tau, self.stored_tau) {
            (Some(t), _) => (t, "flag"),
            (None, Some(_)) => (default_tau(self.paired), "aa-reference"),
            (None, None) => (default_tau(self.paired), "default"),
        }
    }
}

/// The analysis of the kept rounds: the parts of an A/B result that follow from the samples.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundsAnalysis {
    pub tau: f64,
    pub tau_source: &'static str,
    pub units: BTreeMap<String, String>,
    pub metrics: BTreeMap<String, MetricAnalysis>,
    pub exact_differences: BTreeMap<String, AbExact>,
    pub exact_same: Vec<String>,
    /// Per paired key, how its pairs were cut into blocks (empty for a sequential run).
    pub paired_keys: BTreeMap<String, PairedKey>,
    pub decision: Option<Decision>,
    pub functions: BTreeMap<String, contract::profile::PartChanges>,
    /// Keys missing from some kept sample of either build: not compared.
    pub not_compared: Vec<String>,
}

impl RoundsAnalysis {
    /// The paired part of the result, for a paired run.
    pub fn paired_run(&self, skipped_phases: Vec<String>) -> PairedRun {
        PairedRun {
            blocks_per_round: BLOCKS_PER_ROUND,
            skipped_phases,
            keys: self.paired_keys.clone(),
        }
    }
}

/// Why the kept rounds could not be analysed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoundsError {
    #[error("analysing {key}: {source}")]
    Metric { key: String, source: AbError },
    #[error(transparent)]
    Rule(#[from] RuleError),
}

/// A metric's direction as the analysis takes it.
pub fn better(b: contract::schema::Better) -> Better {
    match b {
        contract::schema::Better::Lower => Better::Lower,
        contract::schema::Better::Higher => Better::Higher,
    }
}

/// Analyses every key of the kept rounds (`kept[i]` is round `i`'s A and B samples, run in
/// `orders[i]`): exact keys by their difference, cost keys by a t interval on the log
/// ratios, paired keys by their blocks, the rest by the permutation test; then the
/// correction across metrics and the decision.
pub fn analyse_rounds(
    kept: &[(&SampleResult, &SampleResult)],
    orders: &[Order],
    opts: &RoundsOpts<'_>,
) -> Result<RoundsAnalysis, RoundsError> {
    let (tau, tau_source) = opts.tau_and_source();
    let mut out = RoundsAnalysis {
        tau,
        tau_source,
        units: BTreeMap::new(),
        metrics: BTreeMap::new(),
        exact_differences: BTreeMap::new(),
        exact_same: Vec::new(),
        paired_keys: BTreeMap::new(),
        decision: None,
        functions: BTreeMap::new(),
        not_compared: Vec::new(),
    };
    let keys: BTreeSet<&String> = kept
        .iter()
        .flat_map(|(a, b)| a.metrics.keys().chain(b.metrics.keys()))
        .collect();
    for key in keys {
        let column = |of_a: bool| -> Option<Vec<f64>> {
            kept.iter()
                .map(|(a, b)| {
                    let s = if of_a { a } else { b };
                    s.metrics.get(key).map(|m| m.value)
                })
                .collect()
        };
        let (Some(av), Some(bv)) = (column(true), column(false)) else {
            out.not_compared.push(key.clone());
            continue;
        };
        // Every kept sample holds the key, so the first round's A sample does.
        let Some(m0) = kept.first().and_then(|(a, _)| a.metrics.get(key)) else {
            continue;
        };
        out.units.insert(key.clone(), m0.unit.clone());
        if m0.class == MetricClass::Exact {
            match exact_difference(&av, &bv) {
                Some(diff) => {
                    let unit = m0.unit.clone();
                    out.exact_differences
                        .insert(key.clone(), AbExact { unit, diff });
                }
                None => out.exact_same.push(key.clone()),
            }
            continue;
        }
        let failed = |source| RoundsError::Metric {
            key: key.clone(),
            source,
        };
        // Cost keys barely vary between runs: a t interval on the log ratios gives them a
        // verdict at R = 3 or 4, against their own, tighter threshold.
        let seed = opts.order_seed;
        let analysis = if m0.class == MetricClass::Cost {
            analyse_cost_metric(&av, &bv, orders, better(m0.better), opts.cost_tau, seed)
        } else if let Some(series) = kept
            .iter()
            .map(|(a, _)| a.paired.as_ref().and_then(|p| p.pairs.get(key)))
            .collect::<Option<Vec<&PairSeries>>>()
        {
            let tau = opts.tau_for(key);
            let (m, d) =
                analyse_paired_metric(&av, &bv, orders, &series, better(m0.better), tau, seed)
                    .map_err(failed)?;
            out.paired_keys.insert(
                key.clone(),
                PairedKey {
                    slice: d.slice,
                    pairs: d.pairs,
                    block_len: d.block_len,
                    blocks: d.blocks,
                    rho: d.widening.map(|w| w.rho),
                    tau2: d.widening.map(|w| w.tau2),
                    widening: d.widening.map(|w| w.factor),
                    rounds: series.into_iter().cloned().collect(),
                },
            );
            Ok(m)
        } else {
            analyse_metric(&av, &bv, orders, better(m0.better), opts.tau_for(key), seed)
        }
        .map_err(failed)?;
        out.metrics.insert(key.clone(), analysis);
    }
    adjust_across_metrics(&mut out.metrics);
    if !opts.rules.is_empty() {
        out.decision = Some(decide(opts.rules, &out.metrics)?);
    }
    out.functions = function_changes(
        &kept.iter().map(|(a, _)| &a.profiles).collect::<Vec<_>>(),
        &kept.iter().map(|(_, b)| &b.profiles).collect::<Vec<_>>(),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::ab::Verdict;
    use contract::schema::{Better as MetricBetter, Metric};

    /// A sample holding `metrics`.
    fn sample(index: u32, metrics: &[(&str, Metric)]) -> SampleResult {
        let mut s = SampleResult::started("s".into(), index, false, (1, 2), "d".into());
        s.metrics = metrics
            .iter()
            .map(|(k, m)| ((*k).to_owned(), m.clone()))
            .collect();
        s
    }

    /// Six balanced rounds: B's `t` is 20 % slower with a little noise, B's `e` differs by
    /// one, `c` is cost-classed and unchanged, `only_a` is missing from B's samples.
    fn rounds() -> (Vec<(SampleResult, SampleResult)>, Vec<Order>) {
        let orders = super::super::plan::plan_orders(6, 7).unwrap();
        let kept = (0..6u32)
            .map(|i| {
                let wiggle = 1.0 + f64::from(i % 3) * 0.01;
                let t = |v: f64| Metric::timing(v * wiggle, "ms", MetricBetter::Lower);
                let a = sample(
                    2 * i,
                    &[
                        ("t", t(10.0)),
                        ("e", Metric::exact(3.0, "count")),
                        ("c", Metric::cost(1e9, "instructions")),
                        ("only_a", t(1.0)),
                    ],
                );
                let b = sample(
                    2 * i + 1,
                    &[
                        ("t", t(12.0)),
                        ("e", Metric::exact(4.0, "count")),
                        ("c", Metric::cost(1e9, "instructions")),
                    ],
                );
                (a, b)
            })
            .collect();
        (kept, orders)
    }

    fn analyse(rules: &DecisionRules, tau: Option<f64>) -> RoundsAnalysis {
        let (kept, orders) = rounds();
        let kept: Vec<(&SampleResult, &SampleResult)> = kept.iter().map(|(a, b)| (a, b)).collect();
        let opts = RoundsOpts {
            tau,
            stored_tau: None,
            paired: false,
            cost_tau: 0.01,
            order_seed: 7,
            rules,
        };
        analyse_rounds(&kept, &orders, &opts).unwrap()
    }

    #[test]
    fn every_key_is_analysed_by_its_class_and_the_rule_decides() {
        let rules = DecisionRules::parse(None, &["all <= +3%"]).unwrap();
        let r = analyse(&rules, None);
        assert_eq!(
            r.metrics["t"].verdict,
            Verdict::Worse,
            "{:?}",
            r.metrics["t"]
        );
        assert_eq!(r.metrics["c"].verdict, Verdict::NoChange);
        assert_eq!(r.exact_differences["e"].unit, "count");
        assert!(r.exact_same.is_empty());
        assert_eq!(r.not_compared, vec!["only_a".to_owned()]);
        assert_eq!((r.tau, r.tau_source), (DEFAULT_TAU, "default"));
        assert!(r.paired_keys.is_empty());
        let d = r.decision.expect("a rule was given");
        assert_eq!(d.outcome, contract::ab::Outcome::Reject);
        // Without rules there is no decision; a flag's tau is the run's.
        let none = analyse(&DecisionRules::parse(None, &[]).unwrap(), Some(0.5));
        assert!(none.decision.is_none());
        assert_eq!((none.tau, none.tau_source), (0.5, "flag"));
        assert_eq!(none.metrics["t"].verdict, Verdict::NoChange);
    }

    #[test]
    fn a_stored_floor_sets_each_keys_threshold() {
        let floor = BTreeMap::from([("t".to_owned(), 0.5)]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let opts = RoundsOpts {
            tau: None,
            stored_tau: Some(&floor),
            paired: true,
            cost_tau: 0.01,
            order_seed: 7,
            rules: &rules,
        };
        assert_eq!(opts.tau_for("t"), 0.5);
        assert_eq!(opts.tau_for("other"), PAIRED_DEFAULT_TAU);
        assert_eq!(opts.tau_and_source(), (PAIRED_DEFAULT_TAU, "aa-reference"));
    }
}

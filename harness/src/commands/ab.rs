//! `vaultbench ab`: interleaved A/B rounds of two server builds, order balanced and shuffled
//! with a recorded seed, each sample a fresh subprocess with a fresh server, gated per sample;
//! then paired statistics per metric, exact differences as facts, and a decision rule.

use crate::sample::protocols::{self, Support};
use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;

use reports::ab::{self as abstat, BalancePlan, DecisionRules, Order, Outcome};
use reports::schema::{AbResult, AbRound, FORMAT_VERSION, KIND_AB, MetricClass, SampleResult};

use crate::gate::{gated_plan, gated_sample, judge};
use crate::prepare::{Prepared, RunOpts, load_scenario, prepare, progress};
use crate::recording::{harness_identity, now_rfc3339};
use crate::sample::runner::{SampleRunner, SubprocessRunner};
use crate::sample::target::TargetSpec;

/// Compare two server builds with interleaved, order-balanced rounds and paired statistics.
#[derive(Debug, clap::Args)]
pub struct AbArgs {
    #[command(flatten, next_help_heading = "Scenario")]
    pub scenario: crate::commands::ScenarioArg,
    #[arg(help_heading = "Target", long, help = crate::commands::target_help("Build A"))]
    pub a: String,
    /// Build B (the same forms as --a).
    #[arg(help_heading = "Target", long)]
    pub b: String,
    #[command(flatten)]
    pub common: RunOpts,
    /// Rounds (at least 2): each is one sample of A and one of B. Half run A first, half B
    /// first; an odd count runs one order once more (drawn from --order-seed), so an order
    /// effect is not cancelled for that one round (cost keys from Valgrind do not depend on
    /// order, which is what makes `--cost --rounds 3` sound).
    #[arg(help_heading = "A/B", long, default_value_t = 6)]
    pub rounds: usize,
    /// Seed of the order shuffle and the permutation draws.
    #[arg(help_heading = "A/B", long, value_name = "SEED", default_value = "0xab", value_parser = contract::parse::seed)]
    pub order_seed: u64,
    /// A/A mode: the same build in both arms, to measure false positives and the noise floor.
    #[arg(help_heading = "A/B", long)]
    pub aa: bool,
    /// Paired timing: each round starts a fresh A and a fresh B together and alternates the
    /// generator between them (request by request at 1 in flight, short slices at N, file by
    /// file in the cold push and pull, round by round in edit propagation), so host drift
    /// lands on both arms. Default threshold 1 % (or this machine's stored paired A/A noise
    /// floor). Each protocol pairs the phases its registry entry says; phases it does not run are
    /// named.
    #[arg(help_heading = "A/B", long)]
    pub paired: bool,
    /// Practical threshold, e.g. `3%` (default: this machine's stored A/A noise floor, else 5%).
    #[arg(help_heading = "A/B", long, value_name = "PERCENT", value_parser = contract::parse::percent)]
    pub tau: Option<f64>,
    /// Practical threshold of `cost` keys (instructions retired, from `--cost`).
    #[arg(help_heading = "A/B", long, value_name = "PERCENT", value_parser = contract::parse::percent, default_value = "1%")]
    pub cost_tau: f64,
    /// Keep rule, e.g. 'server.cpu_s <= -10%'.
    #[arg(help_heading = "A/B", long, value_name = "RULE")]
    pub keep_if: Option<String>,
    /// Guard rule(s), e.g. 'all <= +3%' (repeatable).
    #[arg(help_heading = "A/B", long, value_name = "RULE")]
    pub guard: Vec<String>,
    /// Retries of a sample the per-sample gate refused or that failed, after its first
    /// attempt; then its round is dropped. `0`: no retry.
    // Two (three attempts): on a quiet 2-CPU VM a kernel reading now and then runs at half
    // speed for a few seconds, long enough to refuse a sample and its first retry (2 of 60
    // rounds dropped in 10 A/A runs with two attempts).
    #[arg(help_heading = "Gate", long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// Write the A/B result document here (JSON).
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the A/B result as one JSON document on stdout.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

/// Where an A/A run stores this machine's per-metric noise floor for a scenario.
fn aa_tau_path(prep: &Prepared, paired: bool) -> Option<PathBuf> {
    let dir = calibration::reference::data_dir()?;
    Some(dir.join(format!(
        "aa-tau-{}{}-{}.json",
        if paired { "paired-" } else { "" },
        prep.scenario.name,
        prep.fingerprint.id()
    )))
}

pub fn run(args: AbArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let mut scenario = load_scenario(args.scenario.name(), args.common.scenario_file.as_deref())?;
    args.common.client_into(&mut scenario)?;
    args.common.validate()?;
    let opts = args.common.target_opts()?;
    // `git:REV` arms are checked now and built under the lock, before any sample.
    crate::prepare::git::check(&args.a, &args.common.git)?;
    crate::prepare::git::check(&args.b, &args.common.git)?;
    let early = [&args.a, &args.b]
        .iter()
        .any(|t| crate::prepare::git::rev_of(t).is_some());
    let early_lock = args.common.lock_now_if(early)?;
    let (mut spec_a, git_a) = args.common.resolve_target(&args.a, &opts)?;
    let (mut spec_b, git_b) = args.common.resolve_target(&args.b, &opts)?;
    crate::prepare::check_protocol(
        &scenario,
        args.common.protocol.as_ref(),
        &mut [("--a", &mut spec_a), ("--b", &mut spec_b)],
    )?;
    // Each arm's executable is checked before the lock (a `git:REV` arm's was just built).
    spec_a.executable()?;
    spec_b.executable()?;
    // A client-mode scenario is paired by its own client, whatever its protocol's flow.
    if args.paired
        && scenario.client.is_none()
        && let Support::No(why) = protocols::lookup(scenario.protocol.name())?.paired()
    {
        bail!(
            "--paired drives {} scenarios; {} speaks {}, which cannot: {why} (use a sequential ab)",
            protocols::those_that(|p| p.paired()),
            scenario.name,
            scenario.protocol
        );
    }
    if spec_a.def == spec_b.def && !args.aa {
        bail!(
            "--a and --b are the same command line {:?}: pass --aa for an A/A run",
            args.a
        );
    }
    let orders = abstat::plan_orders(args.rounds, args.order_seed)
        .map_err(|e| anyhow::anyhow!("--rounds {}: {e}", args.rounds))?;
    let guards: Vec<&str> = args.guard.iter().map(String::as_str).collect();
    let rules = DecisionRules::parse(args.keep_if.as_deref(), &guards)?;
    let (mut id_a, mut id_b) = (spec_a.identity()?, spec_b.identity()?);
    (id_a.git, id_b.git) = (git_a, git_b);
    crate::sample::target::print_identity("A", &id_a);
    crate::sample::target::print_identity("B", &id_b);
    let _lock = match early_lock {
        Some(l) => l,
        None => calibration::MachineLock::acquire(None, !args.common.no_wait)?,
    };
    let prep = prepare(scenario, &args.common)?;
    let runner = SubprocessRunner {
        work: prep.work.path().to_path_buf(),
        timeout: prep.timeout,
    };
    let arms = Arms {
        a: spec_a,
        b: spec_b,
        id_a,
        id_b,
    };
    compare(&args, &prep, &arms, &orders, &rules, &runner)
}

/// The two builds of an A/B run: their parsed command lines and identities.
pub struct Arms {
    pub a: TargetSpec,
    pub b: TargetSpec,
    pub id_a: reports::schema::TargetIdentity,
    pub id_b: reports::schema::TargetIdentity,
}

/// The A/B loop after preparation: a warm-up per build, the rounds in `orders` through
/// `runner` (each sample gated and retried), drop-to-balance, the paired statistics, the
/// decision; writes `--out` and returns the exit code.
pub fn compare(
    args: &AbArgs,
    prep: &Prepared,
    arms: &Arms,
    orders: &[Order],
    rules: &DecisionRules,
    runner: &dyn SampleRunner,
) -> anyhow::Result<i32> {
    let (spec_a, spec_b) = (&arms.a, &arms.b);
    let loadavg_before = calibration::loadavg();
    if let Err(r) = crate::gate::pre_check(prep)? {
        return Err(contract::exit::Refused(r.message("nothing written")).into());
    }

    // One discarded warm-up per build; it also gives the metric keys, so a rule naming an
    // unknown metric fails before the rounds are spent.
    let (warm_a, warm_b) = if args.paired {
        progress("warm-up: A and B, paired");
        let w = runner
            .run(&prep.paired_plan(spec_a, spec_b, 0, true, true))
            .context("paired warm-up sample")?;
        if !w.errors.is_empty() {
            bail!("paired warm-up sample: {}", w.errors.join("; "));
        }
        split_paired(w)?
    } else {
        progress("warm-up: A");
        let warm_a = runner
            .run(&prep.plan(spec_a, 0, true))
            .context("warm-up sample of A")?;
        progress("warm-up: B");
        let warm_b = runner
            .run(&prep.plan(spec_b, 1, true))
            .context("warm-up sample of B")?;
        (warm_a, warm_b)
    };
    if let Some(p) = warm_a
        .paired
        .as_ref()
        .filter(|p| !p.skipped_phases.is_empty())
    {
        eprintln!(
            "note: paired mode does not run {} of {}",
            p.skipped_phases.join(", "),
            prep.scenario.name
        );
    }
    let mut timing_keys: Vec<String> = warm_a
        .metrics
        .iter()
        .filter(|(_, m)| m.class != MetricClass::Exact)
        .map(|(k, _)| k.clone())
        .collect();
    if prep.cost.is_some() {
        // The cost sample's keys follow from the warm-up's per-phase cost keys, so a rule
        // may name them without a cost warm-up.
        timing_keys.extend(cost_keys_of(warm_a.metrics.keys().map(String::as_str)));
    }
    rules.check_metrics(timing_keys.iter().map(String::as_str))?;

    // The per-sample gate judges each reading against the run's readings so far.
    let mut pool: Vec<_> = warm_a
        .calibration
        .iter()
        .chain(&warm_b.calibration)
        .copied()
        .collect();
    let mut rounds = Vec::with_capacity(orders.len());
    let mut results: Vec<Option<(SampleResult, SampleResult)>> = Vec::new();
    for (i, order) in orders.iter().enumerate() {
        let first_is_a = *order == Order::AFirst;
        let started = std::time::Instant::now();
        progress(&format!(
            "round {}/{} ({})",
            i + 1,
            orders.len(),
            if first_is_a { "A first" } else { "B first" }
        ));
        let mut arm = |is_a: bool| {
            let spec = if is_a { spec_a } else { spec_b };
            let index = 2 + 2 * i as u32 + u32::from(!is_a);
            gated_sample(prep, runner, spec, index, args.retries + 1, &mut pool)
        };
        let (ra, rb) = if args.paired {
            let plan = prep.paired_plan(spec_a, spec_b, 2 + 2 * i as u32, false, first_is_a);
            match gated_plan(prep, runner, &plan, args.retries + 1, &mut pool) {
                Ok((s, meta)) => {
                    let meta_b = reports::schema::AbSample {
                        server_pid: s.paired.as_ref().map_or(0, |p| p.b_server_pid),
                        ..meta.clone()
                    };
                    match split_paired(s) {
                        Ok((sa, sb)) => (Ok((sa, meta)), Ok((sb, meta_b))),
                        Err(e) => (Err(e), Err(anyhow::anyhow!("the paired sample failed"))),
                    }
                }
                Err(e) => {
                    let again = anyhow::anyhow!("the paired sample failed");
                    let again = if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() {
                        crate::interrupt::Interrupted.into()
                    } else {
                        again
                    };
                    (Err(e), Err(again))
                }
            }
        } else {
            let (first, second) = (arm(first_is_a), arm(!first_is_a));
            if first_is_a {
                (first, second)
            } else {
                (second, first)
            }
        };
        let interrupted = |r: &Result<_, anyhow::Error>| {
            r.as_ref()
                .err()
                .is_some_and(|e| e.downcast_ref::<crate::interrupt::Interrupted>().is_some())
        };
        if interrupted(&ra) || interrupted(&rb) {
            return Err(crate::interrupt::Interrupted.into());
        }
        let (ra, rb) = if prep.cost.is_some() {
            with_cost(prep, runner, arms, i, first_is_a, ra, rb)?
        } else {
            (ra, rb)
        };
        let mut round = AbRound {
            index: i,
            order: *order,
            a: None,
            b: None,
            failure: None,
        };
        match (ra, rb) {
            (Ok((sa, ma)), Ok((sb, mb))) => {
                round.a = Some(ma);
                round.b = Some(mb);
                results.push(Some((sa, sb)));
                progress(&format!(
                    "round {}/{}: ok, {:.1} s",
                    i + 1,
                    orders.len(),
                    started.elapsed().as_secs_f64()
                ));
            }
            (ra, rb) => {
                let why: Vec<String> = [("A", ra.err()), ("B", rb.err())]
                    .into_iter()
                    .filter_map(|(w, e)| e.map(|e| format!("{w}: {e:#}")))
                    .collect();
                round.failure = Some(why.join("; "));
                eprintln!("round {} dropped: {}", i + 1, why.join("; "));
                results.push(None);
            }
        }
        rounds.push(round);
    }
    let loadavg_after = calibration::loadavg();
    let ok: Vec<bool> = results.iter().map(Option::is_some).collect();
    let balance = abstat::drop_to_balance(orders, &ok)?;
    for d in &balance.dropped {
        eprintln!(
            "round {} left out ({:?}, {:?})",
            d.round + 1,
            d.order,
            d.reason
        );
    }
    if balance.kept.len() < 2 {
        return Err(contract::exit::Refused(
            "fewer than 2 balanced rounds survived; nothing to compare".to_owned(),
        )
        .into());
    }
    let kept: Vec<&(SampleResult, SampleResult)> = balance
        .kept
        .iter()
        .filter_map(|&i| results[i].as_ref())
        .collect();
    let kept_orders: Vec<Order> = balance.kept.iter().map(|&i| orders[i]).collect();

    let stored_tau = aa_tau_path(prep, args.paired)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| contract::noise::NoiseFloor::from_json(&b).ok())
        .map(|f| f.tau);
    let kept: Vec<(&SampleResult, &SampleResult)> = kept.iter().map(|(a, b)| (a, b)).collect();
    let analysis = abstat::analyse_rounds(
        &kept,
        &kept_orders,
        &abstat::RoundsOpts {
            tau: args.tau,
            stored_tau: stored_tau.as_ref(),
            paired: args.paired,
            cost_tau: args.cost_tau,
            order_seed: args.order_seed,
            rules,
        },
    )?;
    for key in &analysis.not_compared {
        eprintln!("note: {key} is not in every kept sample of both builds and is not compared");
    }
    let all_samples: Vec<&SampleResult> = kept.iter().flat_map(|&(a, b)| [a, b]).collect();
    let gate = judge(prep, &all_samples);

    if args.aa {
        // An A/A run measures this machine's noise floor: store it as the default tau.
        let floor = abstat::tau_from_aa(std::slice::from_ref(&analysis.metrics));
        if let Some(p) = aa_tau_path(prep, args.paired) {
            let doc = contract::noise::NoiseFloor::new(
                &prep.scenario.name,
                &prep.fingerprint.id(),
                floor,
            );
            crate::atomic::write_atomic(&p, &doc.to_json())?;
            eprintln!(
                "stored this machine's A/A noise floor for {} in {}",
                prep.scenario.name,
                p.display()
            );
        }
    }

    let result = AbResult {
        kind: KIND_AB.into(),
        format_version: FORMAT_VERSION,
        scenario: prep.scenario.name.clone(),
        profile: prep.profile_name(),
        seed: prep.seed,
        vault_digest: prep.vault_digest.clone(),
        order_seed: args.order_seed,
        aa: args.aa,
        recorded_at: now_rfc3339(),
        harness: harness_identity(),
        machine: prep.fingerprint.clone(),
        loadavg_before,
        loadavg_after,
        a: arms.id_a.clone(),
        b: arms.id_b.clone(),
        rounds_planned: orders.len(),
        rounds,
        balance: balance.clone(),
        order_counts: Some(abstat::order_counts(orders, &balance.kept)),
        tau: analysis.tau,
        tau_source: analysis.tau_source.into(),
        gate: Some(contract::gate::Gate {
            config: Some(prep.gate_cfg),
            verdict: Some(gate),
        }),
        rules: args.keep_if.iter().chain(&args.guard).cloned().collect(),
        paired: args.paired.then(|| {
            analysis.paired_run(
                warm_a
                    .paired
                    .as_ref()
                    .map(|p| p.skipped_phases.clone())
                    .unwrap_or_default(),
            )
        }),
        user_vault: prep.user_vault.clone(),
        units: analysis.units,
        metrics: analysis.metrics,
        exact_differences: analysis.exact_differences,
        exact_same: analysis.exact_same,
        decision: analysis.decision,
        functions: analysis.functions,
    };
    eprint!("{}", table(&result, &balance));
    if let Some(out) = &args.out {
        crate::atomic::write_atomic(out, &serde_json::to_vec_pretty(&result)?)?;
        eprintln!("wrote {}", out.display());
    }
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    }
    Ok(match result.decision.as_ref().map(|d| d.outcome) {
        None | Some(Outcome::Keep) => crate::exit::OK,
        Some(Outcome::Reject) => crate::exit::REGRESSION,
        Some(Outcome::Inconclusive) => crate::exit::INCONCLUSIVE,
    })
}

/// A paired sample as the two samples of a round: A's keys as they are, B's from the paired
/// part (the pairs stay with A's).
pub fn split_paired(s: SampleResult) -> anyhow::Result<(SampleResult, SampleResult)> {
    let Some(p) = s.paired.as_ref() else {
        bail!("the paired sample returned no second arm");
    };
    let b = SampleResult {
        server_pid: p.b_server_pid,
        metrics: p.b_metrics.clone(),
        histograms: BTreeMap::new(),
        paired: None,
        profiles: BTreeMap::new(),
        blocked: BTreeMap::new(),
        ..s.clone()
    };
    Ok((s, b))
}

/// The cost keys a `--cost` sample gives for the per-phase cost keys of a timing sample:
/// `P.server.instructions` and `P.server.instructions_per_request` (or `_per_file`) for every
/// `P.server.cpu_us_per_request` (or `_per_file`).
pub fn cost_keys_of<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for k in keys {
        for per in ["request", "file"] {
            if let Some(p) = k.strip_suffix(&format!(".server.cpu_us_per_{per}")) {
                out.push(format!("{p}.server.instructions"));
                out.push(format!("{p}.server.instructions_per_{per}"));
            }
        }
    }
    out
}

type Arm = anyhow::Result<(SampleResult, reports::schema::AbSample)>;

/// A round's cost samples, in the round's order, after both timing samples succeeded; their
/// cost keys join each arm's sample. A failed cost sample fails its arm (the round is dropped).
fn with_cost(
    prep: &Prepared,
    runner: &dyn SampleRunner,
    arms: &Arms,
    round: usize,
    first_is_a: bool,
    ra: Arm,
    rb: Arm,
) -> anyhow::Result<(Arm, Arm)> {
    let (Ok(mut a), Ok(mut b)) = (ra, rb) else {
        return Ok((
            Err(anyhow::anyhow!("no cost sample: a timing sample failed")),
            Err(anyhow::anyhow!("no cost sample: a timing sample failed")),
        ));
    };
    let mut failed: Option<anyhow::Error> = None;
    for is_a in [first_is_a, !first_is_a] {
        let (spec, sample) = if is_a {
            (&arms.a, &mut a.0)
        } else {
            (&arms.b, &mut b.0)
        };
        let index = 1000 + 2 * round as u32 + u32::from(!is_a);
        match runner.run(&prep.cost_plan(spec, index)) {
            Ok(c) => {
                sample.profiles = c.profiles;
                sample.blocked = c.blocked;
                for (k, m) in c.metrics {
                    if crate::recording::is_cost_key(&k, m.class) {
                        sample.metrics.insert(k, m);
                    }
                }
            }
            Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => return Err(e),
            Err(e) => {
                failed =
                    Some(e.context(format!("cost sample of {}", if is_a { "A" } else { "B" })));
                break;
            }
        }
    }
    Ok(match failed {
        Some(e) => {
            let msg = format!("{e:#}");
            (Err(e), Err(anyhow::anyhow!(msg)))
        }
        None => (Ok(a), Ok(b)),
    })
}

fn fmt_pct(x: Option<f64>) -> String {
    x.map(|v| format!("{v:+.1}%"))
        .unwrap_or_else(|| "n/a".into())
}

/// The terminal table: metric, A median, B median, change with interval, verdict.
pub fn table(r: &AbResult, balance: &BalancePlan) -> String {
    let orders: Vec<Order> = r.rounds.iter().map(|x| x.order).collect();
    let counts = abstat::order_counts(&orders, &balance.kept);
    let mut s = format!(
        "\n{} {}: {} vs {} — {} of {} rounds kept ({}), tau {:.1}% ({})\n",
        r.scenario,
        if r.aa { "A/A" } else { "A/B" },
        r.a.command,
        r.b.command,
        balance.kept.len(),
        r.rounds_planned,
        counts.kept,
        r.tau * 100.0,
        r.tau_source
    );
    let w = r
        .metrics
        .keys()
        .chain(r.exact_differences.keys())
        .map(|k| k.len())
        .max()
        .unwrap_or(10)
        .min(56);
    s.push_str(&format!(
        "  {:<w$}  {:>12}  {:>12}  {:>28}  verdict\n",
        "metric", "A median", "B median", "change [95% CI]"
    ));
    // What changed first (better or worse), then the keys not called either way.
    let decided = |m: &reports::ab::MetricAnalysis| {
        matches!(
            m.verdict,
            reports::ab::Verdict::Better | reports::ab::Verdict::Worse
        )
    };
    let ordered = r
        .metrics
        .iter()
        .filter(|(_, m)| decided(m))
        .chain(r.metrics.iter().filter(|(_, m)| !decided(m)));
    let n_decided = r.metrics.values().filter(|m| decided(m)).count();
    if n_decided == 0 {
        s.push_str("  (no key called better or worse)\n");
    }
    for (i, (k, m)) in ordered.enumerate() {
        if i == n_decided && n_decided > 0 {
            s.push_str("  -- not called better or worse --\n");
        }
        let ci = m
            .ci_pct
            .map(|c| format!("[{:+.1}%, {:+.1}%]", c.lo, c.hi))
            .unwrap_or_else(|| "[n/a]".into());
        s.push_str(&format!(
            "  {k:<w$}  {:>12}  {:>12}  {:>28}  {:?}\n",
            crate::commands::record::fmt_value(m.a_median),
            crate::commands::record::fmt_value(m.b_median),
            format!("{} {ci}", fmt_pct(m.estimate_pct)),
            m.verdict
        ));
    }
    if !r.exact_differences.is_empty() {
        s.push_str("exact differences (facts, not statistics):\n");
        for (k, e) in &r.exact_differences {
            s.push_str(&format!(
                "  {k:<w$}  {} -> {} {}\n",
                crate::commands::record::fmt_value(e.diff.a),
                crate::commands::record::fmt_value(e.diff.b),
                e.unit
            ));
        }
    }
    if !r.functions.is_empty() {
        s.push_str("functions that changed most (self instructions, medians over rounds):\n");
        for (part, p) in &r.functions {
            let per = if p.per.is_empty() {
                String::new()
            } else {
                format!("/{}", p.per)
            };
            for f in p.functions.iter().take(3) {
                s.push_str(&format!(
                    "  {part:<w$}  {:+.0}{per} {}{}\n",
                    f.delta,
                    f.name,
                    f.share_of_change
                        .map(|x| format!(" ({:.0}% of the change)", x * 100.0))
                        .unwrap_or_default()
                ));
            }
        }
    }
    if let Some(d) = &r.decision {
        s.push_str(&format!("decision: {:?} — {}\n", d.outcome, d.reason));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::runner::mock::{MockRunner, Step, noisy, ok, prepared};
    use clap::Parser;
    use reports::ab::DropReason;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        ab: AbArgs,
    }

    fn args(extra: &[&str], out: &std::path::Path) -> AbArgs {
        let mut v = vec!["ab", "--a", "ref", "--b", "ref --x", "--scenario", "small"];
        v.extend_from_slice(&["--tau", "5%", "--out", out.to_str().unwrap()]);
        v.extend_from_slice(extra);
        Cmd::parse_from(v).ab
    }

    fn arms() -> Arms {
        let id = |c: &str| reports::schema::TargetIdentity {
            command: c.into(),
            executable: "vaultbench".into(),
            sha256: "00".into(),
            version: "0".into(),
            inputs: Default::default(),
            note: None,
            git: None,
        };
        Arms {
            a: TargetSpec::parse("ref").unwrap(),
            b: TargetSpec::parse("ref --x").unwrap(),
            id_a: id("ref"),
            id_b: id("ref --x"),
        }
    }

    fn sample(t: f64, n: f64) -> Step {
        Step::Sample { t, n, cpu: 1.0 }
    }

    fn read(out: &std::path::Path) -> AbResult {
        serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
    }

    fn calls(r: &MockRunner) -> Vec<(u32, bool, String)> {
        r.calls.borrow().clone()
    }

    use Order::{AFirst, BFirst};

    #[test]
    fn a_failed_or_refused_sample_is_retried_and_the_retry_is_recorded() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let runner = MockRunner::new([
            ok(1.0),
            ok(1.0),
            // round 0, A first: A fails once, then succeeds; B at once
            Step::Fail("connection reset"),
            ok(10.0),
            ok(20.0),
            // round 1, B first: B refused by the gate once; A at once
            noisy(22.0),
            ok(22.0),
            ok(12.0),
        ]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let code = compare(
            &args(&[], &out),
            &prep,
            &arms(),
            &[AFirst, BFirst],
            &rules,
            &runner,
        )
        .unwrap();
        assert_eq!(code, crate::exit::OK);
        assert_eq!(runner.left(), 0);
        let (a, b) = ("ref".to_owned(), "ref --x".to_owned());
        assert_eq!(
            calls(&runner),
            vec![
                (0, true, a.clone()),
                (1, true, b.clone()),
                (2, false, a.clone()),
                (2, false, a.clone()),
                (3, false, b.clone()),
                (5, false, b.clone()),
                (5, false, b.clone()),
                (4, false, a.clone()),
            ]
        );
        let r = read(&out);
        let r0a = r.rounds[0].a.as_ref().unwrap();
        assert_eq!(r0a.attempts, 2);
        assert_eq!(r0a.retried_because, vec!["connection reset".to_owned()]);
        assert_eq!(r.rounds[0].b.as_ref().unwrap().attempts, 1);
        let r1b = r.rounds[1].b.as_ref().unwrap();
        assert_eq!(r1b.attempts, 2);
        assert_eq!(
            r1b.retried_because,
            vec![
                "refused by the gate: cpu_ms has a reading that is not a positive number"
                    .to_owned()
            ]
        );
        assert_eq!(r.balance.kept, vec![0, 1]);
        assert!(r.balance.dropped.is_empty());
        assert_eq!(r.metrics["t.ms"].a_median, 11.0);
        assert_eq!(r.metrics["t.ms"].b_median, 21.0);
        assert_eq!(r.exact_same, vec!["n.count".to_owned()]);
    }

    #[test]
    fn a_failed_round_is_dropped_and_the_latest_majority_round_goes_to_balance() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let runner = MockRunner::new([
            ok(1.0),
            ok(1.0),
            sample(10.0, 3.0),       // round 0 A
            sample(20.0, 4.0),       // round 0 B
            Step::Fail("B crashed"), // round 1 B (B first), no retry
            sample(11.0, 3.0),       // round 1 A still runs
            sample(99.0, 3.0),       // round 2 A: dropped to balance
            sample(99.0, 4.0),       // round 2 B
            sample(14.0, 4.0),       // round 3 B
            sample(12.0, 3.0),       // round 3 A
        ]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let orders = [AFirst, BFirst, AFirst, BFirst];
        let code = compare(
            &args(&["--retries", "0"], &out),
            &prep,
            &arms(),
            &orders,
            &rules,
            &runner,
        )
        .unwrap();
        assert_eq!(code, crate::exit::OK);
        assert_eq!(runner.left(), 0);
        let r = read(&out);
        assert_eq!(r.balance.kept, vec![0, 3]);
        let dropped: Vec<(usize, Order, DropReason)> = r
            .balance
            .dropped
            .iter()
            .map(|x| (x.round, x.order, x.reason))
            .collect();
        assert_eq!(
            dropped,
            vec![
                (1, BFirst, DropReason::Failed),
                (2, AFirst, DropReason::Balance)
            ]
        );
        assert_eq!(
            r.rounds[1].failure.as_deref(),
            Some("B: 1 attempts: B crashed")
        );
        assert!(r.rounds[1].b.is_none());
        // Medians over the kept rounds only: the 99s of round 2 are left out.
        assert_eq!(r.metrics["t.ms"].a_median, 11.0);
        assert_eq!(r.metrics["t.ms"].b_median, 17.0);
        let diff = &r.exact_differences["n.count"].diff;
        assert_eq!((diff.a, diff.b), (3.0, 4.0));
    }

    #[test]
    fn three_rounds_run_the_seeded_odd_plan_and_keep_its_extra_round() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let a = args(&["--rounds", "3"], &out);
        let orders = abstat::plan_orders(a.rounds, a.order_seed).unwrap();
        // The default --order-seed 0xab plans A-first, B-first, A-first (golden in plan.rs).
        assert_eq!(orders, vec![AFirst, BFirst, AFirst]);
        let runner = MockRunner::new([
            ok(1.0),
            ok(1.0),
            sample(10.0, 3.0), // round 0 A
            sample(20.0, 4.0), // round 0 B
            sample(21.0, 4.0), // round 1 B
            sample(11.0, 3.0), // round 1 A
            sample(12.0, 3.0), // round 2 A
            sample(22.0, 4.0), // round 2 B
        ]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let code = compare(&a, &prep, &arms(), &orders, &rules, &runner).unwrap();
        assert_eq!(code, crate::exit::OK);
        assert_eq!(runner.left(), 0);
        let r = read(&out);
        assert_eq!(r.rounds_planned, 3);
        // The planned imbalance of one is kept: no round is dropped to balance.
        assert_eq!(r.balance.kept, vec![0, 1, 2]);
        assert!(r.balance.dropped.is_empty());
        let counts = r.order_counts.expect("order counts are written");
        assert_eq!(counts.planned.to_string(), "2 A-first, 1 B-first");
        assert_eq!(counts.kept.to_string(), "2 A-first, 1 B-first");
        assert_eq!(r.metrics["t.ms"].a_median, 11.0);
        assert_eq!(r.metrics["t.ms"].b_median, 21.0);
        assert_eq!(r.metrics["t.ms"].a.len(), 3);
        let diff = &r.exact_differences["n.count"].diff;
        assert_eq!((diff.a, diff.b), (3.0, 4.0));
        assert!(
            table(&r, &r.balance).contains("3 of 3 rounds kept (2 A-first, 1 B-first)"),
            "{}",
            table(&r, &r.balance)
        );
    }

    #[test]
    fn a_failed_extra_order_round_of_an_odd_plan_drops_one_of_the_majority() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let runner = MockRunner::new([
            ok(1.0),
            ok(1.0),
            sample(10.0, 3.0),       // round 0 A
            sample(20.0, 4.0),       // round 0 B
            Step::Fail("B crashed"), // round 1 B (B first), no retry
            sample(11.0, 3.0),       // round 1 A still runs
            sample(12.0, 3.0),       // round 2 A
            sample(22.0, 4.0),       // round 2 B
            sample(13.0, 3.0),       // round 3 A: dropped to balance
            sample(23.0, 4.0),       // round 3 B
            sample(24.0, 4.0),       // round 4 B
            sample(14.0, 3.0),       // round 4 A
        ]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        // 3 A-first, 2 B-first; round 1 (B-first) fails: 3 and 1 left, so the latest A-first
        // round (3) is dropped and 2 A-first, 1 B-first are kept.
        let orders = [AFirst, BFirst, AFirst, AFirst, BFirst];
        compare(
            &args(&["--retries", "0", "--rounds", "5"], &out),
            &prep,
            &arms(),
            &orders,
            &rules,
            &runner,
        )
        .unwrap();
        assert_eq!(runner.left(), 0);
        let r = read(&out);
        assert_eq!(r.balance.kept, vec![0, 2, 4]);
        let dropped: Vec<(usize, DropReason)> = r
            .balance
            .dropped
            .iter()
            .map(|x| (x.round, x.reason))
            .collect();
        assert_eq!(
            dropped,
            vec![(1, DropReason::Failed), (3, DropReason::Balance)]
        );
        let counts = r.order_counts.unwrap();
        assert_eq!(counts.planned.to_string(), "3 A-first, 2 B-first");
        assert_eq!(counts.kept.to_string(), "2 A-first, 1 B-first");
    }

    #[test]
    fn fewer_than_two_balanced_rounds_refuse_and_write_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let runner = MockRunner::new([ok(1.0), ok(1.0), ok(10.0), noisy(20.0), ok(21.0), ok(11.0)]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let err = compare(
            &args(&["--retries", "0"], &out),
            &prep,
            &arms(),
            &[AFirst, BFirst],
            &rules,
            &runner,
        )
        .unwrap_err();
        // A refusal leaves by one path: the `Refused` error, which the binary maps to exit 3.
        assert!(
            err.downcast_ref::<contract::exit::Refused>().is_some(),
            "{err:#}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn an_interrupt_in_a_round_stops_and_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ab.json");
        let prep = prepared();
        let runner = MockRunner::new([ok(1.0), ok(1.0), Step::Interrupt, ok(2.0), ok(3.0)]);
        let rules = DecisionRules::parse(None, &[]).unwrap();
        let e = compare(
            &args(&[], &out),
            &prep,
            &arms(),
            &[AFirst, BFirst],
            &rules,
            &runner,
        )
        .expect_err("interrupted");
        assert!(e.downcast_ref::<crate::interrupt::Interrupted>().is_some());
        assert!(!out.exists());
    }
}

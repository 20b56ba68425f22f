//! `vaultbench bisect`: the first commit on a first-parent path at which a key got worse by
//! more than τ. Every candidate is built (cached) and compared with its last known good
//! neighbour in rounds, until the answer is *different*, *same*, or, at the round cap,
//! *unknown* (Chromium Pinpoint's three-valued comparison); a commit that does not build is
//! skipped and named, like `git bisect skip`. Measurements are journalled under the cache as
//! they finish, so an interrupted search resumes from them.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use contract::bisect::{
    Answer, BisectCommit, BisectOutcome, BisectResult, BisectStep, BuildCount, CommitRef,
    CommitVerdict, KIND_BISECT,
};
use reports::ab::{self as abstat, Order};
use reports::bisect::{self, Probe};
use reports::schema::{Better, FORMAT_VERSION, SampleResult};
use sha2::{Digest, Sha256};

use crate::prepare::git::{self, Cache, Outcome, Repo, short};
use crate::prepare::{Prepared, RunOpts, load_scenario, prepare, progress};
use crate::recording::{harness_identity, now_rfc3339};
use crate::sample::runner::{SampleRunner, SubprocessRunner};
use crate::sample::target::TargetSpec;

/// Find the commit that made a key worse: builds (cached) and compares commits between
/// `--good` and `--bad` with repeated rounds, skipping commits that do not build.
#[derive(Debug, clap::Args)]
// `--cost` is hidden here: the key's class decides (a cost key runs cost samples, a timing
// key timing samples), so the flag would do nothing.
#[command(mut_arg("cost", |a| a.hide(true)))]
pub struct BisectArgs {
    #[command(flatten, next_help_heading = "Scenario")]
    pub scenario: crate::commands::ScenarioArg,
    /// The last revision known good (any git revision).
    #[arg(help_heading = "Git builds", long, value_name = "REV")]
    pub good: String,
    /// The revision known bad: the path searched is `--good..--bad` by first parents.
    #[arg(help_heading = "Git builds", long, value_name = "REV")]
    pub bad: String,
    /// The key that got worse, e.g. `route.post-version.c1.server.instructions_per_request`.
    /// A cost key (instructions, syscalls) is measured with cost samples (as `--cost`); a
    /// timing key with paired samples where the scenario's protocol has a paired flow.
    #[arg(help_heading = "A/B", long, value_name = "KEY")]
    pub key: String,
    #[command(flatten)]
    pub common: RunOpts,
    /// Practical threshold of a timing key, e.g. `3%` (default 1 % paired, else 5 %).
    #[arg(help_heading = "A/B", long, value_name = "PERCENT", value_parser = contract::parse::percent)]
    pub tau: Option<f64>,
    /// Practical threshold of a cost key.
    #[arg(help_heading = "A/B", long, value_name = "PERCENT", value_parser = contract::parse::percent, default_value = "1%")]
    pub cost_tau: f64,
    /// Rounds every comparison starts with (at least 2: an interval needs two).
    #[arg(help_heading = "A/B", long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub rounds: u32,
    /// Most rounds one comparison may take before its answer is `unknown`.
    #[arg(help_heading = "A/B", long, value_name = "N", default_value_t = 9, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub max_rounds: u32,
    /// Seed of the sample order within rounds and of the permutation draws.
    #[arg(help_heading = "A/B", long, value_name = "SEED", default_value = "0xb15ec7", value_parser = contract::parse::seed)]
    pub order_seed: u64,
    /// Retries of a timing sample the per-sample gate refused or that failed, after its
    /// first attempt; then it counts as failed (cost samples are not gated). `0`: no retry.
    #[arg(help_heading = "Gate", long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// Write the result document here (JSON), with a Markdown (`.md`) and an HTML (`.html`)
    /// report beside it.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the result as one JSON document on stdout.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

/// How a key is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Cost samples (callgrind, strace): one value per commit and sample.
    Cost,
    /// Paired timing samples: both commits up at once, alternated.
    Paired,
    /// Timing samples one build after the other.
    Sequential,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Cost => "cost",
            Mode::Paired => "paired",
            Mode::Sequential => "sequential",
        }
    }
}

/// Whether a key comes from the cost sample (instructions from callgrind, syscalls from
/// strace).
pub fn is_cost_key(key: &str) -> bool {
    key.ends_with(".server.instructions")
        || key.contains(".server.instructions_per_")
        || crate::recording::is_cost_key(key, reports::schema::MetricClass::Timing)
}

/// The journal of finished measurements: values per commit (cost), pairs per compared
/// couple (timing), written after each one.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Journal {
    kind: String,
    values: BTreeMap<String, Vec<f64>>,
    pairs: BTreeMap<String, Vec<[f64; 2]>>,
    unit: Option<String>,
    better: Option<Better>,
}

const KIND_JOURNAL: &str = "vaultbench.bisect-journal";

/// A commit of the path with its build, once tried.
struct Slot {
    at: CommitRef,
    spec: Option<TargetSpec>,
    identity: Option<reports::schema::TargetIdentity>,
    built_now: bool,
    note: Option<String>,
}

/// Everything a measurement needs.
struct Bench<'a> {
    prep: &'a Prepared,
    runner: &'a dyn SampleRunner,
    args: &'a BisectArgs,
    mode: Mode,
    journal: Journal,
    journal_path: PathBuf,
    pool: Vec<reports::schema::ChannelReading>,
    next_index: u32,
    orders: Vec<Order>,
    steps: Vec<BisectStep>,
}

impl Bench<'_> {
    fn save(&self) -> anyhow::Result<()> {
        crate::atomic::write_atomic(&self.journal_path, &serde_json::to_vec(&self.journal)?)
    }

    fn key_of(&mut self, s: &SampleResult, what: &str) -> anyhow::Result<f64> {
        let key = &self.args.key;
        let Some(m) = s.metrics.get(key) else {
            let near: Vec<&str> = s
                .metrics
                .keys()
                .filter(|k| {
                    k.split('.').next() == key.split('.').next()
                        || k.ends_with(key.rsplit('.').next().unwrap_or(""))
                })
                .take(5)
                .map(String::as_str)
                .collect();
            bail!(
                "--key {key}: the {what} sample has no such key (e.g. {})",
                near.join(", ")
            );
        };
        self.journal.unit.get_or_insert_with(|| m.unit.clone());
        self.journal.better.get_or_insert(m.better);
        Ok(m.value)
    }

    fn index(&mut self) -> u32 {
        self.next_index += 1;
        self.next_index
    }

    /// One more cost value of `slot`'s build.
    fn cost_value(&mut self, slot: &Slot) -> anyhow::Result<()> {
        let spec = slot
            .spec
            .as_ref()
            .context("measuring a commit that did not build")?;
        progress(&format!(
            "cost sample: {} {}",
            slot.at.index,
            short(&slot.at.commit)
        ));
        let idx = self.index();
        let s = self
            .runner
            .run(&self.prep.cost_plan(spec, idx))
            .with_context(|| format!("cost sample of {}", short(&slot.at.commit)))?;
        let v = self.key_of(&s, "cost")?;
        self.journal
            .values
            .entry(slot.at.commit.clone())
            .or_default()
            .push(v);
        self.save()
    }

    /// One more timing pair of (`lo`, `c`).
    fn timing_pair(&mut self, lo: &Slot, c: &Slot, round: usize) -> anyhow::Result<()> {
        let (a, b) = (
            lo.spec
                .as_ref()
                .context("measuring a commit that did not build")?,
            c.spec
                .as_ref()
                .context("measuring a commit that did not build")?,
        );
        let a_first = self.orders.get(round).is_none_or(|o| *o == Order::AFirst);
        let attempts = self.args.retries + 1;
        let idx = self.index();
        let (va, vb) = if self.mode == Mode::Paired {
            progress(&format!(
                "paired sample: {} against {}",
                c.at.index, lo.at.index
            ));
            let plan = self.prep.paired_plan(a, b, idx, false, a_first);
            let (s, _) =
                crate::gate::gated_plan(self.prep, self.runner, &plan, attempts, &mut self.pool)?;
            let (sa, sb) = crate::commands::ab::split_paired(s)?;
            (self.key_of(&sa, "paired")?, self.key_of(&sb, "paired")?)
        } else {
            progress(&format!("samples: {} against {}", c.at.index, lo.at.index));
            let one = |bench: &mut Self, spec: &TargetSpec| -> anyhow::Result<f64> {
                let i = bench.index();
                let (s, _) = crate::gate::gated_sample(
                    bench.prep,
                    bench.runner,
                    spec,
                    i,
                    attempts,
                    &mut bench.pool,
                )?;
                bench.key_of(&s, "timing")
            };
            if a_first {
                let va = one(self, a)?;
                (va, one(self, b)?)
            } else {
                let vb = one(self, b)?;
                (one(self, a)?, vb)
            }
        };
        self.journal
            .pairs
            .entry(pair_name(&lo.at.commit, &c.at.commit))
            .or_default()
            .push([va, vb]);
        self.save()
    }

    /// The values of (`lo`, `c`) at `r` rounds, measuring what is missing.
    fn values(&mut self, lo: &Slot, c: &Slot, r: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
        if self.mode == Mode::Cost {
            for round in 0..r {
                // The round's order decides which commit's sample runs first.
                let a_first = self.orders.get(round).is_none_or(|o| *o == Order::AFirst);
                let both = if a_first { [lo, c] } else { [c, lo] };
                for s in both {
                    if self.journal.values.get(&s.at.commit).map_or(0, Vec::len) <= round {
                        self.cost_value(s)?;
                    }
                }
            }
            let get = |s: &Slot| self.journal.values[&s.at.commit][..r].to_vec();
            Ok((get(lo), get(c)))
        } else {
            let name = pair_name(&lo.at.commit, &c.at.commit);
            while self.journal.pairs.get(&name).map_or(0, Vec::len) < r {
                let round = self.journal.pairs.get(&name).map_or(0, Vec::len);
                self.timing_pair(lo, c, round)?;
            }
            let p = &self.journal.pairs[&name][..r];
            Ok((
                p.iter().map(|x| x[0]).collect(),
                p.iter().map(|x| x[1]).collect(),
            ))
        }
    }

    /// Compares `c` with `lo` in rounds until the answer is different or same, or the cap.
    fn compare(&mut self, lo: &Slot, c: &Slot) -> anyhow::Result<BisectStep> {
        let mut r = self.args.rounds as usize;
        let cap = (self.args.max_rounds as usize).max(r);
        loop {
            let (a, b) = self.values(lo, c, r)?;
            let better = abstat::better(self.journal.better.unwrap_or(Better::Lower));
            let orders = abstat::plan_orders(r, self.args.order_seed)
                .map_err(|e| anyhow::anyhow!("--rounds {r}: {e}"))?;
            let m = if self.mode == Mode::Cost {
                abstat::analyse_cost_metric(
                    &a,
                    &b,
                    &orders,
                    better,
                    self.args.cost_tau,
                    self.args.order_seed,
                )
            } else {
                abstat::analyse_metric(&a, &b, &orders, better, self.tau(), self.args.order_seed)
            }
            .with_context(|| format!("analysing {}", self.args.key))?;
            let answer = bisect::answer(&m, r, cap);
            if let Some(answer) = answer {
                let step = BisectStep {
                    candidate: c.at.index,
                    against: lo.at.index,
                    answer,
                    rounds: r,
                    estimate_pct: m.estimate_pct,
                    ci_pct: m.ci_pct,
                    reason: m.reason.clone(),
                };
                progress(&format!(
                    "{} {} against {}: {} after {r} rounds ({})",
                    c.at.index,
                    short(&c.at.commit),
                    lo.at.index,
                    answer_word(answer),
                    m.reason
                ));
                self.steps.push(step.clone());
                return Ok(step);
            }
            r += 1;
        }
    }

    fn tau(&self) -> f64 {
        self.args
            .tau
            .unwrap_or(abstat::default_tau(self.mode == Mode::Paired))
    }
}

fn pair_name(a: &str, b: &str) -> String {
    format!("{a}..{b}")
}

fn answer_word(a: Answer) -> &'static str {
    match a {
        Answer::Different => "different",
        Answer::Same => "same",
        Answer::Unknown => "unknown",
    }
}

pub fn run(args: BisectArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let t0 = Instant::now();
    let mut scenario = load_scenario(args.scenario.name(), args.common.scenario_file.as_deref())?;
    args.common.client_into(&mut scenario)?;
    args.common.validate()?;
    if args.max_rounds < args.rounds {
        bail!(
            "--max-rounds {} is below --rounds {}",
            args.max_rounds,
            args.rounds
        );
    }
    let topts = args.common.target_opts()?;
    let repo = Repo::open(args.common.git.repo.as_deref())?;
    let run_line = match (&args.common.git.bin, &args.common.git.run) {
        (Some(b), _) => format!("--bin {b}"),
        (None, Some(r)) => format!("--run {r}"),
        (None, None) => bail!(
            "bisect needs --bin PATH (the built server, relative to the worktree) or --run CMD"
        ),
    };
    let good = repo.commit(&args.good)?;
    let bad = repo.commit(&args.bad)?;
    let path = repo.first_parent_path(&good.id, &bad.id)?;
    if path.is_empty() {
        bail!(
            "--good {} and --bad {} are the same commit: nothing to search",
            args.good,
            args.bad
        );
    }
    // Paired where the paired flow runs every phase: the protocol's, or in client mode the
    // scenario's own client's, which pairs every phase the client can run.
    let mode = if is_cost_key(&args.key) {
        Mode::Cost
    } else if scenario.client.is_some()
        || crate::sample::protocols::lookup(scenario.protocol.name())?.paired_covers_every_phase()
    {
        Mode::Paired
    } else {
        Mode::Sequential
    };
    let mut common = args.common.clone();
    common.cost = mode == Mode::Cost;
    let _lock = calibration::MachineLock::acquire(None, !common.no_wait)?;
    let prep = prepare(scenario, &common)?;
    let cache = Cache::new(&common.cache(), repo.clone(), common.git.build.as_deref());
    let mut h = Sha256::new();
    for part in [
        prep.scenario.name.as_str(),
        &format!("{:#x}", prep.seed),
        &prep.vault_digest,
        &args.key,
        mode.name(),
        &cache.build,
        &run_line,
        &good.id,
        &bad.id,
        &format!("{:#x}", args.order_seed),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    if let Some(f) = &common.scenario_file {
        h.update(std::fs::read(f).unwrap_or_default());
    }
    let journal_path = common
        .cache()
        .join("bisect")
        .join(format!("{}.json", &hex::encode(h.finalize())[..16]));
    let journal = match std::fs::read(&journal_path) {
        Ok(b) => serde_json::from_slice::<Journal>(&b).unwrap_or_default(),
        Err(_) => Journal::default(),
    };
    let resumed = journal.values.values().map(Vec::len).sum::<usize>()
        + journal.pairs.values().map(Vec::len).sum::<usize>();
    if resumed > 0 {
        progress(&format!(
            "resuming: {resumed} measurement(s) from {}",
            journal_path.display()
        ));
    }
    let journal = Journal {
        kind: KIND_JOURNAL.into(),
        ..journal
    };
    if let Err(r) = crate::gate::pre_check(&prep)? {
        return Err(contract::exit::Refused(r.message("nothing written")).into());
    }
    let runner = SubprocessRunner {
        work: prep.work.path().to_path_buf(),
        timeout: prep.timeout,
    };
    let mut all: Vec<CommitRef> = vec![CommitRef {
        index: 0,
        commit: good.id.clone(),
        subject: good.subject.clone(),
    }];
    all.extend(path.iter().enumerate().map(|(i, c)| CommitRef {
        index: i + 1,
        commit: c.id.clone(),
        subject: c.subject.clone(),
    }));
    let n = all.len() - 1;
    progress(&format!(
        "bisect {} over {n} commit(s) after {} ({} mode)",
        args.key,
        short(&good.id),
        mode.name()
    ));
    let mut bench = Bench {
        prep: &prep,
        runner: &runner,
        args: &args,
        mode,
        journal,
        journal_path,
        pool: Vec::new(),
        next_index: 1,
        orders: abstat::plan_orders(args.max_rounds as usize, args.order_seed)
            .map_err(|e| anyhow::anyhow!("--max-rounds {}: {e}", args.max_rounds))?,
        steps: Vec::new(),
    };
    let mut slots: BTreeMap<usize, Slot> = BTreeMap::new();
    let mut counts = (0usize, 0usize); // (built, cached)
    let build = |i: usize,
                 slots: &mut BTreeMap<usize, Slot>,
                 counts: &mut (usize, usize)|
     -> anyhow::Result<Outcome> {
        let at = all[i].clone();
        let outcome = cache.build(&at.commit)?;
        if outcome.built_now() {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
        let (spec, identity, note) = match &outcome {
            Outcome::Built(b) => {
                let mut spec = git::spec_of(b, &common.git, &topts)?;
                common.bound_feed(&mut spec);
                spec.given = format!("git:{}", short(&at.commit));
                spec.speak(crate::sample::protocols::lookup(prep.scenario.protocol.name())?.spec());
                let mut id = spec.identity()?;
                id.git = Some(b.info.clone());
                (Some(spec), Some(id), None)
            }
            Outcome::Failed { .. } => {
                let f = outcome.failure().map(|f| f.0).unwrap_or_default();
                progress(&format!("skipped {i}: {f}"));
                (None, None, Some(f))
            }
        };
        slots.insert(
            i,
            Slot {
                at,
                spec,
                identity,
                built_now: outcome.built_now(),
                note,
            },
        );
        Ok(outcome)
    };
    for end in [0, n] {
        let o = build(end, &mut slots, &mut counts)?;
        if let Some(f) = o.failure() {
            return Err(f.into());
        }
    }
    // The ends first: without a difference there is nothing to find.
    let ends = {
        let (g, b) = (&slots[&0], &slots[&n]);
        bench.compare(g, b)?
    };
    let searched = match ends.answer {
        Answer::Different => Some(bisect::search(n, |c, lo| {
            let o = build(c, &mut slots, &mut counts)?;
            if o.failure().is_some() {
                return Ok(Probe::Skip);
            }
            let step = bench.compare(&slots[&lo], &slots[&c])?;
            Ok::<_, anyhow::Error>(Probe::Answer(step.answer))
        })?),
        Answer::Same | Answer::Unknown => None,
    };
    let end = bisect::conclude(n, ends.answer, searched.as_ref());
    // The estimate of the step: the first bad against its last known good, measured now if
    // the search never compared the two.
    let estimate = match bisect::step_of(&bench.steps, end.estimate) {
        Some(st) => st.clone(),
        None if end.estimate == (n, 0) => ends.clone(),
        None => bench.compare(&slots[&end.estimate.1], &slots[&end.estimate.0])?,
    };
    let at = |i: usize| all[i].clone();
    let (outcome, first_bad) = (end.outcome, end.first_bad.map(at));
    let candidates: Vec<CommitRef> = end.candidates.iter().map(|&i| at(i)).collect();
    let skipped = slots
        .iter()
        .filter(|(_, s)| s.spec.is_none())
        .map(|(&i, _)| i)
        .collect();
    let verdicts = bisect::verdicts(&bench.steps, &skipped);
    let commits: Vec<BisectCommit> = slots
        .values()
        .map(|s| BisectCommit {
            at: s.at.clone(),
            verdict: verdicts
                .get(&s.at.index)
                .copied()
                .unwrap_or(if s.spec.is_none() {
                    CommitVerdict::Skipped
                } else {
                    CommitVerdict::Unknown
                }),
            values: bench
                .journal
                .values
                .get(&s.at.commit)
                .cloned()
                .unwrap_or_default(),
            built_now: s.built_now,
            note: s.note.clone(),
        })
        .collect();
    let result = BisectResult {
        kind: KIND_BISECT.into(),
        format_version: FORMAT_VERSION,
        scenario: prep.scenario.name.clone(),
        profile: prep.profile_name(),
        seed: prep.seed,
        vault_digest: prep.vault_digest.clone(),
        key: args.key.clone(),
        unit: bench.journal.unit.clone().unwrap_or_default(),
        mode: mode.name().into(),
        tau: if mode == Mode::Cost {
            args.cost_tau
        } else {
            bench.tau()
        },
        order_seed: args.order_seed,
        rounds: args.rounds as usize,
        max_rounds: args.max_rounds as usize,
        repo: repo.dir.display().to_string(),
        build_command: cache.build.clone(),
        run: run_line,
        good: all[0].clone(),
        bad: all[n].clone(),
        path_len: n,
        outcome,
        first_bad,
        candidates,
        estimate_pct: estimate.estimate_pct,
        ci_pct: estimate.ci_pct,
        builds: BuildCount {
            built: counts.0,
            cached: counts.1,
            beyond_ends: slots.len().saturating_sub(2),
        },
        commits,
        steps: bench.steps.clone(),
        resumed_measurements: resumed,
        wall_s: t0.elapsed().as_secs_f64(),
        recorded_at: now_rfc3339(),
        harness: harness_identity(),
        machine: prep.fingerprint.clone(),
        good_target: slots[&0]
            .identity
            .clone()
            .context("the good end's identity")?,
        bad_target: slots[&n]
            .identity
            .clone()
            .context("the bad end's identity")?,
    };
    eprint!("{}", reports::render::bisect_summary(&result));
    if let Some(out) = &args.out {
        write_reports(out, &result)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    }
    Ok(match result.outcome {
        BisectOutcome::Found | BisectOutcome::NoRegression => crate::exit::OK,
        BisectOutcome::Ambiguous | BisectOutcome::Unknown => crate::exit::INCONCLUSIVE,
    })
}

/// The result as JSON at `out`, Markdown beside it (`.md`) and HTML (`.html`).
fn write_reports(out: &Path, r: &BisectResult) -> anyhow::Result<()> {
    super::write_json_md_html(out, r, &reports::render::Document::Bisect(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_keys_are_told_by_name() {
        assert!(is_cost_key(
            "route.post-version.c1.server.instructions_per_request"
        ));
        assert!(is_cost_key("cold_push.server.instructions"));
        assert!(!is_cost_key("route.post-version.c1.p50_ms"));
    }
}

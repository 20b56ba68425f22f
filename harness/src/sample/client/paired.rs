//! Paired client mode (`ab --paired` with a `[client]` table): the scenario's own client as
//! the devices of both arms in one sample. Each arm has its own server and data dir (started by
//! `sample::paired`), its own recording proxy (unless the table turns it off), its own device
//! folders, `{state}` and `{shared}` folders (`a/client/`, `b/client/`), and its own
//! [`CommandClient`]: the command lines are the same, the placeholders are each arm's.
//!
//! Phase by phase the client's runs alternate between the arms, the first arm of each pair
//! alternating ABBA from the round's order (`pairs::in_turn`):
//! - cold push, cold pull, idle resync and folder rename: a pair is the whole phase on A and
//!   on B, each run by the sequential flow (`phases::run_phase`) on its own arm, so each arm
//!   keeps every key a sequential client-mode sample writes (the client's cost, the proxy's
//!   counts per route, the server's cost per phase from its own process tree, its log counts)
//!   and each arm's pull is checked byte-identical against the vault;
//! - edit propagation: a pair is one round (the edit, A's client, B's client, B's copy
//!   checked) on A and on B, so `edit.p50_ms` has a pair per round.
//!
//! Every timing key a phase writes on both arms gets its pairs: one pair a phase (the two
//! arms' values), except `edit.p50_ms`, whose pairs are the rounds. Phases the client cannot
//! run (no pull command) are named as skipped, as a sequential sample leaves them out.

use std::collections::BTreeMap;

use anyhow::Context;
use contract::key::{PhaseKey, Scope};
use contract::schema::MetricClass;
use reports::schema::{PairAggregate, PairSeries};
use scenarios::scenario::Phase;

use crate::sample::client::CommandClient;
use crate::sample::pairs::{Arm, EDIT_P50, PairedJob, in_turn};
use crate::sample::phases::{edit_keys, log_keys, run_phase, within_phase};
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::server_cost::{PhaseCost, Work};
use crate::sample::sync_client::{SyncClient, first_note};

/// Runs the paired client-mode sample (see the module's doc); each arm's keys go to its
/// `Metrics`, the pairs and the skipped phases to the job's.
pub async fn drive(job: PairedJob<'_>) -> anyhow::Result<()> {
    let PairedJob {
        plan,
        a_first,
        specs,
        dirs,
        a,
        b,
        pairs,
        skipped,
    } = job;
    let opts = plan
        .scenario
        .client
        .clone()
        .context("client mode without a [client] table")?;
    for p in &plan.scenario.phases {
        if opts.skips(p.name()).is_some() && !skipped.iter().any(|s| s == p.name()) {
            skipped.push(p.name().to_owned());
        }
    }
    // Each arm's plan: its own target (root and credentials come from it), the phases the
    // client can run.
    let mut plans = [plan.clone(), plan.clone()];
    plans[1].target = specs[1].clone();
    for p in &mut plans {
        p.scenario
            .phases
            .retain(|ph| opts.skips(ph.name()).is_none());
    }
    let mut arms = [a, b];
    let mut clients = [
        CommandClient::start(&plans[0], &arms[0].server, dirs[0]).context("arm A")?,
        CommandClient::start(&plans[1], &arms[1].server, dirs[1]).context("arm B")?,
    ];
    let mut costs = [
        PhaseCost::new(arms[0].server.pid),
        PhaseCost::new(arms[1].server.pid),
    ];
    // Pairs counted over the whole sample, so the ABBA order runs on across phases.
    let mut n = 0usize;
    for phase in &plans[0].scenario.phases {
        let name = phase.name();
        let step = async {
            match phase {
                Phase::ColdStart => return Ok(()),
                Phase::EditPropagation { rounds } => {
                    let edits = Edits {
                        plan,
                        a_first,
                        rounds: *rounds,
                    };
                    let s = edits
                        .run(&mut arms, &mut clients, &mut costs, &mut n)
                        .await?;
                    pairs.insert(EDIT_P50.to_owned(), s);
                }
                _ => {
                    in_turn(n, a_first, async |k: usize| {
                        let arm = &mut *arms[k];
                        let run = run_phase(
                            &plans[k],
                            phase,
                            &mut arm.server,
                            &mut clients[k],
                            dirs[k],
                            &mut arm.m,
                            &mut costs[k],
                        );
                        run.await
                    })
                    .await?;
                    n += 1;
                }
            }
            phase_pairs(name, [&arms[0].m, &arms[1].m], pairs);
            Ok::<(), anyhow::Error>(())
        };
        within_phase(plan, name, step).await?;
    }
    for (client, arm) in clients.iter_mut().zip(arms.iter_mut()) {
        client.finish(&mut arm.m);
    }
    Ok(())
}

/// The paired edit propagation: round by round on each arm in turn.
struct Edits<'a> {
    plan: &'a SamplePlan,
    a_first: bool,
    rounds: usize,
}

impl Edits<'_> {
    /// Runs the rounds, then writes each arm's keys as the sequential flow does (delays, its
    /// server's cost and log counts over the phase, the client's keys); returns the rounds'
    /// pairs of `edit.p50_ms`.
    async fn run(
        &self,
        arms: &mut [&mut Arm; 2],
        clients: &mut [CommandClient; 2],
        costs: &mut [PhaseCost; 2],
        n: &mut usize,
    ) -> anyhow::Result<PairSeries> {
        let name = "edit";
        let rel =
            first_note(&self.plan.vault_dir)?.context("edit propagation: the vault has no note")?;
        let mut bodies = Vec::with_capacity(2);
        let mut logs = Vec::with_capacity(2);
        for k in 0..2 {
            clients[k].phase_started().await?;
            logs.push(arms[k].server.log.read());
            costs[k].begin()?;
            bodies.push(clients[k].edit_start(&rel)?);
        }
        let mut lat: [Vec<f64>; 2] = [
            Vec::with_capacity(self.rounds),
            Vec::with_capacity(self.rounds),
        ];
        for round in 0..self.rounds {
            let (ta, tb) = in_turn(*n, self.a_first, async |k: usize| {
                clients[k].edit_round(&rel, round, &mut bodies[k])
            })
            .await
            .with_context(|| format!("edit round {round}"))?;
            *n += 1;
            lat[0].push(ta);
            lat[1].push(tb);
        }
        let series = PairSeries {
            a: lat[0].clone(),
            b: lat[1].clone(),
            aggregate: PairAggregate::Median,
            slice: 1,
        };
        for (k, log0) in logs.into_iter().enumerate() {
            let m = &mut arms[k].m;
            edit_keys(&mut lat[k], self.rounds, m);
            let work = Work {
                requests: 0,
                files: None,
                timed: false,
            };
            costs[k].end(&Scope::phase(name), work, false, m)?;
            let log = &arms[k].server.log;
            if log.counting() {
                let d = log0.until(&log.settle());
                log_keys(&PhaseKey::new(name, "log").to_string(), &d, None, m);
            }
            clients[k].phase_ended(name, None, &mut arms[k].m).await?;
        }
        Ok(series)
    }
}

/// One pair for every timing key of phase `name` that both arms wrote (pure): A's value and
/// B's, summed as a block. A key that already has its pairs (edit propagation's rounds) keeps
/// them.
fn phase_pairs(name: &str, arms: [&Metrics; 2], pairs: &mut BTreeMap<String, PairSeries>) {
    let prefix = format!("{name}.");
    for (key, ma) in arms[0].map.range(prefix.clone()..) {
        if !key.starts_with(&prefix) {
            break;
        }
        if ma.class != MetricClass::Timing || pairs.contains_key(key) {
            continue;
        }
        let Some(mb) = arms[1].map.get(key) else {
            continue;
        };
        pairs.insert(
            key.clone(),
            PairSeries {
                a: vec![ma.value],
                b: vec![mb.value],
                aggregate: PairAggregate::Sum,
                slice: 1,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::schema::Better;

    #[test]
    fn every_timing_key_of_a_phase_on_both_arms_gets_one_pair() {
        let (mut a, mut b) = (Metrics::default(), Metrics::default());
        for (m, v) in [(&mut a, 10.0), (&mut b, 12.0)] {
            m.timing("cold_push.wall_ms", v, "ms", Better::Lower);
            m.timing("cold_push.client.wall_ms", v + 1.0, "ms", Better::Lower);
            m.exact("cold_push.proxy.requests", 7.0, "count");
            m.resource("cold_push.client.cpu_ms", 3.0, "ms");
            m.timing("cold_pull.wall_ms", v, "ms", Better::Lower);
            m.timing("cold_pushy.wall_ms", v, "ms", Better::Lower);
        }
        a.timing(
            "cold_push.proxy.PUT_{path}.p50_us",
            800.0,
            "us",
            Better::Lower,
        );
        let mut pairs = BTreeMap::new();
        let kept = PairSeries {
            a: vec![1.0, 2.0],
            b: vec![1.0, 2.0],
            aggregate: PairAggregate::Median,
            slice: 1,
        };
        pairs.insert("cold_push.client.wall_ms".to_owned(), kept.clone());
        phase_pairs("cold_push", [&a, &b], &mut pairs);
        let keys: Vec<&str> = pairs.keys().map(String::as_str).collect();
        // Timing keys of the phase on both arms only: not the next phase's, not a phase whose
        // name merely starts alike, not exact or resource keys, not a key only A wrote.
        assert_eq!(keys, ["cold_push.client.wall_ms", "cold_push.wall_ms"]);
        let s = &pairs["cold_push.wall_ms"];
        assert_eq!(
            (s.a.as_slice(), s.b.as_slice()),
            ([10.0].as_slice(), [12.0].as_slice())
        );
        assert_eq!(s.aggregate, PairAggregate::Sum);
        assert_eq!(pairs["cold_push.client.wall_ms"], kept);
    }
}

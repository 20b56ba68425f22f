//! MCP's paired flow (`ab --paired`): both servers up, each a fresh process over its own copy
//! of the vault, booted one after the other; then the warm listings and the seeded
//! `tools/call` workload at 1 in flight, each listing and each call sent to both arms in turn
//! (the first arm alternating ABBA, `pairs::in_turn`). Per-tool latency pairs are judged on
//! their pair medians. The boot's timings are not paired (both servers were spawned before
//! either was booted, so the second's spawn-relative times include the first's boot) and
//! levels above 1 in flight are not either (a pair is one call against one call): both are
//! named as skipped. The listing's facts, call counts and errors are each arm's own keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use contract::key::{PhaseKey, PhaseRouteKey};
use loadgen::protocols::mcp::http::{HttpConfig, HttpConn};
use loadgen::protocols::mcp::run::{self, Booted, RunConfig};
use loadgen::protocols::mcp::session::{CallOutcome, Conn, Session};
use loadgen::protocols::mcp::stdio::StdioConn;
use reports::schema::{Better, PairSeries};
use scenarios::scenario::Phase;

use crate::sample::pairs::{Arm, PairedJob, file_series, in_turn};
use crate::sample::phases::within_phase;
use crate::sample::target::{Server, TargetSpec};

/// One arm's client: the config its run uses, its session and its first listing.
struct Side {
    cfg: RunConfig,
    booted: Booted,
    stdio: bool,
}

fn connect(spec: &TargetSpec, server: &mut Server, seed: u64) -> anyhow::Result<(RunConfig, Conn)> {
    let vault = std::fs::canonicalize(&server.data_dir)
        .with_context(|| format!("the vault copy {}", server.data_dir.display()))?;
    let mut cfg = super::options::config(&spec.def, vault);
    cfg.seed = seed;
    let conn: Conn = match server.take_pipes() {
        Some(pipes) => StdioConn::attach(server.pid, server.spawned, pipes, &cfg.stdio)?.into(),
        None => {
            let url = HttpConfig::endpoint(server.addr, spec.def.root.as_deref());
            HttpConn::new(HttpConfig::new(url), server.pid, server.spawned)?.into()
        }
    };
    Ok((cfg, conn))
}

async fn boot(spec: &TargetSpec, arm: &mut Arm, seed: u64, name: &str) -> anyhow::Result<Side> {
    let (cfg, conn) =
        connect(spec, &mut arm.server, seed).with_context(|| format!("arm {name}"))?;
    let stdio = matches!(conn, Conn::Stdio(_));
    let booted = run::boot(conn, &cfg)
        .await
        .with_context(|| format!("arm {name}: the boot"))?;
    let l = &booted.listing;
    for (stat, v, unit) in [
        ("tools", l.tools.len(), "tools"),
        ("list_bytes", l.bytes, "B"),
        ("list_pages", l.pages, "pages"),
    ] {
        arm.m
            .exact(PhaseKey::new(run::BOOT, stat).to_string(), v as f64, unit);
    }
    Ok(Side { cfg, booted, stdio })
}

/// A series' median, the arm's own key for a pair series.
fn median(v: &[f64]) -> f64 {
    contract::schema::median(v).unwrap_or(0.0)
}

pub(super) async fn drive(job: PairedJob<'_>) -> anyhow::Result<()> {
    let PairedJob {
        plan,
        a_first,
        specs,
        a,
        b,
        pairs,
        skipped,
        ..
    } = job;
    if !plan.scenario.sizes.is_empty() {
        bail!(
            "ab --paired does not run {}'s sizes (a pair is one call against one call on one vault): run ab without --paired",
            plan.scenario.name
        );
    }
    let (side_a, side_b) = if a_first {
        let sa = boot(specs[0], a, plan.seed, "A").await?;
        (sa, boot(specs[1], b, plan.seed, "B").await?)
    } else {
        let sb = boot(specs[1], b, plan.seed, "B").await?;
        (boot(specs[0], a, plan.seed, "A").await?, sb)
    };
    skipped.push(run::BOOT.to_owned());
    let sessions: [Arc<Session>; 2] =
        [side_a.booted.session.clone(), side_b.booted.session.clone()];
    let per_call = side_a.cfg.call;
    for phase in &plan.scenario.phases {
        let name = phase.name();
        match phase {
            Phase::ColdStart => {}
            Phase::McpListWarm { lists } => {
                let pages = [&side_a, &side_b].map(|s| s.cfg.max_pages);
                let step = async {
                    let mut s = file_series(*lists);
                    for i in 0..*lists {
                        let (ta, tb) = in_turn(i, a_first, async |k: usize| {
                            let at = Instant::now();
                            sessions[k]
                                .list_tools(pages[k], at + per_call)
                                .await
                                .context("tools/list")?;
                            Ok(at.elapsed().as_secs_f64() * 1e6)
                        })
                        .await?;
                        s.a.push(ta);
                        s.b.push(tb);
                    }
                    Ok::<PairSeries, anyhow::Error>(s)
                };
                let s = within_phase(plan, name, step).await?;
                let key = PhaseKey::new(run::WARM, "p50_us").to_string();
                a.m.timing(&key, median(&s.a), "us", Better::Lower);
                b.m.timing(&key, median(&s.b), "us", Better::Lower);
                pairs.insert(key, s);
            }
            Phase::McpCalls {
                in_flight,
                calls_per_op,
            } => {
                let mut plans = Vec::new();
                for side in [&side_a, &side_b] {
                    let mut cfg = side.cfg.clone();
                    cfg.calls_per_op = *calls_per_op;
                    let (_, calls) = run::workload(&cfg, &side.booted.listing)?;
                    plans.push(calls);
                }
                let tools = |c: &[loadgen::protocols::mcp::workload::Call]| {
                    c.iter().map(|c| c.tool.clone()).collect::<Vec<_>>()
                };
                if tools(&plans[0]) != tools(&plans[1]) {
                    bail!(
                        "{name}: the arms' workloads differ (their servers list different tools for the calls); run ab without --paired"
                    );
                }
                if plans[0].is_empty() {
                    bail!(
                        "{name}: the server lists none of the tools the workload calls (read, read several, list, search)"
                    );
                }
                for &n in in_flight.iter().filter(|&&n| n != 1) {
                    skipped.push(run::calls_phase(n));
                }
                if !in_flight.contains(&1) {
                    continue;
                }
                let step = async {
                    let mut series: BTreeMap<String, PairSeries> = BTreeMap::new();
                    let mut errors = [[0u64; 2]; 2];
                    // Each tool's own calls alternate ABBA (by the tool's count, not the
                    // plan's index: the shuffled plan would give a tool more A-first pairs
                    // than B-first ones, the same in every round).
                    let mut nth: BTreeMap<String, usize> = BTreeMap::new();
                    for i in 0..plans[0].len() {
                        let tool = plans[0][i].tool.clone();
                        let j = nth.entry(tool.clone()).or_insert(0);
                        let turn = *j;
                        *j += 1;
                        let (ta, tb) = in_turn(turn, a_first, async |k: usize| {
                            let c = &plans[k][i];
                            let at = Instant::now();
                            let outcome = sessions[k]
                                .call_tool(&c.tool, c.arguments.clone(), at + per_call)
                                .await
                                .with_context(|| format!("tools/call {}", c.tool))?;
                            let us = at.elapsed().as_secs_f64() * 1e6;
                            match outcome {
                                CallOutcome::Ok => {}
                                CallOutcome::ToolError => errors[k][0] += 1,
                                CallOutcome::ProtocolError => errors[k][1] += 1,
                            }
                            Ok(us)
                        })
                        .await?;
                        let s = series
                            .entry(tool)
                            .or_insert_with(|| file_series(plans[0].len()));
                        s.a.push(ta);
                        s.b.push(tb);
                    }
                    Ok::<_, anyhow::Error>((series, errors))
                };
                let (series, errors) = within_phase(plan, name, step).await?;
                let p = run::calls_phase(1);
                for (k, arm) in [&mut *a, &mut *b].into_iter().enumerate() {
                    arm.m.exact(
                        PhaseKey::new(&p, "tool_errors").to_string(),
                        errors[k][0] as f64,
                        "calls",
                    );
                    arm.m.exact(
                        PhaseKey::new(&p, "protocol_errors").to_string(),
                        errors[k][1] as f64,
                        "calls",
                    );
                }
                for (tool, s) in series {
                    let t = run::segment(&tool);
                    let key = PhaseRouteKey::new(&p, &t, 50).to_string();
                    let calls = PhaseKey::new(&p, &format!("calls.{t}")).to_string();
                    a.m.timing(&key, median(&s.a), "us", Better::Lower);
                    b.m.timing(&key, median(&s.b), "us", Better::Lower);
                    a.m.exact(&calls, s.a.len() as f64, "calls");
                    b.m.exact(&calls, s.b.len() as f64, "calls");
                    pairs.insert(key, s);
                }
            }
            other => bail!(
                "{}: an MCP server runs cold_start, mcp_list_warm and mcp_calls only",
                other.name()
            ),
        }
    }
    drop(sessions);
    for (side, arm, name) in [(side_a, a, "A"), (side_b, b, "B")] {
        if side.stdio {
            arm.server.exit_will_be_requested();
        }
        run::shutdown(side.booted.session, &side.cfg)
            .await
            .with_context(|| format!("arm {name}: the shutdown"))?;
    }
    Ok(())
}

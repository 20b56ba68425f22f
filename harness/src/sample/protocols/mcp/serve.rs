//! One MCP server's measured life in a sample, over the vault in its data dir: its stdio
//! pipes or its Streamable HTTP address attached to `loadgen`'s MCP client, the cold boot, the
//! scenario's MCP phases (warm listings, the seeded workload at each in-flight level) between
//! the sample's phase boundaries, retrieval quality where the vault has planted queries, and
//! the shutdown; its figures as the sample's keys. A one-size sample runs it once, a growth
//! scenario once per size (`growth`).

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use contract::key::{PhaseKey, Scope, ServerKey};
use contract::schema::MetricClass;
use loadgen::protocols::mcp::McpError;
use loadgen::protocols::mcp::http::{HttpConfig, HttpConn};
use loadgen::protocols::mcp::quality;
use loadgen::protocols::mcp::run::{self, Report, RunConfig};
use loadgen::protocols::mcp::session::Conn;
use loadgen::protocols::mcp::stdio::StdioConn;
use reports::schema::Better;
use scenarios::scenario::Phase;

use crate::sample::phases::within_phase;
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::server_cost::Work;
use crate::sample::target::Server;

/// An MCP error with the last line the server wrote on stderr (which the sample's log tap
/// reads, not the client).
fn failed(e: McpError, server: &Server) -> anyhow::Error {
    anyhow::anyhow!("{e} (its stderr: {})", server.stderr_line())
}

/// The threads of the server's tree now.
fn threads(pid: u32) -> usize {
    procstat::Snapshot::capture(pid).map_or(0, |s| s.task_count())
}

/// One server's measured life over the vault in its data dir: the boot, the scenario's MCP
/// phases, retrieval quality where the vault has planted queries, the shutdown; its keys into
/// `m`, and the run's report (each call's latency) returned.
pub(super) async fn serve(
    plan: &SamplePlan,
    server: &mut Server,
    m: &mut Metrics,
    bounds: &mut dyn crate::sample::phases::Boundary,
) -> anyhow::Result<Report> {
    // A stdio server's pipes; a server started with another readiness check is reached
    // over Streamable HTTP at its address, under the target's root (`/mcp` by default).
    let pipes = server.take_pipes();
    let vault = std::fs::canonicalize(&server.data_dir)
        .with_context(|| format!("the vault copy {}", server.data_dir.display()))?;
    let mut cfg = super::options::config(&plan.target.def, vault);
    cfg.seed = plan.seed;
    cfg.level = plan.phase_timeout;
    let conn: Conn = match pipes {
        Some(pipes) => StdioConn::attach(server.pid, server.spawned, pipes, &cfg.stdio)
            .map_err(|e| failed(e, server))?
            .into(),
        None => {
            let url = HttpConfig::endpoint(server.addr, plan.target.def.root.as_deref());
            HttpConn::new(HttpConfig::new(url), server.pid, server.spawned)
                .map_err(|e| failed(e, server))?
                .into()
        }
    };
    let stdio = matches!(conn, Conn::Stdio(_));
    let pid = server.pid;
    let booted = run::boot(conn, &cfg).await.map_err(|e| failed(e, server))?;
    // Everything the server did so far was its boot (it was spawned for this sample).
    let boot_cpu_us = run::group_cpu_us(pid);
    let mut peak_threads = threads(pid);
    let session = booted.session;
    let search = quality::search_tool(&booted.listing, cfg.search.as_ref())
        .map_err(|e| failed(e, server))?;
    let queries = planted(plan, &cfg).map_err(|e| failed(e, server))?;
    // An index on disk: timed first, from the spawn to its first useful answer.
    let indexed = super::index::plan(plan, &cfg, search.as_ref(), &queries)?;
    let mut first = None;
    if let Some(ix) = &indexed {
        bounds.begin()?;
        let f = within_phase(plan, super::index::PHASE, async {
            ix.first(&session, &cfg, server.spawned).await
        })
        .await?;
        bounds.end(
            &Scope::phase(super::index::PHASE),
            work_of(f.calls),
            false,
            m,
        )?;
        first = Some(f);
    }
    let mut warm_list_us = Vec::new();
    let mut levels = BTreeMap::new();
    let mut tool_map = Default::default();
    for phase in &plan.scenario.phases {
        let name = phase.name();
        match phase {
            Phase::ColdStart => {}
            Phase::McpListWarm { lists } => {
                bounds.begin()?;
                let work = run::warm_lists(&session, *lists, &cfg);
                warm_list_us = within_phase(plan, name, async {
                    work.await.map_err(|e| failed(e, server))
                })
                .await?;
                let requests = (*lists * booted.listing.pages) as u64;
                bounds.end(&Scope::phase(run::WARM), work_of(requests), false, m)?;
            }
            Phase::McpCalls {
                in_flight,
                calls_per_op,
            } => {
                cfg.calls_per_op = *calls_per_op;
                let (map, calls) =
                    run::workload(&cfg, &booted.listing).map_err(|e| failed(e, server))?;
                if calls.is_empty() {
                    bail!(
                        "{name}: the server lists none of the tools the workload calls (read, read several, list, search)"
                    );
                }
                tool_map = map;
                for &n in in_flight {
                    bounds.begin()?;
                    let work = run::run_level(&session, &calls, n, &cfg);
                    let level = within_phase(plan, name, async {
                        work.await.map_err(|e| failed(e, server))
                    })
                    .await?;
                    peak_threads = peak_threads.max(threads(pid));
                    bounds.end(
                        &Scope::phase(&run::calls_phase(n)),
                        work_of(level.calls),
                        false,
                        m,
                    )?;
                    levels.insert(n, level);
                }
            }
            other => bail!(
                "{}: an MCP server runs cold_start, mcp_list_warm and mcp_calls only",
                other.name()
            ),
        }
    }
    // Retrieval quality, where the vault has planted queries (a `*-queries` profile).
    let quality = retrieval(&queries, &session, search.as_ref(), &cfg)
        .await
        .map_err(|e| failed(e, server))?;
    if stdio {
        server.exit_will_be_requested();
    }
    let report = run::close(
        session,
        booted.boot,
        &booted.listing,
        tool_map,
        warm_list_us,
        levels,
        &cfg,
    )
    .await
    .map_err(|e| failed(e, server))?;
    if let Some(by) = report.shutdown_by {
        eprintln!(
            "  {}: ended by {} ({} grace before SIGTERM)",
            run::SHUTDOWN,
            by.name(),
            contract::quote::duration(cfg.shutdown)
        );
    }
    keys(&report, boot_cpu_us, peak_threads, m);
    if let (Some(ix), Some(first)) = (&indexed, first) {
        let size_bytes = ix.size(&cfg);
        let warm = if stdio {
            Some(ix.warm(plan, server, &cfg).await?)
        } else {
            None
        };
        let f = super::index::Figures {
            first,
            size_bytes,
            warm,
        };
        eprintln!("  {}: {}", super::index::PHASE, super::index::line(ix, &f));
        super::index::keys(ix, &f, m);
    }
    if let Some(q) = quality {
        eprintln!("  {}: {}", quality::PHASE, quality::line(&q));
        for (key, value, unit) in quality::keys(&q) {
            m.exact(key, value, unit);
        }
    }
    Ok(report)
}

/// The vault's planted queries (`scenarios::plant`, recomputed from the scenario's profile
/// and seed); none for a profile that plants none. A size of a growth scenario holds a
/// prefix of the vault's notes: a query is kept where its relevant notes and decoys are all
/// there (all of them, in a whole vault).
fn planted(plan: &SamplePlan, cfg: &RunConfig) -> Result<Vec<quality::Query>, McpError> {
    let Some(profile) = scenarios::profile(&plan.scenario.profile) else {
        return Ok(Vec::new());
    };
    let planted = scenarios::queries(&profile, plan.seed);
    if planted.is_empty() {
        return Ok(Vec::new());
    }
    let (files, _) = loadgen::protocols::mcp::workload::walk(&cfg.vault)?;
    let notes: std::collections::BTreeSet<String> =
        files.into_iter().filter(|f| f.ends_with(".md")).collect();
    Ok(planted
        .into_iter()
        .filter(|q| {
            q.relevant
                .iter()
                .chain(&q.decoys)
                .all(|p| notes.contains(p))
        })
        .map(|q| quality::Query {
            phrase: q.phrase,
            relevant: q.relevant.into_iter().collect(),
        })
        .collect())
}

/// The search tool's scores on the vault's planted queries, or `None` when none is planted.
async fn retrieval(
    queries: &[quality::Query],
    session: &loadgen::protocols::mcp::session::Session,
    search: Option<&quality::Search>,
    cfg: &RunConfig,
) -> Result<Option<quality::Quality>, McpError> {
    if queries.is_empty() {
        return Ok(None);
    }
    let (files, _) = loadgen::protocols::mcp::workload::walk(&cfg.vault)?;
    let notes = files.into_iter().filter(|f| f.ends_with(".md")).collect();
    quality::measure(session, search, queries, &cfg.vault, &notes, cfg.call)
        .await
        .map(Some)
}

/// A phase's work for its cost keys: `requests` JSON-RPC requests.
fn work_of(requests: u64) -> Work {
    Work {
        requests,
        files: None,
        timed: false,
    }
}

/// The run's figures as the sample's keys, with the era, version and transport it spoke as
/// keys that name them (`mcp_boot.era.handshake`, `mcp_boot.protocol.2025-11-25`,
/// `mcp_boot.transport.http`, each 1).
fn keys(report: &Report, boot_cpu_us: u64, peak_threads: usize, m: &mut Metrics) {
    for kv in report.phase_keys() {
        match kv.class {
            MetricClass::Timing => m.timing(kv.key, kv.value, kv.unit, Better::Lower),
            MetricClass::Exact => m.exact(kv.key, kv.value, kv.unit),
            MetricClass::Resource => m.resource(kv.key, kv.value, kv.unit),
            MetricClass::Cost => m.cost(kv.key, kv.value, kv.unit),
        }
    }
    let n = &report.negotiated;
    m.exact(
        PhaseKey::new(run::BOOT, &format!("era.{}", n.era.name())).to_string(),
        1.0,
        "bool",
    );
    m.exact(
        PhaseKey::new(run::BOOT, &format!("protocol.{}", run::segment(&n.version))).to_string(),
        1.0,
        "bool",
    );
    m.exact(
        PhaseKey::new(run::BOOT, &format!("transport.{}", report.transport)).to_string(),
        1.0,
        "bool",
    );
    m.resource(
        ServerKey::new(Scope::phase(run::BOOT), "cpu_ms").to_string(),
        boot_cpu_us as f64 / 1e3,
        "ms",
    );
    m.resource(
        ServerKey::sample("threads").to_string(),
        peak_threads as f64,
        "count",
    );
    let t = &report.traffic;
    for (stat, v) in [
        ("notifications", t.notifications),
        ("server_requests", t.server_requests),
        ("unknown_ids", t.unknown_ids),
        ("late_answers", t.late),
    ] {
        m.exact(
            PhaseKey::new("mcp_traffic", stat).to_string(),
            v as f64,
            "count",
        );
    }
}

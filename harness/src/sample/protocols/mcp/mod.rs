//! MCP's side of the sample: a fresh server per sample (started by `sample::target` on the
//! sample's data dir, which holds a copy of the vault, in the sample's process tree), a stdio
//! server's pipes attached to `loadgen`'s MCP client or an HTTP server reached at its address
//! (Streamable HTTP, under the target's root, `/mcp` by default), and the scenario's MCP
//! phases driven through `loadgen::protocols::mcp::run`'s steps: the cold boot, warm listings,
//! the seeded `tools/call` workload at each in-flight level, and the shutdown (stdin closed →
//! exit, SIGTERM after the target's grace, then SIGKILL, the step that ended it recorded; or
//! the session's DELETE; the sample then stops an HTTP server as any other). A target that
//! declares an index (`[mcp] index`) gets the indexing keys (`index`).
//! Where the vault has planted queries (a `*-queries` profile), the server's search tool is
//! scored on them before the shutdown (`loadgen::protocols::mcp::quality`, exact keys).
//! The server's own costs are the sample's as for any target: per-phase CPU and io at each
//! phase boundary (`sample::server_cost`), its CPU, peak RSS and threads at the end.

mod index;
mod options;
mod paired;

use std::collections::BTreeMap;
use std::path::Path;

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

use crate::sample::pairs::PairedJob;
use crate::sample::phases::within_phase;
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};
use crate::sample::server_cost::Work;
use crate::sample::target::Server;

/// The registry's entry.
pub struct Impl;

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::mcp::SPEC
    }

    fn cost(&self) -> Support {
        Support::No(
            "the cost sample's callgrind and strace runs drive sync phases; an MCP server's run under them is not built (and callgrind cannot count a Node server's instructions in useful time); per-phase server CPU from /proc is recorded without it",
        )
    }

    fn paired(&self) -> Support {
        Support::Yes
    }

    fn drive_paired<'a>(&'a self, job: PairedJob<'a>) -> Local<'a, ()> {
        Box::pin(paired::drive(job))
    }

    fn faults(&self) -> Support {
        Support::No("its stdio client is not driven through the fault hop")
    }

    fn long_poll(&self) -> Support {
        Support::No("an MCP server has no long-poll feed")
    }

    fn runs(&self, phase: &Phase) -> Support {
        if matches!(phase, Phase::ColdStart) || phase.is_mcp() {
            Support::Yes
        } else {
            Support::No(
                "an MCP server is a tool server, not a sync server: it runs cold_start, mcp_list_warm and mcp_calls",
            )
        }
    }

    fn seed_data_dir(&self, plan: &SamplePlan, data: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(data).with_context(|| format!("creating {}", data.display()))?;
        copy_tree(&plan.vault_dir, data)
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(drive(run))
    }
}

/// Copies the vault under `from` into `to` (existing, empty): its folders and files.
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        for e in std::fs::read_dir(&src).with_context(|| format!("listing {}", src.display()))? {
            let e = e.with_context(|| format!("listing {}", src.display()))?;
            let (s, d) = (e.path(), dst.join(e.file_name()));
            let ft = e.file_type()?;
            if ft.is_dir() {
                std::fs::create_dir(&d).with_context(|| format!("creating {}", d.display()))?;
                stack.push((s, d));
            } else if ft.is_file() {
                std::fs::copy(&s, &d)
                    .with_context(|| format!("copying {} to {}", s.display(), d.display()))?;
            }
        }
    }
    Ok(())
}

/// An MCP error with the last line the server wrote on stderr (which the sample's log tap
/// reads, not the client).
fn failed(e: McpError, server: &Server) -> anyhow::Error {
    anyhow::anyhow!("{e} (its stderr: {})", server.stderr_line())
}

/// The threads of the server's tree now.
fn threads(pid: u32) -> usize {
    procstat::Snapshot::capture(pid).map_or(0, |s| s.task_count())
}

async fn drive(run: Run<'_>) -> anyhow::Result<()> {
    let Run {
        plan,
        server,
        m,
        bounds,
        ..
    } = run;
    // A stdio server's pipes; a server started with another readiness check is reached
    // over Streamable HTTP at its address, under the target's root (`/mcp` by default).
    let pipes = server.take_pipes();
    let vault = std::fs::canonicalize(&server.data_dir)
        .with_context(|| format!("the vault copy {}", server.data_dir.display()))?;
    let mut cfg = options::config(&plan.target.def, vault);
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
    let queries = planted(plan);
    // An index on disk: timed first, from the spawn to its first useful answer.
    let indexed = index::plan(plan, &cfg, search.as_ref(), &queries)?;
    let mut first = None;
    if let Some(ix) = &indexed {
        bounds.begin()?;
        let f = within_phase(plan, index::PHASE, async {
            ix.first(&session, &cfg, server.spawned).await
        })
        .await?;
        bounds.end(&Scope::phase(index::PHASE), work_of(f.calls), false, m)?;
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
        let f = index::Figures {
            first,
            size_bytes,
            warm,
        };
        eprintln!("  {}: {}", index::PHASE, index::line(ix, &f));
        index::keys(ix, &f, m);
    }
    if let Some(q) = quality {
        eprintln!("  {}: {}", quality::PHASE, quality::line(&q));
        for (key, value, unit) in quality::keys(&q) {
            m.exact(key, value, unit);
        }
    }
    Ok(())
}

/// The vault's planted queries (`scenarios::plant`, recomputed from the scenario's profile
/// and seed); none for a profile that plants none.
fn planted(plan: &SamplePlan) -> Vec<quality::Query> {
    let Some(profile) = scenarios::profile(&plan.scenario.profile) else {
        return Vec::new();
    };
    scenarios::queries(&profile, plan.seed)
        .into_iter()
        .map(|q| quality::Query {
            phrase: q.phrase,
            relevant: q.relevant.into_iter().collect(),
        })
        .collect()
}

/// The search tool's scores on the vault's planted queries, or `None` when it plants none.
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

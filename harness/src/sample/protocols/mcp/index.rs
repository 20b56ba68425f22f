//! The indexing keys of an MCP server that builds an index on disk (a target's `[mcp] index`,
//! the index's files relative to the data dir, such as obsidian-mcp's SQLite database): right
//! after the cold boot, the search tool is asked the vault's first planted query until an
//! answer names a note (an index built in the background answers nothing until then), which
//! gives spawn → first useful answer and notes/s; after the server's exit, the index's size on
//! disk; then a second start of the same command line on the same data dir (a fresh process
//! that finds the index built) gives the warm boot and its first useful answer, and is shut
//! down by the same ladder. The second start is this process's child in a process group of its
//! own (killed with it), not in the sample's measured tree: its figures are times only.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use contract::key::PhaseKey;
use loadgen::launch::mcp::index_files;
use loadgen::protocols::mcp::quality::{self, FirstResults, Poll, Search};
use loadgen::protocols::mcp::run::{self, RunConfig};
use loadgen::protocols::mcp::session::Session;
use loadgen::protocols::mcp::stdio::{StdioConfig, StdioConn};
use reports::schema::Better;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::Server;

/// The phase of the indexing keys.
pub(super) const PHASE: &str = "mcp_index";

/// Between an answer that names no note and the next call: short beside an index build of
/// a hundred notes (obsidian-mcp 2.1.6 takes tens of milliseconds per batch of 50).
const INTERVAL: Duration = Duration::from_millis(25);

/// What a target with an index is measured with.
pub(super) struct Indexed {
    /// The `[mcp] index` pattern.
    pub pattern: String,
    pub search: Search,
    /// The query asked until it is answered.
    pub phrase: String,
    /// The vault's notes (relative).
    pub notes: BTreeSet<String>,
}

/// What the index measured.
pub(super) struct Figures {
    pub first: FirstResults,
    pub size_bytes: u64,
    /// The second start: spawn → handshake, → first listing, → first useful answer, and the
    /// step that ended it; `None` for an HTTP server (one process, started by the sample).
    pub warm: Option<Warm>,
}

pub(super) struct Warm {
    pub boot: run::Boot,
    pub first: FirstResults,
    pub ended_by: &'static str,
}

/// The index plan of the sample, or `None` when the target declares no index. A declared
/// index needs a content search tool and a planted query (a `*-queries` profile): without
/// them the sample fails, naming what is missing.
pub(super) fn plan(
    plan: &SamplePlan,
    cfg: &RunConfig,
    search: Option<&Search>,
    queries: &[quality::Query],
) -> anyhow::Result<Option<Indexed>> {
    let Some(pattern) = plan.target.def.mcp.as_ref().and_then(|m| m.index.clone()) else {
        return Ok(None);
    };
    let Some(search) = search.filter(|s| s.scope == quality::Scope::Content) else {
        anyhow::bail!(
            "{PHASE}: the target declares an index ({pattern:?}) but lists no content search tool to time it with"
        );
    };
    let Some(q) = queries.iter().find(|q| !q.relevant.is_empty()) else {
        anyhow::bail!(
            "{PHASE}: the target declares an index ({pattern:?}); timing it needs planted queries (a `*-queries` profile), and scenario {:?} has none",
            plan.scenario.name
        );
    };
    let (files, _) = loadgen::protocols::mcp::workload::walk(&cfg.vault)?;
    Ok(Some(Indexed {
        pattern,
        search: search.clone(),
        phrase: q.phrase.clone(),
        notes: files.into_iter().filter(|f| f.ends_with(".md")).collect(),
    }))
}

impl Indexed {
    /// Spawn (`spawned`) → the first answer of the search tool that names a note.
    pub(super) async fn first(
        &self,
        session: &Session,
        cfg: &RunConfig,
        spawned: Instant,
    ) -> anyhow::Result<FirstResults> {
        let poll = Poll {
            spawned,
            interval: INTERVAL,
            per_call: cfg.call,
            deadline: Instant::now() + cfg.level,
        };
        Ok(quality::first_results(
            session,
            &self.search,
            &self.phrase,
            &cfg.vault,
            &self.notes,
            poll,
        )
        .await?)
    }

    /// The index's bytes on disk now (its files summed).
    pub(super) fn size(&self, cfg: &RunConfig) -> u64 {
        index_files(&cfg.vault, &self.pattern)
            .iter()
            .map(|(_, n)| n)
            .sum()
    }

    /// A second start of the target's command line on the same data dir: its boot, its
    /// first useful answer, its shutdown.
    pub(super) async fn warm(
        &self,
        plan: &SamplePlan,
        server: &Server,
        cfg: &RunConfig,
    ) -> anyhow::Result<Warm> {
        let def = &plan.target.def;
        let program = def
            .locate()
            .with_context(|| format!("{PHASE}: the second start"))?;
        let vars = def.vars(server.addr, &cfg.vault);
        let mut argv: Vec<String> = def.argv.iter().map(|a| vars.render(a)).collect();
        argv[0] = program.display().to_string();
        let mut stdio = StdioConfig::new(argv);
        stdio.env = def
            .env
            .iter()
            .map(|(k, v)| (k.clone(), vars.render(v)))
            .collect();
        if def.run_in_data_dir {
            stdio.cwd = Some(cfg.vault.clone());
        }
        let conn = StdioConn::spawn(&stdio).context("mcp_index: the second start")?;
        let spawned = conn.spawned;
        let booted = run::boot(conn, cfg)
            .await
            .context("mcp_index: the second start's boot")?;
        let first = self
            .first(&booted.session, cfg, spawned)
            .await
            .context("mcp_index: the second start's first answer")?;
        let down = run::shutdown(booted.session, cfg)
            .await
            .context("mcp_index: the second start's shutdown")?;
        Ok(Warm {
            boot: booted.boot,
            first,
            ended_by: down.by.map_or("none", |b| b.name()),
        })
    }
}

/// The indexing keys (phase [`PHASE`]): `first_results_us` and `notes_per_s` (timing),
/// `notes` (exact), `size_bytes` (resource), and for the second start `warm_handshake_us`,
/// `warm_first_list_us`, `warm_first_results_us` (timing) and `warm_ended_by.STEP` (exact).
pub(super) fn keys(ix: &Indexed, f: &Figures, m: &mut Metrics) {
    let key = |stat: &str| PhaseKey::new(PHASE, stat).to_string();
    let us = |d: Duration| d.as_micros() as f64;
    let notes = ix.notes.len() as f64;
    m.timing(
        key("first_results_us"),
        us(f.first.after),
        "us",
        Better::Lower,
    );
    m.timing(
        key("notes_per_s"),
        notes / f.first.after.as_secs_f64().max(1e-6),
        "notes/s",
        Better::Higher,
    );
    m.exact(key("notes"), notes, "notes");
    m.resource(key("size_bytes"), f.size_bytes as f64, "B");
    if let Some(w) = &f.warm {
        m.timing(
            key("warm_handshake_us"),
            us(w.boot.handshake),
            "us",
            Better::Lower,
        );
        m.timing(
            key("warm_first_list_us"),
            us(w.boot.first_list),
            "us",
            Better::Lower,
        );
        m.timing(
            key("warm_first_results_us"),
            us(w.first.after),
            "us",
            Better::Lower,
        );
        m.exact(key(&format!("warm_ended_by.{}", w.ended_by)), 1.0, "bool");
    }
}

/// One line for the sample's log.
pub(super) fn line(ix: &Indexed, f: &Figures) -> String {
    let warm = f.warm.as_ref().map_or(String::new(), |w| {
        format!(
            "; second start: first list {:.1} ms, first answer {:.1} ms (ended by {})",
            w.boot.first_list.as_secs_f64() * 1e3,
            w.first.after.as_secs_f64() * 1e3,
            w.ended_by
        )
    });
    format!(
        "{} notes answered {:.1} ms after the spawn ({} calls), index {} B{warm}",
        ix.notes.len(),
        f.first.after.as_secs_f64() * 1e3,
        f.first.calls,
        f.size_bytes
    )
}

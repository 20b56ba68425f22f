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
//! One server's run is `serve`; a growth scenario's sizes (`growth`) run it once per size.

mod growth;
mod index;
mod options;
mod paired;
mod serve;

use std::path::Path;

use anyhow::Context;
use scenarios::scenario::Phase;

use crate::sample::pairs::PairedJob;
use crate::sample::plan::SamplePlan;
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

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

    fn sizes(&self) -> Support {
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
        match plan.scenario.sizes.first() {
            // A growth scenario's first server serves the first size.
            Some(&n) => growth::seed(plan, n, data),
            None => copy_tree(&plan.vault_dir, data),
        }
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

async fn drive(run: Run<'_>) -> anyhow::Result<()> {
    if !run.plan.scenario.sizes.is_empty() {
        return growth::drive(run).await;
    }
    let Run {
        plan,
        server,
        m,
        bounds,
        ..
    } = run;
    serve::serve(plan, server, m, bounds).await.map(drop)
}

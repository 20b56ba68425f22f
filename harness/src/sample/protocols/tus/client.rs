//! The tus side of the protocol seam (`protocol = "tus"`): the cold push is an import, one
//! upload per file (a creation `POST` carrying the note when the server offers
//! creation-with-upload, else `POST` and `PATCH`), and the cold pull reads every upload back
//! (`HEAD`: offset, length and metadata; `GET`: the bytes), so the driver's digest check
//! compares what the server holds with the vault byte for byte. The server's capabilities
//! are discovered (`OPTIONS`) before the first phase, outside every phase's window.
//!
//! tus-only keys: `<phase>.round_trips_per_note` (requests per file: 1 with
//! creation-with-upload, 2 without), `<phase>.resumes`, `<phase>.resent_bytes`,
//! `<phase>.answers_409` and `<phase>.answers_460`.
//!
//! What it cannot verify: a server that does not serve `GET` of an upload (the core protocol
//! does not require it) fails the read-back with the status it answered; and whatever a
//! server does with an upload beyond holding it (indexing, a note database) is outside what
//! tus exposes.

use anyhow::{Context, bail};
use std::path::Path;

use contract::key::PhaseKey;
use loadgen::TransferReport;
use loadgen::protocols::tus::client::Recorder;
use loadgen::protocols::tus::{ImportOpts, Imported, TusClient};

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{EditJob, EditReport, PushJob, RouteStep, StepReport, SyncClient};
use crate::sample::target::{Server, TargetSpec};

/// A tus client of `server` for `spec`: its collection and credentials.
pub fn client_for(spec: &TargetSpec, server: &Server) -> anyhow::Result<TusClient> {
    let target = loadgen::Target::parse(&server.url(), false)?;
    let def = &spec.def;
    Ok(TusClient::new(
        target,
        def.auth.as_ref(),
        &loadgen::protocols::tus::collection_of(def),
    ))
}

/// A tus client of a target and the record of the last import (what the read-back reads).
pub struct TusSyncClient {
    client: TusClient,
    imported: Imported,
}

impl TusSyncClient {
    /// A client of `server`, its capabilities discovered (not timed: before the first phase).
    pub async fn connect(plan: &SamplePlan, server: &Server) -> anyhow::Result<TusSyncClient> {
        let mut client = client_for(&plan.target, server)?;
        client
            .discover(&Recorder::new(false))
            .await
            .context("tus discovery (OPTIONS of the collection)")?;
        Ok(TusSyncClient {
            client,
            imported: Imported::default(),
        })
    }
}

/// Why a phase other than a push or its read-back is not run (the registry refuses such a
/// scenario first).
const PUSH_ONLY: &str = "tus targets run cold_push and cold_pull only (no listing, feed or rename)";

impl SyncClient for TusSyncClient {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::tus::SPEC
    }

    async fn push(&mut self, job: PushJob<'_>, _m: &mut Metrics) -> anyhow::Result<TransferReport> {
        let opts = ImportOpts {
            in_flight: job.in_flight,
            checkpoint_every: job.checkpoint_every,
        };
        let (r, imported) = loadgen::protocols::tus::import_vault(&self.client, job.vault, opts)
            .await
            .context("cold push (tus import)")?;
        self.imported = imported;
        Ok(r)
    }

    fn transfer_keys(&self, p: &str, r: &TransferReport, m: &mut Metrics) {
        if r.files > 0 {
            m.exact(
                PhaseKey::new(p, "round_trips_per_note"),
                r.requests as f64 / r.files as f64,
                "count",
            );
        }
        if p == "cold_push" {
            let i = &self.imported;
            for (stat, v, unit) in [
                ("resumes", i.resumes, "count"),
                ("resent_bytes", i.resent_bytes, "bytes"),
                ("answers_409", i.conflicts, "count"),
                ("answers_460", i.mismatches, "count"),
            ] {
                m.exact(PhaseKey::new(p, stat), v as f64, unit);
            }
        }
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        if self.imported.uploads.is_empty() {
            bail!("cold pull: a tus target is read back from its import; run cold_push first");
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        loadgen::protocols::tus::read_back(&self.client, &self.imported, dir)
            .await
            .context("cold pull (tus read-back)")
    }

    async fn resync(&mut self, _dir: &Path) -> anyhow::Result<TransferReport> {
        bail!("idle resync: {PUSH_ONLY}")
    }

    async fn edit_propagation(
        &mut self,
        _job: &EditJob<'_>,
        _m: &mut Metrics,
    ) -> anyhow::Result<EditReport> {
        bail!("edit propagation: {PUSH_ONLY}")
    }

    async fn rename(&mut self, _from: &str, _to: &str, _m: &mut Metrics) -> anyhow::Result<u64> {
        bail!("folder rename: {PUSH_ONLY}")
    }

    async fn propagate_rename(
        &mut self,
        _from: &str,
        _to: &str,
        _pull_dir: &Path,
    ) -> anyhow::Result<u64> {
        bail!("folder rename: {PUSH_ONLY}")
    }

    async fn route_step(&mut self, _step: RouteStep<'_>) -> anyhow::Result<StepReport> {
        bail!("route load: {PUSH_ONLY}")
    }
}

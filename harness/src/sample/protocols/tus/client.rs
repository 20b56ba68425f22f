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
use loadgen::protocols::tus::cut::CutHop;
use loadgen::protocols::tus::{ImportOpts, Imported, TusClient};

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{
    CostWindow, EditJob, EditReport, PushJob, RouteStep, StepReport, SyncClient, TusResumeJob,
};
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

/// Where `tus_resume`'s keys go (`tus.resumed_byte_identical`, …): the protocol's promise,
/// under its name.
const RESUME_SCOPE: &str = "tus";
/// Mixed into the plan's seed for the cutting hop's cut points.
const RESUME_SEED: u64 = 0x7475_735f_6375_7473;

/// The first `cuts` files of `vault` (sorted by path) with at least two bytes (a cut keeps at
/// least one byte from the server and passes at least one), copied under `dir`; that folder
/// and its manifest.
fn resume_files(
    vault: &Path,
    cuts: usize,
    dir: &Path,
) -> anyhow::Result<(std::path::PathBuf, scenarios::Manifest)> {
    let all = crate::tree::manifest_of_dir(vault)?;
    let picked: Vec<_> = all
        .entries
        .iter()
        .filter(|e| e.size >= 2)
        .take(cuts)
        .collect();
    if picked.len() < cuts {
        bail!(
            "tus_resume: cuts = {cuts}, but the vault has only {} files of at least 2 bytes",
            picked.len()
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    for e in &picked {
        let (from, to) = (vault.join(&e.path), dir.join(&e.path));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
    }
    let sent = scenarios::Manifest::from_entries(picked.into_iter().cloned().collect());
    Ok((dir.to_owned(), sent))
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

    async fn tus_resume(
        &mut self,
        job: TusResumeJob<'_>,
        window: &mut dyn CostWindow,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        let cuts = job.cuts;
        let root = job.sample_dir.join("tus-resume");
        let (src, sent) = resume_files(&job.plan.vault_dir, cuts, &root.join("vault"))?;
        let hop = CutHop::start(job.server.addr, job.plan.seed ^ RESUME_SEED, cuts as u64)
            .await
            .context("tus_resume: starting the cutting hop")?;
        let via = loadgen::Target::parse(&format!("http://{}", hop.addr()), false)?;
        let def = &job.plan.target.def;
        let mut client = TusClient::new(
            via,
            def.auth.as_ref(),
            &loadgen::protocols::tus::collection_of(def),
        )
        .without_creation_with_upload();
        client
            .discover(&Recorder::new(false))
            .await
            .context("tus_resume: discovery through the cutting hop")?;
        // One upload at a time, so the hop's seeded cut points fall on the same uploads.
        let opts = ImportOpts {
            in_flight: 1,
            checkpoint_every: cuts,
        };
        window.begin()?;
        let (r, imported) = loadgen::protocols::tus::import_vault(&client, &src, opts)
            .await
            .context("tus_resume: the cut uploads")?;
        window.end(RESUME_SCOPE, r.requests, r.files, m)?;
        let (cut, withheld) = (hop.cut(), hop.bytes_cut());
        drop(hop);
        if cut != cuts as u64 {
            bail!(
                "tus_resume: the hop cut {cut} of {cuts} first PATCH bodies (the server took the uploads some other way)"
            );
        }
        if imported.resumed_uploads != cut {
            bail!(
                "tus_resume: {} of {cut} cut uploads were resumed; the rest finished without a HEAD",
                imported.resumed_uploads
            );
        }
        // Read back past the hop, with the client the import phases use.
        let back = root.join("back");
        std::fs::create_dir_all(&back).with_context(|| format!("creating {}", back.display()))?;
        loadgen::protocols::tus::read_back(&self.client, &imported, &back)
            .await
            .context("tus_resume: reading the resumed uploads back")?;
        let got = crate::tree::manifest_of_dir(&back)?;
        if let Some(d) = sent.first_difference(&got) {
            bail!("tus_resume: a resumed upload reads back differently: {d}");
        }
        m.passed(PhaseKey::new(RESUME_SCOPE, "resumed_byte_identical"));
        let key = |stat: &str| PhaseKey::new(RESUME_SCOPE, stat);
        for (stat, v, unit) in [
            ("cut_uploads", cut, "count"),
            ("resumed_uploads", imported.resumed_uploads, "count"),
            ("resumes", imported.resumes, "count"),
            ("bytes_withheld", withheld, "bytes"),
            ("resent_bytes", imported.resent_bytes, "bytes"),
            ("answers_409", imported.conflicts, "count"),
            ("answers_460", imported.mismatches, "count"),
        ] {
            m.exact(key(stat), v as f64, unit);
        }
        if imported.resumes > 0 {
            m.exact(
                key("resent_bytes_per_resume"),
                imported.resent_bytes as f64 / imported.resumes as f64,
                "bytes",
            );
        }
        if r.files > 0 {
            m.exact(
                key("round_trips_per_note"),
                r.requests as f64 / r.files as f64,
                "count",
            );
        }
        m.timing(
            key("wall_ms"),
            r.wall_ns as f64 / 1e6,
            "ms",
            reports::schema::Better::Lower,
        );
        eprintln!(
            "tus_resume: {cut} uploads cut, {} resumed byte-identical; {} bytes sent again ({withheld} withheld by the cuts)",
            imported.resumed_uploads, imported.resent_bytes
        );
        let _ = std::fs::remove_dir_all(&root);
        Ok(())
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

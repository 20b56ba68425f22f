//! The WebDAV side of the protocol seam (`protocol = "webdav"`, against a WebDAV preset
//! target), shaped like Remotely Save's sync: cold push (MKCOL + PUT), cold pull (PROPFIND
//! walk + GET), idle resync (a walk that finds nothing to do), edit propagation (B polls with
//! PROPFIND at the scenario's interval: the delay is poll-bounded and the keys say so), folder
//! rename (MOVE, then B's walk), route load over the WebDAV routes. A and B are two clients
//! of the same server: WebDAV has no devices.
//!
//! WebDAV-only keys are named for what they count (`edit.poll_interval_ms`, `edit.polls`);
//! WebDAV servers have no counters endpoint, so their cost comes from `/proc` alone.

use anyhow::Context;
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::TransferReport;
use loadgen::protocols::webdav::client::Recorder;
use loadgen::protocols::webdav::{DavClient, DavEntry, DavRoute, Depth};
use scenarios::scenario::WebdavOptions;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{
    EditJob, EditReport, Polled, PolledEdit, PushJob, RouteStep, StepReport, SyncClient,
    largest_folder, move_walked_copy, polled_edit_phase,
};
use crate::sample::target::Server;

/// A WebDAV client of a preset target, with the scenario's `[webdav]` options.
pub struct WebdavClient {
    client: DavClient,
    opts: WebdavOptions,
    depth: Depth,
    /// The folder the route load lists: the largest, under its new name once renamed.
    load_folder: String,
}

impl WebdavClient {
    /// A client of `server` with the target's credentials, under its WebDAV root.
    pub fn connect(plan: &SamplePlan, server: &Server) -> anyhow::Result<WebdavClient> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        let def = &plan.target.def;
        let client = DavClient::with_root(target, def.auth.as_ref(), def.root())
            .with_walk_bounds(def.walk.unwrap_or_default());
        let opts = plan.scenario.webdav.clone().unwrap_or_default();
        let depth = match opts.depth.as_str() {
            "infinity" => Depth::Infinity,
            _ => Depth::One,
        };
        Ok(WebdavClient {
            client,
            opts,
            depth,
            load_folder: largest_folder(&plan.vault_dir)?.unwrap_or_default(),
        })
    }
}

impl SyncClient for WebdavClient {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::webdav::SPEC
    }

    async fn push(&mut self, job: PushJob<'_>, _m: &mut Metrics) -> anyhow::Result<TransferReport> {
        let (c, every) = (&self.client, job.checkpoint_every);
        loadgen::protocols::webdav::push_vault_with(c, job.vault, job.in_flight, every)
            .await
            .context("cold push")
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        loadgen::protocols::webdav::pull_vault(&self.client, dir, self.depth)
            .await
            .context("cold pull")
    }

    async fn resync(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        loadgen::protocols::webdav::resync(&self.client, dir, self.depth)
            .await
            .context("idle resync")
    }

    async fn edit_propagation(
        &mut self,
        job: &EditJob<'_>,
        m: &mut Metrics,
    ) -> anyhow::Result<EditReport> {
        polled_edit_phase(&self.client, job, self.opts.poll_ms, m).await
    }

    async fn rename(&mut self, from: &str, to: &str, _m: &mut Metrics) -> anyhow::Result<u64> {
        let r = loadgen::protocols::webdav::rename(&self.client, from, to)
            .await
            .context("folder rename")?;
        if self.load_folder == from {
            self.load_folder = to.to_owned();
        }
        Ok(r.requests)
    }

    async fn propagate_rename(
        &mut self,
        from: &str,
        to: &str,
        pull_dir: &Path,
    ) -> anyhow::Result<u64> {
        // B notices by walking (there is no feed) and moves its copy.
        let rec = Recorder::new(false);
        let listing = loadgen::protocols::webdav::walk(&self.client, &rec, "", self.depth)
            .await
            .context("folder rename: B's walk")?;
        let seen = listing.dirs().any(|(p, _)| *p == to) && !listing.entries.contains_key(from);
        move_walked_copy(seen, from, to, pull_dir)?;
        Ok(rec.snapshot().requests())
    }

    async fn route_step(&mut self, step: RouteStep<'_>) -> anyhow::Result<StepReport> {
        let cfg = step.config(&DavRoute::ALL, "WebDAV route")?;
        let cfg = cfg.in_folder(self.load_folder.clone());
        let rep = loadgen::protocols::webdav::run_dav_route_load(&self.client, &cfg).await?;
        Ok(StepReport::of(rep))
    }
}

/// B polls the note's folder with PROPFIND Depth 1 (one request a poll); A PUTs the note; B
/// GETs it.
impl PolledEdit for DavClient {
    type Listed = DavEntry;

    async fn listed(&self, rec: &Recorder, rel: &str) -> anyhow::Result<DavEntry> {
        self.propfind(rec, folder_of(rel), Depth::One)
            .await
            .context("edit propagation: B's listing")?
            .into_iter()
            .find(|e| self.rel(&e.path) == Some(rel))
            .with_context(|| format!("edit propagation: {rel} not listed"))
    }

    fn poll(
        &self,
        rel: &str,
        before: DavEntry,
        want: u64,
        interval: Duration,
        deadline: Instant,
    ) -> tokio::task::JoinHandle<anyhow::Result<Polled>> {
        let (poller, f, r) = (self.clone(), folder_of(rel).to_owned(), rel.to_owned());
        tokio::spawn(async move {
            let seen = loadgen::protocols::webdav::poll_until_changed(
                &poller,
                &f,
                &r,
                Some(&before),
                Some(want),
                interval,
                deadline,
            )
            .await?;
            Ok(Polled {
                polls: seen.polls,
                requests: seen.polls,
                size: None,
            })
        })
    }

    async fn write(&self, rec: &Recorder, rel: &str, body: bytes::Bytes) -> anyhow::Result<()> {
        self.put(rec, rel, body)
            .await
            .context("edit propagation: A's PUT")?;
        Ok(())
    }

    async fn read(
        &self,
        rec: &Recorder,
        rel: &str,
        _size: Option<u64>,
    ) -> anyhow::Result<bytes::Bytes> {
        self.get(rec, rel)
            .await
            .context("edit propagation: B's GET")
    }
}

/// The folder of vault path `rel` ("" at the root).
fn folder_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

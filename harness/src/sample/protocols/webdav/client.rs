//! The WebDAV side of the protocol seam (`protocol = "webdav"`, against a WebDAV preset
//! target), shaped like Remotely Save's sync: cold push (MKCOL + PUT), cold pull (PROPFIND
//! walk + GET), idle resync (a walk that finds nothing to do), edit propagation (B polls with
//! PROPFIND at the scenario's interval: the delay is poll-bounded and the keys say so), folder
//! rename (MOVE, then B's walk), route load over the WebDAV routes. A and B are two clients
//! of the same server: WebDAV has no devices.
//!
//! WebDAV-only keys are named for what they count (`edit.poll_interval_ms`, `edit.polls`);
//! WebDAV servers have no counters endpoint, so their cost comes from `/proc` alone.

use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::TransferReport;
use loadgen::protocols::webdav::client::Recorder;
use loadgen::protocols::webdav::{DavClient, DavRoute, DavRouteLoadConfig, Depth};
use reports::schema::Better;
use scenarios::scenario::WebdavOptions;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{EditJob, EditReport, StepReport, SyncClient, largest_folder};
use crate::sample::target::Server;

/// How long B waits for one edit before the sample fails.
const EDIT_DEADLINE: Duration = Duration::from_secs(30);

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
    fn protocol(&self) -> &'static str {
        "webdav"
    }

    fn routes(&self) -> Vec<&'static str> {
        DavRoute::ALL.iter().map(|r| r.name()).collect()
    }

    async fn push(
        &mut self,
        vault: &Path,
        in_flight: usize,
        checkpoint_every: usize,
        _m: &mut Metrics,
    ) -> anyhow::Result<TransferReport> {
        loadgen::protocols::webdav::push_vault_with(
            &self.client,
            vault,
            in_flight,
            checkpoint_every,
        )
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
        let (r, polls) = edit_propagation(&self.client, job, &self.opts).await?;
        // The delay is poll-bounded: it cannot resolve below this interval.
        m.exact("edit.poll_interval_ms", self.opts.poll_ms as f64, "ms");
        m.timing("edit.polls", polls as f64, "count", Better::Lower);
        Ok(r)
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
        if !seen {
            bail!("folder rename: B's walk does not show {from:?} renamed to {to:?}");
        }
        std::fs::rename(pull_dir.join(from), pull_dir.join(to))
            .with_context(|| format!("folder rename: moving B's copy of {from}"))?;
        Ok(rec.snapshot().requests())
    }

    async fn route_step(
        &mut self,
        route: &str,
        in_flight: usize,
        duration: Duration,
        max_requests: u64,
        seed: u64,
    ) -> anyhow::Result<StepReport> {
        let r = DavRoute::ALL
            .into_iter()
            .find(|r| r.name() == route)
            .with_context(|| format!("route load: unknown WebDAV route {route:?}"))?;
        let cfg = DavRouteLoadConfig {
            route: r,
            mode: loadgen::Mode::Closed { in_flight },
            duration,
            max_requests,
            seed,
            folder: self.load_folder.clone(),
        };
        let rep = loadgen::protocols::webdav::run_dav_route_load(&self.client, &cfg).await?;
        Ok(StepReport {
            requests: rep.requests,
            throughput_per_s: rep.throughput_per_s,
            stats: rep.stats,
        })
    }
}

/// A edits a note (appending a line, so its size changes: nginx sends no ETag and every
/// server's last-modified has one-second resolution); B polls the note's folder with
/// PROPFIND Depth 1 every `poll_ms` until the listing shows the change, then GETs the note.
/// The delay is from A's PUT to B's copy on disk. Returns the report (its requests: every
/// listing, PUT, GET and poll) and the polls.
async fn edit_propagation(
    client: &DavClient,
    job: &EditJob<'_>,
    opts: &WebdavOptions,
) -> anyhow::Result<(EditReport, u64)> {
    let rel = job.rel;
    let folder = rel.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let mut body = std::fs::read(job.plan.vault_dir.join(rel))
        .with_context(|| format!("reading {rel} for editing"))?;
    let interval = Duration::from_millis(opts.poll_ms);
    let rec = Recorder::new(false);
    let (mut lat, mut polls) = (Vec::with_capacity(job.rounds), 0u64);
    for round in 0..job.rounds {
        let before = client
            .propfind(&rec, &folder, Depth::One)
            .await
            .context("edit propagation: B's listing")?
            .into_iter()
            .find(|e| client.rel(&e.path) == Some(rel))
            .with_context(|| format!("edit propagation: {rel} not listed"))?;
        body.extend_from_slice(
            format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
        );
        let want = body.len() as u64;
        let (poller, f, r, start) = (
            client.clone(),
            folder.clone(),
            rel.to_owned(),
            Instant::now(),
        );
        let waiter = tokio::spawn(async move {
            loadgen::protocols::webdav::poll_until_changed(
                &poller,
                &f,
                &r,
                Some(&before),
                Some(want),
                interval,
                start + EDIT_DEADLINE,
            )
            .await
        });
        let t0 = Instant::now();
        client
            .put(&rec, rel, body.clone().into())
            .await
            .context("edit propagation: A's PUT")?;
        let seen = waiter
            .await
            .context("edit propagation: B's poller")?
            .with_context(|| format!("edit propagation: round {round}"))?;
        polls += seen.polls;
        let got = client
            .get(&rec, rel)
            .await
            .context("edit propagation: B's GET")?;
        std::fs::write(job.pull_dir.join(rel), &got)
            .with_context(|| format!("edit propagation: writing B's copy of {rel}"))?;
        lat.push(crate::sample::plan::ms(t0.elapsed()));
        if got.as_ref() != body.as_slice() {
            bail!("edit propagation: B's copy of {rel} differs from A's after round {round}");
        }
    }
    let report = EditReport {
        latencies_ms: lat,
        requests: rec.snapshot().requests() + polls,
    };
    Ok((report, polls))
}

//! The S3 side of the protocol seam (`protocol = "s3"`), shaped like Remotely Save's S3
//! backend: cold push (PutObject + HeadObject per file), cold pull (a ListObjectsV2 walk +
//! GetObject), idle resync (a walk compared with the pull's record, with a HeadObject per
//! object under the plugin's "accurate mtime"), edit propagation (B polls the note's folder
//! with ListObjectsV2 at the scenario's interval: the delay is poll-bounded and the keys say
//! so), folder rename (CopyObject + DeleteObject per object, then B's walk), route load over
//! the S3 routes. A and B are two clients of the same bucket: S3 has no devices. The bucket
//! is created before the first phase, outside every phase's window.
//!
//! S3-only keys are named for what they count (`edit.poll_interval_ms`, `edit.polls`,
//! `folder_rename.objects_moved`); S3 servers have no counters endpoint, so their cost comes
//! from `/proc` alone.

use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::TransferReport;
use loadgen::protocols::s3::client::Recorder;
use loadgen::protocols::s3::{Listing, PushOpts, S3Client, S3Route, S3RouteLoadConfig};
use reports::schema::Better;
use scenarios::scenario::S3Options;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{EditJob, EditReport, StepReport, SyncClient, largest_folder};
use crate::sample::target::{Server, TargetSpec};

/// How long B waits for one edit before the sample fails.
const EDIT_DEADLINE: Duration = Duration::from_secs(30);

/// An S3 client of `server` for `spec`: its bucket, its credentials, its listing bounds.
pub fn client_for(spec: &TargetSpec, server: &Server) -> anyhow::Result<S3Client> {
    let target = loadgen::Target::parse(&server.url(), false)?;
    let def = &spec.def;
    let bounds = loadgen::protocols::s3::LIST_DEFAULT.with(def.feed.unwrap_or_default());
    Ok(S3Client::new(
        target,
        loadgen::protocols::s3::credentials_of(def),
        &loadgen::protocols::s3::bucket_of(def),
    )
    .with_bounds(bounds))
}

/// An S3 client of a target, with the scenario's `[s3]` options and the record of the last
/// pull (what B saw, which its resync compares with).
pub struct S3SyncClient {
    client: S3Client,
    opts: S3Options,
    record: Listing,
    /// The folder the route load lists: the largest, under its new name once renamed.
    load_folder: String,
}

impl S3SyncClient {
    /// A client of `server`, its bucket created (not timed: before the first phase).
    pub async fn connect(plan: &SamplePlan, server: &Server) -> anyhow::Result<S3SyncClient> {
        let client = client_for(&plan.target, server)?;
        client
            .create_bucket(&Recorder::new(false))
            .await
            .with_context(|| format!("creating bucket {:?}", client.bucket()))?;
        Ok(S3SyncClient {
            client,
            opts: plan.scenario.s3.clone().unwrap_or_default(),
            record: Listing::default(),
            load_folder: largest_folder(&plan.vault_dir)?.unwrap_or_default(),
        })
    }
}

/// The listing prefix of `rel`'s folder (`Wiki/` for `Wiki/a.md`, "" at the root).
fn folder_prefix(rel: &str) -> String {
    rel.rsplit_once('/')
        .map_or(String::new(), |(d, _)| format!("{d}/"))
}

impl SyncClient for S3SyncClient {
    fn protocol(&self) -> &'static str {
        "s3"
    }

    fn routes(&self) -> Vec<&'static str> {
        S3Route::ALL.iter().map(|r| r.name()).collect()
    }

    async fn push(
        &mut self,
        vault: &Path,
        in_flight: usize,
        checkpoint_every: usize,
        _m: &mut Metrics,
    ) -> anyhow::Result<TransferReport> {
        let opts = PushOpts {
            in_flight,
            checkpoint_every,
            folder_objects: self.opts.folder_objects,
        };
        loadgen::protocols::s3::push_vault(&self.client, vault, opts)
            .await
            .context("cold push")
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (r, listing) = loadgen::protocols::s3::pull_vault(&self.client, dir)
            .await
            .context("cold pull")?;
        self.record = listing;
        Ok(r)
    }

    async fn resync(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        loadgen::protocols::s3::resync(&self.client, dir, &self.record, self.opts.accurate_mtime)
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

    async fn rename(&mut self, from: &str, to: &str, m: &mut Metrics) -> anyhow::Result<u64> {
        let r = loadgen::protocols::s3::rename(&self.client, from, to)
            .await
            .context("folder rename")?;
        m.exact("folder_rename.objects_moved", r.files as f64, "count");
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
        let listing = loadgen::protocols::s3::walk(&self.client, &rec, "")
            .await
            .context("folder rename: B's walk")?;
        let (old, new) = (format!("{from}/"), format!("{to}/"));
        let seen = listing.objects.keys().any(|k| k.starts_with(&new))
            && !listing.objects.keys().any(|k| k.starts_with(&old));
        if !seen {
            bail!("folder rename: B's walk does not show {from:?} renamed to {to:?}");
        }
        std::fs::rename(pull_dir.join(from), pull_dir.join(to))
            .with_context(|| format!("folder rename: moving B's copy of {from}"))?;
        self.record = listing;
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
        let r = S3Route::ALL
            .into_iter()
            .find(|r| r.name() == route)
            .with_context(|| format!("route load: unknown S3 route {route:?}"))?;
        let cfg = S3RouteLoadConfig {
            route: r,
            mode: loadgen::Mode::Closed { in_flight },
            duration,
            max_requests,
            seed,
            folder: self.load_folder.clone(),
        };
        let rep = loadgen::protocols::s3::run_s3_route_load(&self.client, &cfg).await?;
        Ok(StepReport {
            requests: rep.requests,
            throughput_per_s: rep.throughput_per_s,
            stats: rep.stats,
        })
    }
}

/// A edits a note (appending a line, so its size changes); B lists the note's folder every
/// `poll_ms` until the listing shows the change, then GETs the note. A writes as the plugin
/// does, PutObject then HeadObject. The delay is from A's PUT to B's copy on disk. Returns
/// the report (its requests: every listing, PUT, HEAD, GET and poll) and the polls.
async fn edit_propagation(
    client: &S3Client,
    job: &EditJob<'_>,
    opts: &S3Options,
) -> anyhow::Result<(EditReport, u64)> {
    let rel = job.rel;
    let prefix = folder_prefix(rel);
    let mut body = std::fs::read(job.plan.vault_dir.join(rel))
        .with_context(|| format!("reading {rel} for editing"))?;
    let interval = Duration::from_millis(opts.poll_ms);
    let rec = Recorder::new(false);
    let (mut lat, mut polls, mut poll_requests) = (Vec::with_capacity(job.rounds), 0u64, 0u64);
    for round in 0..job.rounds {
        let before = loadgen::protocols::s3::walk(client, &rec, &prefix)
            .await
            .context("edit propagation: B's listing")?
            .objects
            .remove(rel)
            .with_context(|| format!("edit propagation: {rel} not listed"))?;
        body.extend_from_slice(
            format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
        );
        let want = body.len() as u64;
        let (poller, p, r, start) = (
            client.clone(),
            prefix.clone(),
            rel.to_owned(),
            Instant::now(),
        );
        let waiter = tokio::spawn(async move {
            loadgen::protocols::s3::poll_until_changed(
                &poller,
                &p,
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
            .put(&rec, rel, body.clone().into(), 0)
            .await
            .context("edit propagation: A's PutObject")?;
        client
            .head(&rec, rel)
            .await
            .context("edit propagation: A's HeadObject")?;
        let seen = waiter
            .await
            .context("edit propagation: B's poller")?
            .with_context(|| format!("edit propagation: round {round}"))?;
        polls += seen.polls;
        poll_requests += seen.requests;
        let got = client
            .get_sized(&rec, rel, Some(seen.object.size))
            .await
            .context("edit propagation: B's GetObject")?;
        std::fs::write(job.pull_dir.join(rel), &got)
            .with_context(|| format!("edit propagation: writing B's copy of {rel}"))?;
        lat.push(crate::sample::plan::ms(t0.elapsed()));
        if got.as_ref() != body.as_slice() {
            bail!("edit propagation: B's copy of {rel} differs from A's after round {round}");
        }
    }
    let report = EditReport {
        latencies_ms: lat,
        requests: rec.snapshot().requests() + poll_requests,
    };
    Ok((report, polls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edited_notes_folder_is_its_listing_prefix() {
        assert_eq!(folder_prefix("Wiki/a.md"), "Wiki/");
        assert_eq!(folder_prefix("a/b/c.md"), "a/b/");
        assert_eq!(folder_prefix("top.md"), "");
    }
}

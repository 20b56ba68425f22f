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

use anyhow::Context;
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::TransferReport;
use loadgen::protocols::s3::client::Recorder;
use loadgen::protocols::s3::crypt::Cipher;
use loadgen::protocols::s3::{Listing, Object, PushOpts, S3Client, S3Route};
use scenarios::scenario::S3Options;

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{
    EditJob, EditReport, Polled, PolledEdit, PushJob, RouteStep, StepReport, SyncClient,
    largest_folder, move_walked_copy, polled_edit_phase,
};
use crate::sample::target::{Server, TargetSpec};

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

/// `client` encrypting names and bodies as the scenario's `[s3] encryption` asks, its salts
/// drawn from the sample's seed; `client` itself when the scenario asks for none.
pub fn as_scenario_asks(client: S3Client, plan: &SamplePlan) -> S3Client {
    let opts = plan.scenario.s3.as_ref();
    match opts.and_then(|o| o.encryption.as_ref()) {
        Some(_) => {
            let password = opts
                .and_then(|o| o.password.as_deref())
                .unwrap_or(DEFAULT_PASSWORD);
            client.with_cipher(Cipher::new(password, plan.seed))
        }
        None => client,
    }
}

/// The password of an encrypted scenario that names none.
pub const DEFAULT_PASSWORD: &str = "vaultbench";

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
        let client = as_scenario_asks(client_for(&plan.target, server)?, plan);
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
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::s3::SPEC
    }

    async fn push(&mut self, job: PushJob<'_>, _m: &mut Metrics) -> anyhow::Result<TransferReport> {
        let opts = PushOpts {
            in_flight: job.in_flight,
            checkpoint_every: job.checkpoint_every,
            folder_objects: self.opts.folder_objects,
        };
        loadgen::protocols::s3::push_vault(&self.client, job.vault, opts)
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
        polled_edit_phase(&self.client, job, self.opts.poll_ms, m).await
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
        move_walked_copy(seen, from, to, pull_dir)?;
        self.record = listing;
        Ok(rec.snapshot().requests())
    }

    async fn route_step(&mut self, step: RouteStep<'_>) -> anyhow::Result<StepReport> {
        let cfg = step.config(&S3Route::ALL, "S3 route")?;
        let cfg = cfg.in_folder(self.load_folder.clone());
        let rep = loadgen::protocols::s3::run_s3_route_load(&self.client, &cfg).await?;
        Ok(StepReport::of(rep))
    }
}

/// B polls the note's folder with ListObjectsV2; A writes as the plugin does, PutObject then
/// HeadObject; B reads the note with GetObject.
impl PolledEdit for S3Client {
    type Listed = Object;

    async fn listed(&self, rec: &Recorder, rel: &str) -> anyhow::Result<Object> {
        loadgen::protocols::s3::walk(self, rec, &folder_prefix(rel))
            .await
            .context("edit propagation: B's listing")?
            .objects
            .remove(rel)
            .with_context(|| format!("edit propagation: {rel} not listed"))
    }

    fn poll(
        &self,
        rel: &str,
        before: Object,
        want: u64,
        interval: Duration,
        deadline: Instant,
    ) -> tokio::task::JoinHandle<anyhow::Result<Polled>> {
        let (poller, p, r) = (self.clone(), folder_prefix(rel), rel.to_owned());
        tokio::spawn(async move {
            let seen = loadgen::protocols::s3::poll_until_changed(
                &poller,
                &p,
                &r,
                Some(&before),
                Some(want),
                interval,
                deadline,
            )
            .await?;
            Ok(Polled {
                polls: seen.polls,
                requests: seen.requests,
                size: Some(seen.object.size),
            })
        })
    }

    async fn write(&self, rec: &Recorder, rel: &str, body: bytes::Bytes) -> anyhow::Result<()> {
        self.put_file(rec, rel, body, 0)
            .await
            .context("edit propagation: A's PutObject")?;
        self.head(rec, &self.key_of(rel))
            .await
            .context("edit propagation: A's HeadObject")?;
        Ok(())
    }

    async fn read(
        &self,
        rec: &Recorder,
        rel: &str,
        size: Option<u64>,
    ) -> anyhow::Result<bytes::Bytes> {
        self.get_file(rec, &self.key_of(rel), size)
            .await
            .context("edit propagation: B's GetObject")
    }
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

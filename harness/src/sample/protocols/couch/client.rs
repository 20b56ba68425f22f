//! The CouchDB side of the protocol seam (`protocol = "couchdb"`), shaped like Self-hosted
//! LiveSync: A writes the vault as LiveSync's documents and replicates them (`_revs_diff`,
//! `_bulk_docs`), B replicates the database back (`_changes`, `_bulk_get`, `_all_docs` by keys)
//! and assembles the files; edit propagation is timed until B's long-polled `_changes` has
//! delivered the edit and B has the bytes on disk; the folder rename is new metadata
//! documents plus deleted ones; the route load drives the replicator's main routes.
//!
//! CouchDB-only keys count what a LiveSync user's database holds: `cold_push.docs_written`,
//! `cold_push.chunks_written`, `cold_push.chunks_deduplicated` (chunk references that sent
//! nothing), `folder_rename.revisions` (documents that got a new revision). CouchDB servers
//! here have no counters endpoint, so their cost comes from `/proc` alone.

use anyhow::Context;
use std::path::Path;
use std::time::{Duration, Instant};

use contract::key::PhaseKey;
use loadgen::TransferReport;
use loadgen::http::client::Recorder;
use loadgen::protocols::couch::{
    CouchClient, CouchRoute, CouchRouteLoadConfig, Replica, Writer, Written,
};

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::sync_client::{EditJob, EditReport, StepReport, SyncClient};
use crate::sample::target::Server;

/// How long B waits for one edit before the sample fails.
const EDIT_DEADLINE: Duration = Duration::from_secs(30);
/// The database a target's root names when it names none.
pub const DEFAULT_DB: &str = "vaultbench";

/// The database a target definition names: the first segment of its root (`/vaultbench/`),
/// else [`DEFAULT_DB`].
pub fn db_of(root: &str) -> &str {
    root.split('/')
        .find(|s| !s.is_empty())
        .unwrap_or(DEFAULT_DB)
}

/// Device A (the writer) and device B (the replica) of one CouchDB database.
pub struct CouchSyncClient {
    client: CouchClient,
    a: Writer,
    b: Replica,
    /// What A's cold push wrote (its keys are written with the transfer's).
    pushed: Written,
}

impl CouchSyncClient {
    /// A client of `server`'s database with the target's credentials.
    pub fn connect(plan: &SamplePlan, server: &Server) -> anyhow::Result<CouchSyncClient> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        let def = &plan.target.def;
        let client = CouchClient::new(target, db_of(def.root()), def.auth.as_ref())?
            .with_feed_bounds(
                loadgen::protocols::couch::FEED_DEFAULT.with(def.feed.unwrap_or_default()),
            );
        Ok(CouchSyncClient {
            client,
            a: Writer::new("vaultbench-a"),
            b: Replica::new("vaultbench-b"),
            pushed: Written::default(),
        })
    }
}

impl SyncClient for CouchSyncClient {
    fn protocol(&self) -> &'static str {
        "couchdb"
    }

    fn routes(&self) -> Vec<&'static str> {
        CouchRoute::ALL.iter().map(|r| r.name()).collect()
    }

    async fn push(
        &mut self,
        vault: &Path,
        _in_flight: usize,
        checkpoint_every: usize,
        _m: &mut Metrics,
    ) -> anyhow::Result<TransferReport> {
        // The replicator sends one batch at a time (LiveSync's batch_size), whatever the
        // scenario's in-flight figure.
        let (r, w) = self
            .a
            .push_vault_with(&self.client, vault, checkpoint_every)
            .await
            .context("cold push")?;
        self.pushed = w;
        Ok(r)
    }

    fn transfer_keys(&self, p: &str, r: &TransferReport, m: &mut Metrics) {
        m.exact(
            PhaseKey::new(p, "chunks_transferred"),
            r.chunks_transferred as f64,
            "count",
        );
        if p == "cold_push" {
            let w = self.pushed;
            m.exact(PhaseKey::new(p, "docs_written"), w.docs as f64, "count");
            m.exact(PhaseKey::new(p, "chunks_written"), w.chunks as f64, "count");
            m.exact(
                PhaseKey::new(p, "chunks_deduplicated"),
                w.chunks_deduplicated as f64,
                "count",
            );
        }
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        self.b
            .pull_vault(&self.client, dir)
            .await
            .context("cold pull")
    }

    async fn resync(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        self.b
            .resync(&self.client, dir)
            .await
            .context("idle resync")
    }

    async fn edit_propagation(
        &mut self,
        job: &EditJob<'_>,
        m: &mut Metrics,
    ) -> anyhow::Result<EditReport> {
        let rel = job.rel.to_owned();
        let mut body = std::fs::read(job.plan.vault_dir.join(&rel))
            .with_context(|| format!("reading {rel} for editing"))?;
        let (rec_a, rec_b) = (Recorder::new(false), Recorder::new(false));
        let mut lat = Vec::with_capacity(job.rounds);
        let mut revisions = 0u64;
        for round in 0..job.rounds {
            body.extend_from_slice(
                format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
            );
            let want = body.len() as u64;
            // B waits on its long poll first; A's write then wakes it.
            let mut replica = std::mem::replace(&mut self.b, Replica::new("vaultbench-b"));
            let (client, dir, r) = (self.client.clone(), job.pull_dir.to_path_buf(), rel.clone());
            let rec = rec_b.clone();
            let t0 = Instant::now();
            let waiter = tokio::spawn(async move {
                let until = Instant::now() + EDIT_DEADLINE;
                let done = move |b: &Replica| b.file_of(&r).and_then(|f| f.size) == Some(want);
                let res = replica.wait_for(&client, &rec, &dir, until, &done).await;
                (replica, res)
            });
            let w = self
                .a
                .push_file(&self.client, &rec_a, &rel, &body)
                .await
                .context("edit propagation: A's write")?;
            revisions += w.revisions;
            let (replica, res) = waiter.await.context("edit propagation: B's replication")?;
            self.b = replica;
            res.with_context(|| format!("edit propagation: round {round}"))?;
            lat.push(crate::sample::plan::ms(t0.elapsed()));
            let got = std::fs::read(job.pull_dir.join(&rel))
                .with_context(|| format!("edit propagation: reading B's copy of {rel}"))?;
            if got != body {
                anyhow::bail!(
                    "edit propagation: B's copy of {rel} differs from A's after round {round}"
                );
            }
        }
        m.exact("edit.revisions", revisions as f64, "count");
        Ok(EditReport {
            latencies_ms: lat,
            requests: rec_a.snapshot().requests() + rec_b.snapshot().requests(),
        })
    }

    async fn rename(&mut self, from: &str, to: &str, m: &mut Metrics) -> anyhow::Result<u64> {
        let rec = Recorder::new(false);
        let w = self
            .a
            .rename(&self.client, &rec, from, to)
            .await
            .context("folder rename")?;
        m.exact(
            PhaseKey::new("folder_rename", "revisions"),
            w.revisions as f64,
            "count",
        );
        m.exact(
            PhaseKey::new("folder_rename", "docs_written"),
            w.docs as f64,
            "count",
        );
        Ok(rec.snapshot().requests())
    }

    async fn propagate_rename(
        &mut self,
        _from: &str,
        to: &str,
        pull_dir: &Path,
    ) -> anyhow::Result<u64> {
        let rec = Recorder::new(false);
        let prefix = format!("{to}/");
        let until = Instant::now() + EDIT_DEADLINE;
        let done = move |b: &Replica| b.has_path_under(&prefix);
        self.b
            .wait_for(&self.client, &rec, pull_dir, until, &done)
            .await
            .context("folder rename: B's replication")?;
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
        let r = CouchRoute::parse(route)
            .with_context(|| format!("route load: unknown CouchDB route {route:?}"))?;
        let cfg = CouchRouteLoadConfig {
            route: r,
            mode: loadgen::Mode::Closed { in_flight },
            duration,
            max_requests,
            seed,
        };
        let rep = loadgen::protocols::couch::run_couch_route_load(&self.client, &cfg).await?;
        Ok(StepReport {
            requests: rep.requests,
            throughput_per_s: rep.throughput_per_s,
            stats: rep.stats,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_database_is_the_roots_first_segment() {
        assert_eq!(super::db_of("/"), "vaultbench");
        assert_eq!(super::db_of("/notes/"), "notes");
    }
}

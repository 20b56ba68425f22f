//! S3's paired flow (`ab --paired`): cold push and cold pull object by object, each arm a
//! client of its own server's bucket; see `sample::paired` for the alternation.

use anyhow::{Context, bail};
use std::time::Instant;

use loadgen::protocols::s3::S3Client;
use loadgen::protocols::s3::client::Recorder;
use reports::schema::PairSeries;

use super::client::{as_scenario_asks, client_for};
use crate::sample::pairs::{
    PairedJob, PushPullPairs, Turns, file_series, in_turn, lists_vault, pulled, push_and_pull,
    pushed, vault_file, vault_files, write_pulled,
};
use crate::sample::plan::ms;

/// The S3 flow: cold push and cold pull object by object (S3 has no devices: each arm is a
/// client of its own server); edit propagation (poll-bounded there) and route loads are named
/// as skipped.
pub(super) async fn drive_s3(job: PairedJob<'_>) -> anyhow::Result<()> {
    let clients = [
        as_scenario_asks(client_for(job.specs[0], &job.a.server)?, job.plan),
        as_scenario_asks(client_for(job.specs[1], &job.b.server)?, job.plan),
    ];
    let rec = Recorder::new(false);
    for (i, c) in clients.iter().enumerate() {
        c.create_bucket(&rec)
            .await
            .with_context(|| format!("arm {}: creating bucket {:?}", ["A", "B"][i], c.bucket()))?;
    }
    push_and_pull(job, &Buckets(clients)).await
}

/// Each arm's client of its own bucket.
struct Buckets([S3Client; 2]);

impl PushPullPairs for Buckets {
    /// An S3 cold push, object by object: each file is written to both arms in turn as the
    /// plugin writes it (PutObject, then HeadObject), the first arm alternating ABBA.
    async fn push_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries> {
        let (plan, a_first) = (t.plan, t.a_first);
        let clients = &self.0;
        let files = vault_files(&plan.vault_dir)?;
        let rec = Recorder::new(false);
        let mut s = file_series(files.len());
        let mut bytes = 0u64;
        for (i, key) in files.iter().enumerate() {
            let body = vault_file(plan, key)?;
            bytes += body.len() as u64;
            let (ta, tb) = in_turn(i, a_first, async |k: usize| {
                let t = Instant::now();
                clients[k]
                    .put_file(&rec, key, body.clone(), 0)
                    .await
                    .with_context(|| format!("PutObject {key}"))?;
                clients[k]
                    .head(&rec, &clients[k].key_of(key))
                    .await
                    .with_context(|| format!("HeadObject {key}"))?;
                Ok(ms(t.elapsed()))
            })
            .await?;
            s.a.push(ta);
            s.b.push(tb);
        }
        pushed(&s, files.len(), bytes, t.a, t.b);
        Ok(s)
    }

    /// An S3 cold pull, object by object: each arm's bucket is listed first (not timed) and
    /// must list the vault's files; then each object is fetched from both arms in turn (ABBA)
    /// into each arm's own copy, which must end byte-identical to the vault.
    async fn pull_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries> {
        let (plan, a_first, pull_dirs) = (t.plan, t.a_first, t.pull_dirs);
        let clients = &self.0;
        let files = vault_files(&plan.vault_dir)?;
        let rec = Recorder::new(false);
        let mut sizes = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let arm = ["A", "B"][i];
            let listing = loadgen::protocols::s3::walk(c, &rec, "")
                .await
                .with_context(|| format!("arm {arm}: cold pull: the listing"))?;
            let listed: Vec<&String> = listing.files().map(|(k, _)| k).collect();
            if !lists_vault(&listed, &files) {
                bail!(
                    "arm {arm}: cold pull: the bucket lists {} objects where the vault has {} files",
                    listed.len(),
                    files.len()
                );
            }
            sizes = listing.files().map(|(_, o)| o.size).collect();
            std::fs::create_dir_all(&pull_dirs[i])
                .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
        }
        let mut s = file_series(files.len());
        for (i, key) in files.iter().enumerate() {
            let size = sizes.get(i).copied();
            let (ta, tb) = in_turn(i, a_first, async |k: usize| {
                let t = Instant::now();
                let body = clients[k]
                    .get_file(&rec, &clients[k].key_of(key), size)
                    .await
                    .with_context(|| format!("GetObject {key}"))?;
                let took = ms(t.elapsed());
                // `key` is the vault's own path (checked equal above).
                write_pulled(&pull_dirs[k], key, &body)?;
                Ok(took)
            })
            .await?;
            s.a.push(ta);
            s.b.push(tb);
        }
        pulled(plan, pull_dirs, &s, t.a, t.b)?;
        Ok(s)
    }
}

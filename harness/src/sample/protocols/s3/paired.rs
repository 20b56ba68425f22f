//! S3's paired flow (`ab --paired`): cold push and cold pull object by object, each arm a
//! client of its own server's bucket; see `sample::paired` for the alternation.

use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Instant;

use loadgen::protocols::s3::S3Client;
use loadgen::protocols::s3::client::Recorder;
use reports::schema::{Better, PairAggregate, PairSeries};
use scenarios::scenario::Phase;

use super::client::client_for;
use crate::sample::pairs::{Arm, COLD_PULL_WALL, COLD_PUSH_WALL, PairedJob, pulled, vault_files};
use crate::sample::plan::{SamplePlan, ms};

/// The S3 flow: cold push and cold pull object by object (S3 has no devices: each arm is a
/// client of its own server); edit propagation (poll-bounded there) and route loads are named
/// as skipped.
pub(super) async fn drive_s3(job: PairedJob<'_>) -> anyhow::Result<()> {
    let PairedJob {
        plan,
        a_first,
        specs,
        dirs,
        a,
        b,
        pairs,
        skipped,
    } = job;
    let clients = [
        client_for(specs[0], &a.server)?,
        client_for(specs[1], &b.server)?,
    ];
    let rec = Recorder::new(false);
    for (i, c) in clients.iter().enumerate() {
        c.create_bucket(&rec)
            .await
            .with_context(|| format!("arm {}: creating bucket {:?}", ["A", "B"][i], c.bucket()))?;
    }
    let pull_dirs = dirs.map(|d| d.join("pull-b"));
    for phase in &plan.scenario.phases {
        let logs = [a.server.log.read(), b.server.log.read()];
        let step = async {
            match phase {
                Phase::ColdStart => {}
                Phase::ColdPush { .. } => {
                    let s = push_pairs(plan, a_first, &clients, a, b).await?;
                    pairs.insert(COLD_PUSH_WALL.to_owned(), s);
                }
                Phase::ColdPull => {
                    let s = pull_pairs(plan, a_first, &clients, &pull_dirs, a, b).await?;
                    pairs.insert(COLD_PULL_WALL.to_owned(), s);
                }
                other => skipped.push(other.name().to_owned()),
            }
            Ok::<(), anyhow::Error>(())
        };
        crate::sample::phases::within_phase(plan, phase.name(), step).await?;
        crate::sample::pairs::log_window(phase, logs, skipped, a, b);
    }
    Ok(())
}

/// Runs `one` on arm A and arm B in the order of pair `i` (ABBA from `a_first`).
async fn in_turn<F>(i: usize, a_first: bool, mut one: F) -> anyhow::Result<(f64, f64)>
where
    F: AsyncFnMut(usize) -> anyhow::Result<f64>,
{
    if loadgen::a_first_in(i as u64) == a_first {
        let x = one(0).await.context("arm A")?;
        Ok((x, one(1).await.context("arm B")?))
    } else {
        let y = one(1).await.context("arm B")?;
        Ok((one(0).await.context("arm A")?, y))
    }
}

/// An S3 cold push, object by object: each file is written to both arms in turn as the
/// plugin writes it (PutObject, then HeadObject), the first arm alternating ABBA.
async fn push_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[S3Client; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let rec = Recorder::new(false);
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    let mut bytes = 0u64;
    for (i, key) in files.iter().enumerate() {
        let body = bytes::Bytes::from(
            std::fs::read(plan.vault_dir.join(key)).with_context(|| format!("reading {key}"))?,
        );
        bytes += body.len() as u64;
        let (ta, tb) = in_turn(i, a_first, async |k: usize| {
            let t = Instant::now();
            clients[k]
                .put(&rec, key, body.clone(), 0)
                .await
                .with_context(|| format!("PutObject {key}"))?;
            clients[k]
                .head(&rec, key)
                .await
                .with_context(|| format!("HeadObject {key}"))?;
            Ok(ms(t.elapsed()))
        })
        .await?;
        s.a.push(ta);
        s.b.push(tb);
    }
    for (arm, series) in [(&mut *a, &s.a), (&mut *b, &s.b)] {
        arm.m
            .timing(COLD_PUSH_WALL, series.iter().sum(), "ms", Better::Lower);
        arm.m.exact("cold_push.files", files.len() as f64, "count");
        arm.m.exact("cold_push.bytes", bytes as f64, "bytes");
    }
    Ok(s)
}

/// An S3 cold pull, object by object: each arm's bucket is listed first (not timed) and must
/// list the vault's files; then each object is fetched from both arms in turn (ABBA) into
/// each arm's own copy, which must end byte-identical to the vault.
async fn pull_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[S3Client; 2],
    pull_dirs: &[PathBuf; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let rec = Recorder::new(false);
    let mut sizes = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let arm = ["A", "B"][i];
        let listing = loadgen::protocols::s3::walk(c, &rec, "")
            .await
            .with_context(|| format!("arm {arm}: cold pull: the listing"))?;
        let listed: Vec<&String> = listing.files().map(|(k, _)| k).collect();
        if listed.len() != files.len() || listed.iter().zip(&files).any(|(l, f)| *l != f) {
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
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    for (i, key) in files.iter().enumerate() {
        let size = sizes.get(i).copied();
        let (ta, tb) = in_turn(i, a_first, async |k: usize| {
            let t = Instant::now();
            let body = clients[k]
                .get_sized(&rec, key, size)
                .await
                .with_context(|| format!("GetObject {key}"))?;
            let took = ms(t.elapsed());
            // `key` is the vault's own path (checked equal above), never the server's.
            let dest = pull_dirs[k].join(key);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&dest, &body).with_context(|| format!("writing {}", dest.display()))?;
            Ok(took)
        })
        .await?;
        s.a.push(ta);
        s.b.push(tb);
    }
    pulled(plan, pull_dirs, &s, a, b)?;
    Ok(s)
}

//! WebDAV's paired flow (`ab --paired`): cold push and cold pull file by file, each arm a
//! client of its own server; see `sample::paired` for the alternation.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use loadgen::protocols::webdav::client::Recorder as DavRecorder;
use loadgen::protocols::webdav::{DavClient, Depth};
use reports::schema::{Better, PairAggregate, PairSeries};
use scenarios::scenario::Phase;

use crate::sample::pairs::{Arm, COLD_PULL_WALL, COLD_PUSH_WALL, pulled, vault_files};
use crate::sample::plan::{SamplePlan, ms};
use crate::sample::target::{Server, TargetSpec};

/// The WebDAV flow: cold push and cold pull file by file (WebDAV has no devices: each arm is
/// a client of its own server); edit propagation (poll-bounded there) and route loads are
/// named as skipped.
#[allow(clippy::too_many_arguments)]
pub(super) async fn drive_dav(
    plan: &SamplePlan,
    a_first: bool,
    specs: [&TargetSpec; 2],
    dirs: [&Path; 2],
    a: &mut Arm,
    b: &mut Arm,
    pairs: &mut BTreeMap<String, PairSeries>,
    skipped: &mut Vec<String>,
) -> anyhow::Result<()> {
    let client = |spec: &TargetSpec, server: &Server| -> anyhow::Result<DavClient> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        Ok(
            DavClient::with_root(target, spec.def.auth.as_ref(), spec.def.root())
                .with_walk_bounds(spec.def.walk.unwrap_or_default()),
        )
    };
    let clients = [client(specs[0], &a.server)?, client(specs[1], &b.server)?];
    let depth = match plan.scenario.webdav.as_ref().map(|o| o.depth.as_str()) {
        Some("infinity") => Depth::Infinity,
        _ => Depth::One,
    };
    let pull_dirs = dirs.map(|d| d.join("pull-b"));
    for phase in &plan.scenario.phases {
        let logs = [a.server.log.read(), b.server.log.read()];
        let step = async {
            match phase {
                Phase::ColdStart => {}
                Phase::ColdPush { .. } => {
                    let s = dav_push_pairs(plan, a_first, &clients, a, b).await?;
                    pairs.insert(COLD_PUSH_WALL.to_owned(), s);
                }
                Phase::ColdPull => {
                    let s =
                        dav_pull_pairs(plan, a_first, &clients, depth, &pull_dirs, a, b).await?;
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

/// A WebDAV cold push, file by file: the folders are made on both arms first (MKCOL, not
/// timed), then each file is PUT to both arms in turn, the first arm alternating ABBA.
async fn dav_push_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[DavClient; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let folders: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            let parts: Vec<&str> = f.split('/').collect();
            (1..parts.len())
                .map(|n| parts[..n].join("/"))
                .collect::<Vec<_>>()
        })
        .collect();
    let rec = DavRecorder::new(false);
    // A BTreeSet of paths sorts a parent before its children.
    for (i, c) in clients.iter().enumerate() {
        for d in &folders {
            c.mkcol(&rec, d)
                .await
                .with_context(|| format!("arm {}: cold push: MKCOL {d}", ["A", "B"][i]))?;
        }
    }
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    let mut bytes = 0u64;
    for (i, rel) in files.iter().enumerate() {
        let body = bytes::Bytes::from(
            std::fs::read(plan.vault_dir.join(rel)).with_context(|| format!("reading {rel}"))?,
        );
        bytes += body.len() as u64;
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |c: &DavClient| -> anyhow::Result<f64> {
            let t = Instant::now();
            c.put(&rec, rel, body.clone())
                .await
                .with_context(|| format!("PUT {rel}"))?;
            Ok(ms(t.elapsed()))
        };
        let (ta, tb) = if first_a {
            let x = one(&clients[0]).await.context("arm A")?;
            (x, one(&clients[1]).await.context("arm B")?)
        } else {
            let y = one(&clients[1]).await.context("arm B")?;
            (one(&clients[0]).await.context("arm A")?, y)
        };
        s.a.push(ta);
        s.b.push(tb);
    }
    for (arm, series) in [(&mut *a, &s.a), (&mut *b, &s.b)] {
        arm.m
            .timing(COLD_PUSH_WALL, series.iter().sum(), "ms", Better::Lower);
        arm.m.exact("cold_push.files", files.len() as f64, "count");
        arm.m.exact("cold_push.bytes", bytes as f64, "bytes");
        arm.m.exact("cold_push.dirs", folders.len() as f64, "count");
    }
    Ok(s)
}

/// A WebDAV cold pull, file by file: each arm's tree is walked first (not timed) and must list
/// the vault's files; then each file is fetched from both arms in turn (ABBA) into each arm's
/// own copy, which must end byte-identical to the vault.
async fn dav_pull_pairs(
    plan: &SamplePlan,
    a_first: bool,
    clients: &[DavClient; 2],
    depth: Depth,
    pull_dirs: &[PathBuf; 2],
    a: &mut Arm,
    b: &mut Arm,
) -> anyhow::Result<PairSeries> {
    let files = vault_files(&plan.vault_dir)?;
    let rec = DavRecorder::new(false);
    for (i, c) in clients.iter().enumerate() {
        let arm = ["A", "B"][i];
        let listing = loadgen::protocols::webdav::walk(c, &rec, "", depth)
            .await
            .with_context(|| format!("arm {arm}: cold pull: the walk"))?;
        let listed: Vec<&String> = listing.files().map(|(p, _)| p).collect();
        if listed.len() != files.len() || listed.iter().zip(&files).any(|(l, f)| *l != f) {
            bail!(
                "arm {arm}: cold pull: the server lists {} files where the vault has {}",
                listed.len(),
                files.len()
            );
        }
        std::fs::create_dir_all(&pull_dirs[i])
            .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
    }
    let mut s = PairSeries {
        a: Vec::with_capacity(files.len()),
        b: Vec::with_capacity(files.len()),
        aggregate: PairAggregate::PairMedian,
        slice: 1,
    };
    for (i, rel) in files.iter().enumerate() {
        let first_a = loadgen::a_first_in(i as u64) == a_first;
        let one = async |k: usize| -> anyhow::Result<f64> {
            let t = Instant::now();
            let body = clients[k]
                .get(&rec, rel)
                .await
                .with_context(|| format!("arm {}: GET {rel}", ["A", "B"][k]))?;
            let took = ms(t.elapsed());
            // `rel` is the vault's own path, never the server's.
            let dest = pull_dirs[k].join(rel);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&dest, &body).with_context(|| format!("writing {}", dest.display()))?;
            Ok(took)
        };
        let (ta, tb) = if first_a {
            let x = one(0).await?;
            (x, one(1).await?)
        } else {
            let y = one(1).await?;
            (one(0).await?, y)
        };
        s.a.push(ta);
        s.b.push(tb);
    }
    pulled(plan, pull_dirs, &s, a, b)?;
    Ok(s)
}

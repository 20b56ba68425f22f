//! WebDAV's paired flow (`ab --paired`): cold push and cold pull file by file, each arm a
//! client of its own server; see `sample::paired` for the alternation.

use anyhow::{Context, bail};
use std::time::Instant;

use loadgen::protocols::webdav::client::Recorder as DavRecorder;
use loadgen::protocols::webdav::{DavClient, Depth};
use reports::schema::PairSeries;

use crate::sample::pairs::{
    PairedJob, PushPullPairs, Turns, file_series, in_turn, lists_vault, pulled, push_and_pull,
    pushed, vault_file, vault_files, write_pulled,
};
use crate::sample::plan::ms;
use crate::sample::target::{Server, TargetSpec};

/// The WebDAV flow: cold push and cold pull file by file (WebDAV has no devices: each arm is
/// a client of its own server); edit propagation (poll-bounded there) and route loads are
/// named as skipped.
pub(super) async fn drive_dav(job: PairedJob<'_>) -> anyhow::Result<()> {
    let client = |spec: &TargetSpec, server: &Server| -> anyhow::Result<DavClient> {
        let target = loadgen::Target::parse(&server.url(), false)?;
        Ok(
            DavClient::with_root(target, spec.def.auth.as_ref(), spec.def.root())
                .with_walk_bounds(spec.def.walk.unwrap_or_default()),
        )
    };
    let clients = [
        client(job.specs[0], &job.a.server)?,
        client(job.specs[1], &job.b.server)?,
    ];
    let depth = match job.plan.scenario.webdav.as_ref().map(|o| o.depth.as_str()) {
        Some("infinity") => Depth::Infinity,
        _ => Depth::One,
    };
    push_and_pull(job, &Servers { clients, depth }).await
}

/// Each arm's client of its own server, and the depth its walk lists at.
struct Servers {
    clients: [DavClient; 2],
    depth: Depth,
}

impl PushPullPairs for Servers {
    /// A WebDAV cold push, file by file: the folders are made on both arms first (MKCOL, not
    /// timed), then each file is PUT to both arms in turn, the first arm alternating ABBA.
    async fn push_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries> {
        let (plan, a_first) = (t.plan, t.a_first);
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
        for (i, c) in self.clients.iter().enumerate() {
            for d in &folders {
                c.mkcol(&rec, d)
                    .await
                    .with_context(|| format!("arm {}: cold push: MKCOL {d}", ["A", "B"][i]))?;
            }
        }
        let mut s = file_series(files.len());
        let mut bytes = 0u64;
        for (i, rel) in files.iter().enumerate() {
            let body = vault_file(plan, rel)?;
            bytes += body.len() as u64;
            let (ta, tb) = in_turn(i, a_first, async |k: usize| {
                let t = Instant::now();
                self.clients[k]
                    .put(&rec, rel, body.clone())
                    .await
                    .with_context(|| format!("PUT {rel}"))?;
                Ok(ms(t.elapsed()))
            })
            .await?;
            s.a.push(ta);
            s.b.push(tb);
        }
        pushed(&s, files.len(), bytes, t.a, t.b);
        for arm in [t.a, t.b] {
            arm.m.exact("cold_push.dirs", folders.len() as f64, "count");
        }
        Ok(s)
    }

    /// A WebDAV cold pull, file by file: each arm's tree is walked first (not timed) and must
    /// list the vault's files; then each file is fetched from both arms in turn (ABBA) into
    /// each arm's own copy, which must end byte-identical to the vault.
    async fn pull_pairs(&self, t: Turns<'_>) -> anyhow::Result<PairSeries> {
        let (plan, a_first, pull_dirs) = (t.plan, t.a_first, t.pull_dirs);
        let files = vault_files(&plan.vault_dir)?;
        let rec = DavRecorder::new(false);
        for (i, c) in self.clients.iter().enumerate() {
            let arm = ["A", "B"][i];
            let listing = loadgen::protocols::webdav::walk(c, &rec, "", self.depth)
                .await
                .with_context(|| format!("arm {arm}: cold pull: the walk"))?;
            let listed: Vec<&String> = listing.files().map(|(p, _)| p).collect();
            if !lists_vault(&listed, &files) {
                bail!(
                    "arm {arm}: cold pull: the server lists {} files where the vault has {}",
                    listed.len(),
                    files.len()
                );
            }
            std::fs::create_dir_all(&pull_dirs[i])
                .with_context(|| format!("creating {}", pull_dirs[i].display()))?;
        }
        let mut s = file_series(files.len());
        for (i, rel) in files.iter().enumerate() {
            let (ta, tb) = in_turn(i, a_first, async |k: usize| {
                let t = Instant::now();
                let body = self.clients[k]
                    .get(&rec, rel)
                    .await
                    .with_context(|| format!("GET {rel}"))?;
                let took = ms(t.elapsed());
                write_pulled(&pull_dirs[k], rel, &body)?;
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

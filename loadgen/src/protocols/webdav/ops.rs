//! Whole-vault operations over WebDAV, shaped like Remotely Save's sync: push (MKCOL the
//! folders, PUT each file), a PROPFIND walk (Depth 1 folder by folder, or one Depth infinity
//! request), pull (walk, then GET each file), resync (a walk that should find nothing to do),
//! folder rename (MOVE) and edit propagation by polling (WebDAV has no change feed).
//!
//! Reports are the signed client's [`TransferReport`], so the phases and the report code
//! read both protocols the same way; the fields that have no WebDAV meaning (chunks, echo,
//! sequence numbers) stay zero.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;

use std::collections::{BTreeSet, VecDeque};

use super::client::{DavClient, Depth, Place};
use super::error::DavError;
use super::multistatus::{DavEntry, quoted};
use crate::TransferReport;
use crate::inflight::{Progress, each_in_flight};
use crate::stats::Recorder;
use crate::transfer::{local_tree, report};
use crate::walk::WalkBounds;

/// Files in flight during push and pull: the signed client's figure (design: "four files
/// in flight").
pub const IN_FLIGHT: usize = 4;

/// What a PROPFIND walk found, keyed by vault path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub entries: BTreeMap<String, DavEntry>,
    /// PROPFIND requests the walk made.
    pub requests: u64,
}

impl Listing {
    pub fn files(&self) -> impl Iterator<Item = (&String, &DavEntry)> {
        self.entries.iter().filter(|(_, e)| !e.is_collection)
    }

    pub fn dirs(&self) -> impl Iterator<Item = (&String, &DavEntry)> {
        self.entries.iter().filter(|(_, e)| e.is_collection)
    }
}

/// Pushes every folder (MKCOL, parents first, one at a time) and file (PUT, [`IN_FLIGHT`]
/// at once) under `dir` to the server's root.
pub async fn push_vault(client: &DavClient, dir: &Path) -> Result<TransferReport, DavError> {
    push_vault_with(client, dir, IN_FLIGHT, 1000).await
}

/// [`push_vault`] with `in_flight` PUTs at once and a throughput checkpoint every
/// `checkpoint_every` files (an import probe uploads one at a time and reads the server's
/// cost at every checkpoint).
pub async fn push_vault_with(
    client: &DavClient,
    dir: &Path,
    in_flight: usize,
    checkpoint_every: usize,
) -> Result<TransferReport, DavError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (dirs, files) = local_tree(dir)?;
    for d in &dirs {
        client.mkcol(&rec, d).await?;
    }
    let mut progress = Progress::new(t0, checkpoint_every);
    let start = |(rel, abs, _): (String, PathBuf, u64)| {
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, DavError>(async move {
            let body = tokio::fs::read(&abs)
                .await
                .map_err(|e| DavError::io(&abs, e))?;
            let n = body.len() as u64;
            let t = Instant::now();
            c.put(&r, &rel, Bytes::from(body)).await?;
            Ok::<_, DavError>((n, t.elapsed()))
        })
    };
    let done = |(n, took)| {
        progress.file_done(n, took);
        Ok(())
    };
    each_in_flight(files, in_flight, start, done, join_error).await?;
    let (files, dirs) = (progress.files, dirs.len() as u64);
    let mut r = report(rec.snapshot(), t0.elapsed(), files, dirs, progress.bytes);
    r.checkpoints = progress.checkpoints;
    Ok(r)
}

fn join_error(e: tokio::task::JoinError) -> DavError {
    DavError::Invalid {
        what: "webdav task".into(),
        reason: e.to_string(),
    }
}

/// Lists the tree under folder `rel` ("" = root): one PROPFIND per folder at `Depth::One`
/// (breadth first, as the `webdav` client's recursive listing does), or one request at
/// `Depth::Infinity`. The folder itself is not in the listing.
///
/// The walk makes progress whatever the server answers: every folder is listed at most once
/// (a visited set), a listed entry must lie inside the folder listed (a Depth 1 entry one
/// level below it) with no empty, `.` or `..` segment, and the client's [`WalkBounds`]
/// (requests, entries, depth, path length) stop it with an error naming the bound.
pub async fn walk(
    client: &DavClient,
    rec: &Recorder,
    rel: &str,
    depth: Depth,
) -> Result<Listing, DavError> {
    let b = client.walk_bounds();
    let root = rel.trim_matches('/').to_owned();
    let mut out = Listing::default();
    let mut visited = BTreeSet::from([root.clone()]);
    let mut queue = VecDeque::from([root.clone()]);
    while let Some(folder) = queue.pop_front() {
        if out.requests >= b.max_requests {
            return Err(DavError::Walk {
                limit: b.max_requests,
                what: "PROPFIND requests",
                bound: "--webdav-max-requests",
                detail: format!(
                    "{} folders still to list, the next {}",
                    queue.len() + 1,
                    quoted(&folder, 120)
                ),
            });
        }
        out.requests += 1;
        let entries = &mut out.entries;
        let mut found = Vec::new();
        let mut visit = |e: DavEntry| -> Result<(), DavError> {
            let path = match client.locate(&e.path) {
                Place::Root if folder.is_empty() => return Ok(()), // the root itself
                Place::Inside(p) => p.to_owned(),
                Place::Root => {
                    return Err(DavError::Listing {
                        detail: format!(
                            "PROPFIND of {} listed \"/\", which is not inside it (its parent, a sibling or elsewhere)",
                            quoted(&folder, 120)
                        ),
                    });
                }
                Place::Outside => {
                    return Err(DavError::Listing {
                        detail: format!(
                            "PROPFIND of {} listed {}, outside the folder listed",
                            quoted(&folder, 120),
                            quoted(&e.path, 120)
                        ),
                    });
                }
            };
            if path == folder {
                return Ok(()); // the folder itself
            }
            check_listed(&folder, &path, depth, &b)?;
            if !entries.contains_key(&path) && entries.len() as u64 >= b.max_entries {
                return Err(DavError::Walk {
                    limit: b.max_entries,
                    what: "entries",
                    bound: "--webdav-max-entries",
                    detail: format!(
                        "PROPFIND of {} listed one more, {}",
                        quoted(&folder, 120),
                        quoted(&path, 120)
                    ),
                });
            }
            if depth == Depth::One && e.is_collection && visited.insert(path.clone()) {
                found.push(path.clone());
            }
            entries.insert(path, e);
            Ok(())
        };
        client
            .propfind_each(rec, &folder, depth, &mut visit)
            .await?;
        queue.extend(found);
    }
    Ok(out)
}

/// Checks one listed vault path against the folder listed and the bounds.
fn check_listed(folder: &str, path: &str, depth: Depth, b: &WalkBounds) -> Result<(), DavError> {
    let listing = |why: &str| DavError::Listing {
        detail: format!(
            "PROPFIND of {} listed {}, {why}",
            quoted(folder, 120),
            quoted(path, 120)
        ),
    };
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(listing("a path with an empty, . or .. segment"));
    }
    let below = if folder.is_empty() {
        Some(path)
    } else {
        path.strip_prefix(folder).and_then(|r| r.strip_prefix('/'))
    };
    let Some(below) = below else {
        return Err(listing(
            "which is not inside it (its parent, a sibling or elsewhere)",
        ));
    };
    if depth == Depth::One && below.contains('/') {
        return Err(listing("more than one level below it in a Depth 1 listing"));
    }
    if path.len() as u64 > b.max_path_bytes {
        return Err(DavError::Walk {
            limit: b.max_path_bytes,
            what: "bytes of path",
            bound: "--webdav-max-path-bytes",
            detail: format!("a {}-byte path {}", path.len(), quoted(path, 120)),
        });
    }
    let levels = path.split('/').count() as u64;
    if levels > b.max_depth {
        return Err(DavError::Walk {
            limit: b.max_depth,
            what: "folder levels",
            bound: "--webdav-max-depth",
            detail: format!("{levels} levels at {}", quoted(path, 120)),
        });
    }
    Ok(())
}

/// Joins a vault path onto `dir`, refusing anything that could leave it.
fn local_path(dir: &Path, rel: &str) -> Result<PathBuf, DavError> {
    let mut p = dir.to_path_buf();
    for seg in rel.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(DavError::Invalid {
                what: rel.to_owned(),
                reason: "unsafe vault path from the server (empty, . or .. segment)".into(),
            });
        }
        p.push(seg);
    }
    Ok(p)
}

/// Walks the server at `depth`, creates the folders under `dir` and downloads every file
/// ([`IN_FLIGHT`] at once), checking each length against the listing. The caller compares
/// the tree with the vault's digest.
pub async fn pull_vault(
    client: &DavClient,
    dir: &Path,
    depth: Depth,
) -> Result<TransferReport, DavError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let listing = walk(client, &rec, "", depth).await?;
    let mut dirs = 0u64;
    for (rel, _) in listing.dirs() {
        let p = local_path(dir, rel)?;
        std::fs::create_dir_all(&p).map_err(|e| DavError::io(&p, e))?;
        dirs += 1;
    }
    let files: Vec<(String, Option<u64>)> = listing
        .files()
        .map(|(rel, e)| (rel.clone(), e.size))
        .collect();
    let (mut done, mut bytes) = (0u64, 0u64);
    let start = |(rel, size): (String, Option<u64>)| {
        let target = local_path(dir, &rel)?;
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, DavError>(async move {
            let body = c.get_sized(&r, &rel, size).await?;
            if let Some(want) = size
                && want != body.len() as u64
            {
                return Err(DavError::Invalid {
                    what: rel,
                    reason: format!("GET returned {} bytes, the listing said {want}", body.len()),
                });
            }
            tokio::fs::write(&target, &body)
                .await
                .map_err(|e| DavError::io(&target, e))?;
            Ok::<_, DavError>(body.len() as u64)
        })
    };
    let wrote = |n| {
        bytes += n;
        done += 1;
        Ok(())
    };
    each_in_flight(files, IN_FLIGHT, start, wrote, join_error).await?;
    Ok(report(rec.snapshot(), t0.elapsed(), done, dirs, bytes))
}

/// The idle resync: a walk compared with the local copy under `dir` (same folders, same
/// files, same sizes). `mismatched` counts differences; `files`/`dirs` what was compared;
/// `requests` is the walk's cost.
pub async fn resync(
    client: &DavClient,
    dir: &Path,
    depth: Depth,
) -> Result<TransferReport, DavError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let listing = walk(client, &rec, "", depth).await?;
    let (local_dirs, local_files) = local_tree(dir)?;
    let mut mismatched = 0u64;
    let remote_dirs: Vec<&String> = listing.dirs().map(|(k, _)| k).collect();
    mismatched += symmetric_difference(&remote_dirs, &local_dirs.iter().collect::<Vec<_>>());
    let remote: BTreeMap<&String, Option<u64>> =
        listing.files().map(|(k, e)| (k, e.size)).collect();
    let local: BTreeMap<&String, Option<u64>> =
        local_files.iter().map(|(k, _, n)| (k, Some(*n))).collect();
    for (k, v) in &remote {
        if local.get(k) != Some(v) {
            mismatched += 1;
        }
    }
    mismatched += local.keys().filter(|k| !remote.contains_key(*k)).count() as u64;
    let mut r = report(
        rec.snapshot(),
        t0.elapsed(),
        remote.len() as u64,
        remote_dirs.len() as u64,
        0,
    );
    r.mismatched = mismatched;
    Ok(r)
}

fn symmetric_difference(a: &[&String], b: &[&String]) -> u64 {
    let a: std::collections::BTreeSet<_> = a.iter().collect();
    let b: std::collections::BTreeSet<_> = b.iter().collect();
    a.symmetric_difference(&b).count() as u64
}

/// Renames folder `from` to `to` with one MOVE.
pub async fn rename(client: &DavClient, from: &str, to: &str) -> Result<TransferReport, DavError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    client.move_to(&rec, from, to, true).await?;
    Ok(report(rec.snapshot(), t0.elapsed(), 0, 1, 0))
}

/// What a poll for a change saw.
#[derive(Debug, Clone)]
pub struct PollReport {
    /// From the call to the PROPFIND answer that showed the change.
    pub elapsed: Duration,
    /// PROPFIND requests made.
    pub polls: u64,
    /// The file's entry as last seen.
    pub entry: DavEntry,
    pub routes: BTreeMap<String, crate::stats::RouteStats>,
}

/// Polls folder `folder` with PROPFIND Depth 1 every `interval` until file `file` (a vault
/// path in it) differs from `before` in ETag, size or last-modified (or appears, when
/// `before` is `None`) and, when `want_size` is given, lists that size (a server may list a
/// file mid-upload, at a partial size), then returns; gives up at `deadline`. The delay it measures is bounded
/// below by the polling interval: WebDAV has no long poll.
pub async fn poll_until_changed(
    client: &DavClient,
    folder: &str,
    file: &str,
    before: Option<&DavEntry>,
    want_size: Option<u64>,
    interval: Duration,
    deadline: Instant,
) -> Result<PollReport, DavError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let mut polls = 0u64;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let entries = client.propfind(&rec, folder, Depth::One).await?;
        polls += 1;
        let now = entries
            .into_iter()
            .find(|e| client.rel(&e.path) == Some(file));
        if let Some(e) = now {
            let changed = match before {
                None => true,
                Some(b) => {
                    b.etag != e.etag || b.size != e.size || b.last_modified != e.last_modified
                }
            };
            // rclone lists a file while its PUT is still being written, at the partial size:
            // that is a change, but not the edit.
            let complete = want_size.is_none_or(|w| e.size == Some(w));
            let changed = changed && complete;
            if changed {
                return Ok(PollReport {
                    elapsed: t0.elapsed(),
                    polls,
                    entry: e,
                    routes: rec.snapshot().routes,
                });
            }
        }
        if Instant::now() >= deadline {
            return Err(DavError::Invalid {
                what: file.to_owned(),
                reason: format!("no change seen after {polls} PROPFIND polls"),
            });
        }
    }
}

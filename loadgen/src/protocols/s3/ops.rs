//! Whole-vault operations over S3, shaped like Remotely Save's S3 backend: push (PutObject of
//! each file, each followed by the HeadObject the plugin reads its new state with; folders
//! only as keys' prefixes unless folder objects are asked for), a listing walk (ListObjectsV2
//! page after page, following continuation tokens), pull (walk, then GetObject of each
//! object), resync (a walk compared with the last sync's record, optionally a HeadObject of
//! every object as the plugin's "accurate mtime" setting does), folder rename (CopyObject and
//! DeleteObject per object) and edit propagation by polling the listing (S3 has no change
//! feed).
//!
//! Reports are the shared [`TransferReport`], so the phases read every protocol the same way;
//! the fields with no S3 meaning (chunks, echo, sequence numbers) stay zero.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::task::JoinSet;

use super::client::{Recorder, S3Client};
use super::error::S3Error;
use super::listing::Object;
use crate::transfer::{local_tree, report};
use crate::walk::WalkBounds;
use crate::xml::{clip, quoted};
use crate::{Checkpoint, TransferReport};

/// Files in flight during pull and rename: the figure every protocol's whole-vault transfer
/// uses (the signed client's four).
pub const IN_FLIGHT: usize = 4;

/// What a listing walk found: every object by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub objects: BTreeMap<String, Object>,
    /// ListObjectsV2 requests the walk made.
    pub requests: u64,
}

impl Listing {
    /// The objects that are files (a key ending in `/` is a folder object).
    pub fn files(&self) -> impl Iterator<Item = (&String, &Object)> {
        self.objects.iter().filter(|(k, _)| !k.ends_with('/'))
    }
}

/// How a push writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushOpts {
    pub in_flight: usize,
    pub checkpoint_every: usize,
    /// Write a zero-byte `FOLDER/` object for every folder first (the plugin's "generate
    /// folder objects" setting; off by default, when folders exist only as key prefixes).
    pub folder_objects: bool,
}

/// The seconds of `p`'s modification time (the metadata Remotely Save writes), 0 if unknown.
fn mtime_s(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

/// Pushes every file under `dir` (PutObject, then HeadObject, `opts.in_flight` files at
/// once), after the folder objects when asked for.
pub async fn push_vault(
    client: &S3Client,
    dir: &Path,
    opts: PushOpts,
) -> Result<TransferReport, S3Error> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (dirs, files) = local_tree(dir)?;
    if opts.folder_objects {
        for d in &dirs {
            let key = format!("{d}/");
            client.put(&rec, &key, Bytes::new(), 0).await?;
            client.head(&rec, &key).await?;
        }
    }
    let mut set: JoinSet<Result<(u64, Duration), S3Error>> = JoinSet::new();
    let mut lat = crate::transfer::WindowLatency::default();
    let (mut done, mut bytes) = (0u64, 0u64);
    let mut checkpoints = Vec::new();
    let mut last_cp = (0u64, Duration::ZERO);
    let mut queue = files.into_iter();
    let every = opts.checkpoint_every.max(1) as u64;
    loop {
        while set.len() < opts.in_flight.max(1) {
            let Some((key, abs, _)) = queue.next() else {
                break;
            };
            let (c, r) = (client.clone(), rec.clone());
            set.spawn(async move {
                let body = tokio::fs::read(&abs)
                    .await
                    .map_err(|e| S3Error::io(&abs, e))?;
                let mtime = std::fs::metadata(&abs).map(|m| mtime_s(&m)).unwrap_or(0);
                let n = body.len() as u64;
                let t = Instant::now();
                c.put(&r, &key, Bytes::from(body), mtime).await?;
                c.head(&r, &key).await?;
                Ok((n, t.elapsed()))
            });
        }
        let Some(res) = set.join_next().await else {
            break;
        };
        let (n, took) = join(res)??;
        bytes += n;
        lat.push(took);
        done += 1;
        if done % every == 0 {
            let el = t0.elapsed();
            let dt = (el - last_cp.1).as_secs_f64().max(1e-9);
            checkpoints.push(Checkpoint {
                files: done,
                elapsed_ms: el.as_millis() as u64,
                files_per_s: (done - last_cp.0) as f64 / dt,
                p50_ms: lat.take_p50(),
            });
            last_cp = (done, el);
        }
    }
    let mut r = report(rec.snapshot(), t0.elapsed(), done, dirs.len() as u64, bytes);
    r.checkpoints = checkpoints;
    Ok(r)
}

fn join<T>(r: Result<T, tokio::task::JoinError>) -> Result<T, S3Error> {
    r.map_err(|e| S3Error::invalid("s3 task", e.to_string()))
}

/// Checks one listed key: inside `prefix`, a relative vault path with no empty, `.` or `..`
/// segment (a folder object's one trailing `/` aside), no NUL, within the walk's path bounds.
/// A key that could climb out of the vault is refused before anything is written.
pub fn check_key(prefix: &str, key: &str) -> Result<(), String> {
    let why = |w: &str| Err(format!("listed key {}, {w}", quoted(key, 120)));
    if !key.starts_with(prefix) {
        return why("which is not under the prefix listed");
    }
    if key.contains('\0') {
        return why("which holds a NUL byte");
    }
    if key.starts_with('/') {
        return why("an absolute path");
    }
    if key.contains('\\') {
        return why("which holds a backslash (a path separator elsewhere)");
    }
    let path = key.strip_suffix('/').unwrap_or(key);
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return why("a path with an empty, . or .. segment (it could climb out of the vault)");
    }
    let b = WalkBounds::DEFAULT;
    if path.len() as u64 > b.max_path_bytes {
        return why(&format!(
            "{} bytes long, over the {}-byte path bound",
            path.len(),
            b.max_path_bytes
        ));
    }
    if path.split('/').count() as u64 > b.max_depth {
        return why(&format!("deeper than {} folder levels", b.max_depth));
    }
    Ok(())
}

/// Lists every object under `prefix`: ListObjectsV2 page after page, following
/// `NextContinuationToken` as the plugin does. The walk ends whatever the server answers:
/// every key is checked ([`check_key`]) as it arrives, the objects are counted against the
/// client's bounds as they arrive (so a single endless page stops at the entry bound, not
/// at the body's size cap), a continuation token that repeats is refused at once, and the
/// pages are bounded; each error names its bound and flag.
pub async fn walk(client: &S3Client, rec: &Recorder, prefix: &str) -> Result<Listing, S3Error> {
    let b = client.bounds();
    let what = format!("ListObjectsV2 of {}/{}", client.bucket(), clip(prefix, 120));
    let overrun = |detail: String| S3Error::Listing {
        what: what.clone(),
        detail,
    };
    let mut out = Listing::default();
    let mut tokens: BTreeSet<String> = BTreeSet::new();
    let mut token: Option<String> = None;
    let mut listed = 0u64;
    loop {
        if out.requests >= b.max_pages {
            return Err(overrun(format!(
                "the listing went on past {} pages in one walk (bound --feed-max-pages)",
                b.max_pages
            )));
        }
        out.requests += 1;
        let objects = &mut out.objects;
        let mut visit = |o: Object| -> Result<(), String> {
            listed += 1;
            if listed > b.max_entries {
                return Err(format!(
                    "the listing went on past {} objects in one walk (bound --feed-max-entries)",
                    b.max_entries
                ));
            }
            check_key(prefix, &o.key)?;
            objects.insert(o.key.clone(), o);
            Ok(())
        };
        let end = client
            .list_page(rec, prefix, token.as_deref(), &mut visit)
            .await?;
        if !end.is_truncated {
            return Ok(out);
        }
        let Some(next) = end.next_token else {
            return Err(overrun(
                "IsTruncated is true but the page gives no NextContinuationToken".into(),
            ));
        };
        if !tokens.insert(next.clone()) {
            return Err(overrun(format!(
                "the continuation token {} came back a second time (page {}): the listing would never end",
                quoted(&next, 60),
                out.requests
            )));
        }
        token = Some(next);
    }
}

/// Joins a checked key onto `dir`.
fn local_path(dir: &Path, key: &str) -> Result<PathBuf, S3Error> {
    check_key("", key).map_err(|r| S3Error::invalid(clip(key, 120), r))?;
    let mut p = dir.to_path_buf();
    for seg in key.split('/').filter(|s| !s.is_empty()) {
        p.push(seg);
    }
    Ok(p)
}

/// Walks the bucket, creates the folders under `dir` (those of folder objects and every
/// key's parents) and downloads every file ([`IN_FLIGHT`] at once), each length checked
/// against the listing. Returns the report and the listing (the sync's record of what it
/// saw, which a resync compares with). The caller compares the tree with the vault's digest.
pub async fn pull_vault(
    client: &S3Client,
    dir: &Path,
) -> Result<(TransferReport, Listing), S3Error> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let listing = walk(client, &rec, "").await?;
    let mut folders: BTreeSet<PathBuf> = BTreeSet::new();
    for key in listing.objects.keys() {
        let p = local_path(dir, key)?;
        let folder = if key.ends_with('/') {
            Some(p)
        } else {
            p.parent().map(Path::to_path_buf)
        };
        if let Some(f) = folder
            && f != dir
            && !folders.contains(&f)
        {
            std::fs::create_dir_all(&f).map_err(|e| S3Error::io(&f, e))?;
            let mut up = f.as_path();
            while up != dir && folders.insert(up.to_path_buf()) {
                match up.parent() {
                    Some(u) => up = u,
                    None => break,
                }
            }
        }
    }
    let files: Vec<(String, u64)> = listing.files().map(|(k, o)| (k.clone(), o.size)).collect();
    let mut queue = files.into_iter();
    let mut set: JoinSet<Result<u64, S3Error>> = JoinSet::new();
    let (mut done, mut bytes) = (0u64, 0u64);
    loop {
        while set.len() < IN_FLIGHT {
            let Some((key, size)) = queue.next() else {
                break;
            };
            let target = local_path(dir, &key)?;
            let (c, r) = (client.clone(), rec.clone());
            set.spawn(async move {
                let body = c.get_sized(&r, &key, Some(size)).await?;
                if size != body.len() as u64 {
                    return Err(S3Error::invalid(
                        clip(&key, 120),
                        format!("GET returned {} bytes, the listing said {size}", body.len()),
                    ));
                }
                tokio::fs::write(&target, &body)
                    .await
                    .map_err(|e| S3Error::io(&target, e))?;
                Ok(body.len() as u64)
            });
        }
        let Some(res) = set.join_next().await else {
            break;
        };
        bytes += join(res)??;
        done += 1;
    }
    let r = report(
        rec.snapshot(),
        t0.elapsed(),
        done,
        folders.len() as u64,
        bytes,
    );
    Ok((r, listing))
}

/// The idle resync: one walk compared with `record` (the last sync's listing: same keys, same
/// sizes, same ETags) and with the local copy under `dir` (same files, same sizes); with
/// `heads`, a HeadObject of every file too, its length and ETag compared with the listing's
/// (Remotely Save's "accurate mtime" setting reads each object's metadata so). `mismatched`
/// counts differences; `requests` is the cost.
pub async fn resync(
    client: &S3Client,
    dir: &Path,
    record: &Listing,
    heads: bool,
) -> Result<TransferReport, S3Error> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let listing = walk(client, &rec, "").await?;
    let (_, local_files) = local_tree(dir)?;
    let mut mismatched = 0u64;
    let same = |a: &Object, b: &Object| a.size == b.size && a.etag == b.etag;
    for (k, o) in &listing.objects {
        if record.objects.get(k).is_none_or(|r| !same(r, o)) {
            mismatched += 1;
        }
    }
    mismatched += record
        .objects
        .keys()
        .filter(|k| !listing.objects.contains_key(*k))
        .count() as u64;
    let local: BTreeMap<&String, u64> = local_files.iter().map(|(k, _, n)| (k, *n)).collect();
    for (k, o) in listing.files() {
        if local.get(k) != Some(&o.size) {
            mismatched += 1;
        }
    }
    mismatched += local
        .keys()
        .filter(|k| !listing.objects.contains_key(**k))
        .count() as u64;
    if heads {
        for (k, o) in listing.files() {
            let h = client.head(&rec, k).await?;
            if h.size != Some(o.size) || h.etag != o.etag {
                mismatched += 1;
            }
        }
    }
    let files = listing.files().count() as u64;
    let mut r = report(rec.snapshot(), t0.elapsed(), files, 0, 0);
    r.mismatched = mismatched;
    Ok(r)
}

/// Renames folder `from` to `to`: every object under `from/` copied to its new key
/// (CopyObject) and then deleted (DeleteObject), [`IN_FLIGHT`] objects at once: S3 has no
/// rename.
pub async fn rename(client: &S3Client, from: &str, to: &str) -> Result<TransferReport, S3Error> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let prefix = format!("{}/", from.trim_end_matches('/'));
    let listing = walk(client, &rec, &prefix).await?;
    let moves: Vec<(String, String)> = listing
        .objects
        .keys()
        .map(|k| {
            let rest = &k[prefix.len()..];
            (k.clone(), format!("{}/{rest}", to.trim_end_matches('/')))
        })
        .collect();
    let n = moves.len() as u64;
    let mut queue = moves.into_iter();
    let mut set: JoinSet<Result<(), S3Error>> = JoinSet::new();
    loop {
        while set.len() < IN_FLIGHT {
            let Some((old, new)) = queue.next() else {
                break;
            };
            let (c, r) = (client.clone(), rec.clone());
            set.spawn(async move {
                c.copy(&r, &old, &new).await?;
                c.delete(&r, &old).await
            });
        }
        let Some(res) = set.join_next().await else {
            break;
        };
        join(res)??;
    }
    Ok(report(rec.snapshot(), t0.elapsed(), n, 1, 0))
}

/// What a poll for a change saw.
#[derive(Debug, Clone)]
pub struct PollReport {
    /// From the call to the listing that showed the change.
    pub elapsed: Duration,
    /// Listings made (each one walk of the folder's prefix).
    pub polls: u64,
    /// ListObjectsV2 requests made.
    pub requests: u64,
    /// The key's object as last listed.
    pub object: Object,
}

/// Lists `prefix` every `interval` until `key` (under it) differs from `before` in ETag, size
/// or last-modified (or appears, when `before` is `None`) and, when `want_size` is given,
/// lists that size; gives up at `deadline`. The delay it measures is bounded below by the
/// interval: S3 has no change feed.
pub async fn poll_until_changed(
    client: &S3Client,
    prefix: &str,
    key: &str,
    before: Option<&Object>,
    want_size: Option<u64>,
    interval: Duration,
    deadline: Instant,
) -> Result<PollReport, S3Error> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (mut polls, mut requests) = (0u64, 0u64);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let listing = walk(client, &rec, prefix).await?;
        polls += 1;
        requests += listing.requests;
        if let Some(o) = listing.objects.get(key) {
            let changed = before.is_none_or(|b| {
                b.etag != o.etag || b.size != o.size || b.last_modified != o.last_modified
            });
            if changed && want_size.is_none_or(|w| o.size == w) {
                return Ok(PollReport {
                    elapsed: t0.elapsed(),
                    polls,
                    requests,
                    object: o.clone(),
                });
            }
        }
        if Instant::now() >= deadline {
            return Err(S3Error::invalid(
                clip(key, 120),
                format!("no change seen after {polls} listings"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_climb_out_are_refused() {
        for ok in ["a.md", "Wiki/a b.md", "Wiki/", "📚 R/x ❤.md", "a/b/c/"] {
            assert_eq!(check_key("", ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("../etc/passwd", ".. segment"),
            ("a/../../b", ".. segment"),
            ("/etc/passwd", "absolute"),
            ("a\0b", "NUL"),
            ("a//b", "empty"),
            ("./a", ". or .."),
            ("a\\..\\b", "backslash"),
            ("", "empty"),
        ] {
            let e = check_key("", bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(
            check_key("Wiki/", "Other/a.md")
                .unwrap_err()
                .contains("prefix")
        );
        let long = "a/".repeat(40) + "x";
        assert!(check_key("", &long).unwrap_err().contains("levels"));
        let dir = Path::new("/v");
        assert_eq!(local_path(dir, "a/b.md").unwrap(), Path::new("/v/a/b.md"));
        assert!(local_path(dir, "../x").is_err());
    }
}

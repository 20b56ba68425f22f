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

use super::client::{Recorder, S3Client};
use super::error::S3Error;
use super::listing::Object;
use crate::TransferReport;
use crate::inflight::{Progress, each_in_flight};
use crate::transfer::{local_tree, report};
use crate::walk::WalkBounds;
use crate::xml::{clip, quoted};

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
    // An encrypted remote is flat (no name holds a `/`), so the plugin writes every folder
    // as a zero-byte object of its own, whatever its folder-objects setting.
    if opts.folder_objects || client.cipher().is_some() {
        for d in &dirs {
            let key = client.key_of(&format!("{d}/"));
            client.put(&rec, &key, Bytes::new(), 0).await?;
            client.head(&rec, &key).await?;
        }
    }
    let mut progress = Progress::new(t0, opts.checkpoint_every);
    let start = |(key, abs, _): (String, PathBuf, u64)| {
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, S3Error>(async move {
            let body = tokio::fs::read(&abs)
                .await
                .map_err(|e| S3Error::io(&abs, e))?;
            let mtime = std::fs::metadata(&abs).map(|m| mtime_s(&m)).unwrap_or(0);
            let n = body.len() as u64;
            let t = Instant::now();
            c.put_file(&r, &key, Bytes::from(body), mtime).await?;
            c.head(&r, &c.key_of(&key)).await?;
            Ok::<_, S3Error>((n, t.elapsed()))
        })
    };
    let done = |(n, took)| {
        progress.file_done(n, took);
        Ok(())
    };
    each_in_flight(files, opts.in_flight, start, done, join_error).await?;
    let (files, dirs) = (progress.files, dirs.len() as u64);
    let mut r = report(rec.snapshot(), t0.elapsed(), files, dirs, progress.bytes);
    r.checkpoints = progress.checkpoints;
    Ok(r)
}

fn join_error(e: tokio::task::JoinError) -> S3Error {
    S3Error::invalid("s3 task", e.to_string())
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
///
/// The listing is keyed by vault path. An encrypted remote cannot be listed by prefix: the
/// whole bucket is listed, every name decrypted (a PBKDF2 each, as the plugin does on every
/// walk) and checked, and those outside `prefix` left out; each [`Object`] keeps its key.
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
        let encrypted = client.cipher().is_some();
        let mut visit = |o: Object| -> Result<(), String> {
            listed += 1;
            if listed > b.max_entries {
                return Err(format!(
                    "the listing went on past {} objects in one walk (bound --feed-max-entries)",
                    b.max_entries
                ));
            }
            let path = if encrypted {
                check_key("", &o.key)?;
                let path = client.path_of_key(&o.key)?;
                if !path.starts_with(prefix) {
                    return Ok(());
                }
                path
            } else {
                o.key.clone()
            };
            check_key(prefix, &path)?;
            objects.insert(path, o);
            Ok(())
        };
        let list_prefix = if encrypted { "" } else { prefix };
        let end = client
            .list_page(rec, list_prefix, token.as_deref(), &mut visit)
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
    let files: Vec<(String, String, u64)> = listing
        .files()
        .map(|(path, o)| (path.clone(), o.key.clone(), o.size))
        .collect();
    let (mut done, mut bytes) = (0u64, 0u64);
    let start = |(path, key, size): (String, String, u64)| {
        let target = local_path(dir, &path)?;
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, S3Error>(async move {
            let body = c.get_file(&r, &key, Some(size)).await?;
            let stored = c.stored_size(body.len() as u64);
            if size != stored {
                return Err(S3Error::invalid(
                    clip(&path, 120),
                    format!("GET returned {stored} bytes, the listing said {size}"),
                ));
            }
            tokio::fs::write(&target, &body)
                .await
                .map_err(|e| S3Error::io(&target, e))?;
            Ok::<_, S3Error>(body.len() as u64)
        })
    };
    let wrote = |n| {
        bytes += n;
        done += 1;
        Ok(())
    };
    each_in_flight(files, IN_FLIGHT, start, wrote, join_error).await?;
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
    let local: BTreeMap<&String, u64> = local_files
        .iter()
        .map(|(k, _, n)| (k, client.stored_size(*n)))
        .collect();
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
        for (_, o) in listing.files() {
            let h = client.head(&rec, &o.key).await?;
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
        .iter()
        .map(|(path, o)| {
            let rest = &path[prefix.len()..];
            let new = format!("{}/{rest}", to.trim_end_matches('/'));
            (o.key.clone(), client.key_of(&new))
        })
        .collect();
    let n = moves.len() as u64;
    let start = |(old, new): (String, String)| {
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, S3Error>(async move {
            c.copy(&r, &old, &new).await?;
            c.delete(&r, &old).await
        })
    };
    each_in_flight(moves, IN_FLIGHT, start, Ok, join_error).await?;
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
/// lists that many plain bytes' stored size; gives up at `deadline`. The delay it measures is bounded below by the
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
            if changed && want_size.is_none_or(|w| o.size == client.stored_size(w)) {
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

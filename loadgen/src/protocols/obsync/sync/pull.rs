//! Pull: read the feed in pages, fetch chunks in batches of at most three (`multipart/mixed`),
//! write files atomically after checking their SHA-256; idle resync; one change applied.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use protocol::Route;
use protocol::limits::CLIENT_GET_BATCH;
use protocol::wire::{Change, ClientManifest, SidsRequest};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::error::LoadError;
use crate::protocols::obsync::client::{Device, FileState, Outgoing, lock_files};
use crate::stats::Recorder;

use super::local::{
    Entry, TempFile, Walk, check_dir, decode_manifest, local_matches, safe_rel_path,
};
use super::long_poll::{FeedCursor, changes_page};
use crate::transfer::TransferReport;

/// One part of a `multipart/mixed` chunk batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub sid: String,
    pub missing: bool,
    pub body: Bytes,
}

/// Parses the `multipart/mixed` answer of `POST /v1/chunks/get` (parts carry
/// `X-Obsync-Sid` and `Content-Length`; a missing chunk has `X-Obsync-Missing: 1`), with at
/// most `max_parts` parts. Every length and offset is the server's, so each is checked: a part
/// must end inside the body and be followed by `CRLF --boundary` (RFC 2046 §5.1.1: the CRLF
/// before a boundary belongs to it), which also refuses parts that overlap the next one. A
/// malformed answer is a one-line error.
pub(crate) fn parse_multipart(
    content_type: &str,
    body: &Bytes,
    max_parts: usize,
) -> Result<Vec<Part>, String> {
    let boundary = content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
        .ok_or_else(|| format!("no boundary in content-type {}", clip(content_type)))?;
    // RFC 2046 §5.1.1: 1 to 70 characters.
    if boundary.is_empty() || boundary.len() > 70 {
        return Err(format!(
            "boundary of {} bytes (1 to 70 allowed)",
            boundary.len()
        ));
    }
    let delim = format!("--{boundary}");
    let d = delim.as_bytes();
    let find = |from: usize, pat: &[u8]| -> Option<usize> {
        body.get(from..)?
            .windows(pat.len())
            .position(|w| w == pat)
            .and_then(|i| i.checked_add(from))
    };
    let past = |at: usize, n: usize| at.checked_add(n).ok_or("part offset overflows");
    let mut pos = past(find(0, d).ok_or("no opening boundary")?, d.len())?;
    let mut parts = Vec::new();
    loop {
        // Transport padding (RFC 2046: linear white space) may follow a boundary.
        while matches!(body.get(pos), Some(b' ' | b'\t')) {
            pos += 1;
        }
        if body.get(pos..past(pos, 2)?) == Some(b"--") {
            return Ok(parts);
        }
        if body.get(pos..past(pos, 2)?) != Some(b"\r\n") {
            return Err(format!("boundary at byte {pos} not followed by CRLF or --"));
        }
        if parts.len() == max_parts {
            return Err(format!("more than the {max_parts} parts asked for"));
        }
        pos = past(pos, 2)?;
        let hdr_end = find(pos, b"\r\n\r\n").ok_or("unterminated part headers")?;
        let head =
            std::str::from_utf8(&body[pos..hdr_end]).map_err(|_| "non-UTF-8 part headers")?;
        let (mut sid, mut missing, mut len) = (String::new(), false, None::<usize>);
        for line in head.split("\r\n").filter(|l| !l.is_empty()) {
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| format!("malformed part header {}", clip(line)))?;
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                protocol::H_PART_SID => sid = v.to_owned(),
                protocol::H_PART_MISSING => missing = v == "1",
                "content-length" => {
                    let n = v
                        .parse::<usize>()
                        .ok()
                        .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| format!("bad part length {}", clip(v)))?;
                    if len.is_some_and(|l| l != n) {
                        return Err("conflicting part lengths".into());
                    }
                    len = Some(n);
                }
                _ => {}
            }
        }
        let start = past(hdr_end, 4)?;
        let closing = format!("\r\n{delim}");
        let end = match len {
            Some(n) => {
                let end = start
                    .checked_add(n)
                    .filter(|&e| e <= body.len())
                    .ok_or_else(|| {
                        format!(
                            "part length {n} at byte {start} runs past the body's {} bytes",
                            body.len()
                        )
                    })?;
                if body
                    .get(end..)
                    .is_none_or(|rest| !rest.starts_with(closing.as_bytes()))
                {
                    return Err(format!(
                        "part of length {n} at byte {start} is not followed by CRLF and the boundary"
                    ));
                }
                end
            }
            None => find(start, closing.as_bytes()).ok_or("unterminated part")?,
        };
        parts.push(Part {
            sid,
            missing,
            body: body.slice(start..end),
        });
        pos = past(end, closing.len())?;
    }
}

/// At most 60 characters of a server's text, for a one-line error.
/// A server's string for a message: quoted, escaped and clipped.
fn clip(s: &str) -> String {
    contract::quote::quote(s)
}

/// Fetches chunks `sids` in batches of ≤ 3 and hands each verified chunk to `sink`.
pub(super) async fn fetch_chunks(
    dev: &Device,
    rec: &Recorder,
    sids: &[String],
    mut sink: impl FnMut(Bytes) -> Result<(), LoadError>,
) -> Result<u64, LoadError> {
    let mut n = 0;
    for batch in sids.chunks(CLIENT_GET_BATCH) {
        let body = serde_json::to_vec(&SidsRequest {
            sids: batch.to_vec(),
        })
        .expect("plain struct serialises");
        let a = dev
            .call(
                rec,
                Outgoing::post_json(Route::ChunksGet, "/v1/chunks/get", body),
                &[200],
            )
            .await?;
        let ct = a
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let bad = |detail: String| LoadError::BadAnswer {
            route: Route::ChunksGet.label().into(),
            detail,
        };
        let parts = parse_multipart(ct, &a.body, batch.len()).map_err(bad)?;
        if parts.len() != batch.len() {
            return Err(bad(format!(
                "{} parts for {} sids",
                parts.len(),
                batch.len()
            )));
        }
        for (part, sid) in parts.into_iter().zip(batch) {
            if part.missing || &part.sid != sid {
                return Err(bad(format!("chunk {sid} missing or out of order")));
            }
            if hex::encode(Sha256::digest(&part.body)) != *sid {
                return Err(bad(format!("chunk {sid} does not hash to its sid")));
            }
            sink(part.body)?;
            n += 1;
        }
    }
    Ok(n)
}

/// What applying one change did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Applied {
    file: bool,
    dir: bool,
    deleted: bool,
    own_echo: bool,
    bytes: u64,
    chunks: u64,
}

pub(super) async fn apply_change(
    dev: &Device,
    rec: &Recorder,
    dir: &Path,
    change: &Change,
) -> Result<Applied, LoadError> {
    let mut out = Applied::default();
    let known = lock_files(dev).get_by_id(&change.file_id);
    if change.device_id == dev.device_id()
        && known
            .as_ref()
            .is_some_and(|(_, s)| s.head == change.version_id)
    {
        out.own_echo = true;
        return Ok(out);
    }
    if change.deleted {
        if let Some((old, st)) = &known {
            let abs = dir.join(old);
            let res = if st.is_dir {
                std::fs::remove_dir(&abs)
            } else {
                std::fs::remove_file(&abs)
            };
            match res {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if st.is_dir => {
                    let _ = e; // a folder that still has files stays; its files get their own tombstones
                }
                Err(e) => return Err(LoadError::io(abs, e)),
            }
        }
        lock_files(dev).remove_id(&change.file_id);
        out.deleted = true;
        return Ok(out);
    }
    let m = decode_manifest(change)?;
    let rel = safe_rel_path(&m.path)?.to_owned();
    let abs = dir.join(&rel);
    let is_dir = m.kind == "dir";
    let state = FileState {
        file_id: change.file_id.clone(),
        head: change.version_id.clone(),
        sids: change.sids.clone(),
        size: m.size,
        sha256: m.sha256.clone(),
        is_dir,
    };
    if is_dir {
        std::fs::create_dir_all(&abs).map_err(|e| LoadError::io(&abs, e))?;
        if let Some((old, _)) = &known
            && old != &rel
        {
            // A renamed folder: the old one is removed once empty (its files move separately).
            let _ = std::fs::remove_dir(dir.join(old));
        }
        lock_files(dev).insert(&rel, state);
        out.dir = true;
        return Ok(out);
    }
    let parent = abs.parent().unwrap_or(dir).to_owned();
    std::fs::create_dir_all(&parent).map_err(|e| LoadError::io(&parent, e))?;
    out.file = true;
    out.bytes = m.size;
    // A pure rename: the bytes are already here under the old name.
    if let Some((old, st)) = &known
        && old != &rel
        && st.sha256 == m.sha256
        && local_matches(&dir.join(old), m.size, &m.sha256)
    {
        std::fs::rename(dir.join(old), &abs).map_err(|e| LoadError::io(&abs, e))?;
        lock_files(dev).insert(&rel, state);
        return Ok(out);
    }
    if !local_matches(&abs, m.size, &m.sha256) {
        out.chunks = download_to(dev, rec, &parent, &abs, &rel, &change.sids, &m).await?;
    }
    if let Some((old, _)) = &known
        && old != &rel
    {
        let _ = std::fs::remove_file(dir.join(old));
    }
    lock_files(dev).insert(&rel, state);
    Ok(out)
}

/// Downloads into a temp file beside `abs`, verifies size and SHA-256, fsyncs, renames. The
/// temp file is removed on every other way out ([`TempFile`]), and no more than the
/// manifest's `size` is ever written.
pub(super) async fn download_to(
    dev: &Device,
    rec: &Recorder,
    parent: &Path,
    abs: &Path,
    rel: &str,
    sids: &[String],
    m: &ClientManifest,
) -> Result<u64, LoadError> {
    let bad = |detail: String| LoadError::BadAnswer {
        route: Route::Changes.label().into(),
        detail: format!("{rel}: {detail}"),
    };
    // Every chunk holds at least one byte, so a file has at most `size` chunks.
    if sids.len() as u64 > m.size {
        return Err(bad(format!(
            "{} sids for a file of {} bytes",
            sids.len(),
            m.size
        )));
    }
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = TempFile::create(parent, dev.index(), &name)?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let n = fetch_chunks(dev, rec, sids, |chunk| {
        size = size
            .checked_add(chunk.len() as u64)
            .filter(|&s| s <= m.size)
            .ok_or_else(|| {
                bad(format!(
                    "the chunks run past the manifest's {} bytes",
                    m.size
                ))
            })?;
        hasher.update(&chunk);
        tmp.write_all(&chunk)
    })
    .await?;
    let got = hex::encode(hasher.finalize());
    if got != m.sha256 || size != m.size {
        return Err(LoadError::HashMismatch {
            path: rel.to_owned(),
            expected: format!("{} ({} bytes)", m.sha256, m.size),
            got: format!("{got} ({size} bytes)"),
        });
    }
    tmp.persist(abs)?;
    Ok(n)
}

/// Applies one change to disk as another device would: fetches its chunks (batches of ≤ 3),
/// writes atomically, verifies SHA-256; tombstones delete, renames move.
pub async fn fetch_and_write(dev: &Device, dir: &Path, change: &Change) -> Result<(), LoadError> {
    let rec = dev.inner.ambient.clone();
    apply_change(dev, &rec, dir, change).await.map(|_| ())
}

/// Pulls every change after `since` into `dir` (created if missing): feed pages of up to
/// 1000, four files in flight, each written atomically and SHA-verified. The walk of the
/// feed stops at the target's [`FeedBounds`](crate::FeedBounds), before anything is written
/// from the page that passes one.
pub async fn pull_vault(dev: &Device, dir: &Path, since: u64) -> Result<TransferReport, LoadError> {
    std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
    check_dir(dir)?;
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let mut cursor = FeedCursor::new(since, dev.target().feed_bounds());
    let mut agg = Applied::default();
    let (mut files, mut dirs, mut deleted, mut own) = (0u64, 0u64, 0u64, 0u64);
    let dir = Arc::new(dir.to_owned());
    loop {
        let page = changes_page(dev, &rec, cursor.seq).await?;
        // The page is judged (stalled, past a bound) before anything is written from it.
        let more = cursor.advance(&page)?;
        // Within one page keep only the last change of each file: later versions supersede.
        let mut last: BTreeMap<&str, &Change> = BTreeMap::new();
        for c in &page.changes {
            last.insert(&c.file_id, c);
        }
        let mut todo: Vec<Change> = last.into_values().cloned().collect();
        todo.sort_by_key(|c| c.seq);
        let mut set: JoinSet<Result<Applied, LoadError>> = JoinSet::new();
        let mut it = todo.into_iter();
        loop {
            while set.len() < protocol::limits::CLIENT_UPLOAD_CONCURRENCY {
                let Some(c) = it.next() else { break };
                let (d, r, dir) = (dev.clone(), rec.clone(), dir.clone());
                set.spawn(async move { apply_change(&d, &r, &dir, &c).await });
            }
            let Some(res) = set.join_next().await else {
                break;
            };
            // On a failure the other downloads are cancelled, and their temp files removed,
            // before the error is returned: the vault then holds only whole files.
            let a = match res {
                Ok(Ok(a)) => a,
                Ok(Err(e)) => {
                    set.shutdown().await;
                    return Err(e);
                }
                Err(e) => {
                    set.shutdown().await;
                    return Err(LoadError::Invalid {
                        what: "pull task".into(),
                        reason: e.to_string().replace('\n', " "),
                    });
                }
            };
            files += a.file as u64;
            dirs += a.dir as u64;
            deleted += a.deleted as u64;
            own += a.own_echo as u64;
            // Sizes are the server's manifests': saturate rather than trust them.
            agg.bytes = agg.bytes.saturating_add(a.bytes);
            agg.chunks = agg.chunks.saturating_add(a.chunks);
        }
        if !more {
            break;
        }
    }
    let seq = cursor.seq;
    let mut r = TransferReport::new(rec.snapshot(), t0.elapsed());
    r.files = files;
    r.dirs = dirs;
    r.deleted = deleted;
    r.own_echo = own;
    r.bytes = agg.bytes;
    r.chunks_transferred = agg.chunks;
    r.last_seq = seq;
    Ok(r)
}

/// Every change after `since`, the last one of each file, in feed order, and the feed's
/// sequence number after them: what a pull applies, for a caller that applies the changes one
/// at a time (the paired cold pull). A feed that lists more than `max_files` distinct files is
/// an error naming the bound, so a server that keeps inventing entries cannot grow the list.
pub async fn list_changes(
    dev: &Device,
    since: u64,
    max_files: usize,
) -> Result<(Vec<Change>, u64), LoadError> {
    let rec = Recorder::new(false);
    let mut cursor = FeedCursor::new(since, dev.target().feed_bounds());
    let mut last: BTreeMap<String, Change> = BTreeMap::new();
    loop {
        let page = changes_page(dev, &rec, cursor.seq).await?;
        let more = cursor.advance(&page)?;
        for c in &page.changes {
            last.insert(c.file_id.clone(), c.clone());
        }
        if last.len() > max_files {
            return Err(LoadError::Invalid {
                what: "changes feed".into(),
                reason: format!(
                    "the feed lists more than {max_files} files, the most this pull expects"
                ),
            });
        }
        if !more {
            break;
        }
    }
    let mut todo: Vec<Change> = last.into_values().collect();
    todo.sort_by_key(|c| c.seq);
    Ok((todo, cursor.seq))
}

/// "Sync now" with nothing changed: reads the feed after `since` and checks each entry
/// against the local copy, then walks `dir` and compares every file's size with the
/// device's index (as the real client compares its cached stat). Changes nothing;
/// `report.mismatched` counts what a real sync would have had to transfer.
pub async fn resync(dev: &Device, dir: &Path, since: u64) -> Result<TransferReport, LoadError> {
    check_dir(dir)?;
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (mut mismatched, mut own, mut files) = (0u64, 0u64, 0u64);
    let mut cursor = FeedCursor::new(since, dev.target().feed_bounds());
    loop {
        let page = changes_page(dev, &rec, cursor.seq).await?;
        let more = cursor.advance(&page)?;
        for c in &page.changes {
            let st = lock_files(dev).get_by_id(&c.file_id);
            match st {
                Some((_, s)) if s.head == c.version_id => {
                    own += (c.device_id == dev.device_id()) as u64
                }
                _ => mismatched += 1,
            }
        }
        if page.changes.is_empty() {
            cursor.seq = cursor.seq.max(page.seq);
        }
        if !more {
            break;
        }
    }
    let seq = cursor.seq;
    let mut walk = Walk::new(dir)?;
    while let Some(e) = walk.next_entry()? {
        if let Entry::File(abs, rel) = e {
            files += 1;
            let size = std::fs::metadata(&abs)
                .map_err(|e| LoadError::io(&abs, e))?
                .len();
            let same = lock_files(dev)
                .by_path
                .get(&rel)
                .is_some_and(|s| !s.is_dir && s.size == size);
            mismatched += (!same) as u64;
        }
    }
    let mut r = TransferReport::new(rec.snapshot(), t0.elapsed());
    r.files = files;
    r.mismatched = mismatched;
    r.own_echo = own;
    r.last_seq = seq;
    Ok(r)
}

/// One chunk's bytes as the target serves them (`GET /v1/chunks/{sid}`), or `None` when it
/// answers `404`. The bytes are returned as served, unchecked: a caller looking for a torn
/// chunk compares their SHA-256 with `sid` itself.
pub async fn get_chunk(dev: &Device, sid: &str) -> Result<Option<bytes::Bytes>, LoadError> {
    let pq = format!("/v1/chunks/{sid}");
    let rec = dev.inner.ambient.clone();
    let a = dev
        .call(&rec, Outgoing::new(Route::GetChunk, &pq), &[200, 404])
        .await?;
    Ok((a.status == 200).then_some(a.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_parses_lengths_and_missing() {
        let body = Bytes::from_static(
            b"--xyz\r\nX-Obsync-Sid: aa\r\nContent-Length: 5\r\n\r\nhe\r\no\r\n--xyz\r\nX-Obsync-Sid: bb\r\nX-Obsync-Missing: 1\r\nContent-Length: 0\r\n\r\n\r\n--xyz--\r\n",
        );
        let parts = parse_multipart("multipart/mixed; boundary=xyz", &body, 3).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].sid, "aa");
        assert_eq!(&parts[0].body[..], b"he\r\no");
        assert!(parts[1].missing);
        assert!(parse_multipart("multipart/mixed", &body, 3).is_err());
        assert!(parse_multipart("multipart/mixed; boundary=q", &body, 3).is_err());
        let e = parse_multipart("multipart/mixed; boundary=xyz", &body, 1).unwrap_err();
        assert!(e.contains("more than the 1 parts"), "{e}");
    }
}

//! Pull: read the feed in pages, fetch chunks in batches of at most three (`multipart/mixed`),
//! write files atomically after checking their SHA-256; idle resync; one change applied.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use protocol::Route;
use protocol::limits::CLIENT_GET_BATCH;
use protocol::wire::{Change, ClientManifest, SidsRequest};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::client::{Device, FileState, Outgoing, lock_files};
use crate::error::LoadError;
use crate::stats::Recorder;

use super::local::{Entry, Walk, check_dir, decode_manifest, local_matches, safe_rel_path};
use super::long_poll::changes_page;
use super::report::TransferReport;

/// One part of a `multipart/mixed` chunk batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub sid: String,
    pub missing: bool,
    pub body: Bytes,
}

/// Parses the `multipart/mixed` answer of `POST /v1/chunks/get` (parts carry
/// `X-Obsync-Sid` and `Content-Length`; a missing chunk has `X-Obsync-Missing: 1`).
pub(crate) fn parse_multipart(content_type: &str, body: &Bytes) -> Result<Vec<Part>, String> {
    let boundary = content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
        .ok_or_else(|| format!("no boundary in content-type {content_type:?}"))?;
    let delim = format!("--{boundary}");
    let d = delim.as_bytes();
    let find = |from: usize, pat: &[u8]| -> Option<usize> {
        body.get(from..)?
            .windows(pat.len())
            .position(|w| w == pat)
            .map(|i| i + from)
    };
    let mut pos = find(0, d).ok_or("no opening boundary")? + d.len();
    let mut parts = Vec::new();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            return Ok(parts);
        }
        if body.get(pos..pos + 2) != Some(b"\r\n") {
            return Err("boundary not followed by CRLF".into());
        }
        pos += 2;
        let hdr_end = find(pos, b"\r\n\r\n").ok_or("unterminated part headers")?;
        let head =
            std::str::from_utf8(&body[pos..hdr_end]).map_err(|_| "non-UTF-8 part headers")?;
        let (mut sid, mut missing, mut len) = (String::new(), false, None);
        for line in head.split("\r\n").filter(|l| !l.is_empty()) {
            let (k, v) = line.split_once(':').ok_or("malformed part header")?;
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                protocol::H_PART_SID => sid = v.to_owned(),
                protocol::H_PART_MISSING => missing = v == "1",
                "content-length" => len = Some(v.parse::<usize>().map_err(|_| "bad part length")?),
                _ => {}
            }
        }
        let start = hdr_end + 4;
        let end = match len {
            Some(n) => start + n,
            None => find(start, format!("\r\n{delim}").as_bytes()).ok_or("unterminated part")?,
        };
        if end > body.len() {
            return Err("part longer than the body".into());
        }
        parts.push(Part {
            sid,
            missing,
            body: body.slice(start..end),
        });
        pos = find(end, d).ok_or("no closing boundary")? + d.len();
    }
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
        let parts = parse_multipart(ct, &a.body).map_err(bad)?;
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

/// Downloads into a temp file beside `abs`, verifies size and SHA-256, fsyncs, renames.
pub(super) async fn download_to(
    dev: &Device,
    rec: &Recorder,
    parent: &Path,
    abs: &Path,
    rel: &str,
    sids: &[String],
    m: &ClientManifest,
) -> Result<u64, LoadError> {
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".vbtmp-{}-{name}", dev.index()));
    let mut f = std::fs::File::create(&tmp).map_err(|e| LoadError::io(&tmp, e))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let fetched = fetch_chunks(dev, rec, sids, |chunk| {
        hasher.update(&chunk);
        size += chunk.len() as u64;
        f.write_all(&chunk).map_err(|e| LoadError::io(&tmp, e))
    })
    .await;
    let result = (|| {
        let n = fetched?;
        let got = hex::encode(hasher.finalize());
        if got != m.sha256 || size != m.size {
            return Err(LoadError::HashMismatch {
                path: rel.to_owned(),
                expected: format!("{} ({} bytes)", m.sha256, m.size),
                got: format!("{got} ({size} bytes)"),
            });
        }
        f.sync_all().map_err(|e| LoadError::io(&tmp, e))?;
        std::fs::rename(&tmp, abs).map_err(|e| LoadError::io(abs, e))?;
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Applies one change to disk as another device would: fetches its chunks (batches of ≤ 3),
/// writes atomically, verifies SHA-256; tombstones delete, renames move.
pub async fn fetch_and_write(dev: &Device, dir: &Path, change: &Change) -> Result<(), LoadError> {
    let rec = dev.inner.ambient.clone();
    apply_change(dev, &rec, dir, change).await.map(|_| ())
}

/// Pulls every change after `since` into `dir` (created if missing): feed pages of up to
/// 1000, four files in flight, each written atomically and SHA-verified.
pub async fn pull_vault(dev: &Device, dir: &Path, since: u64) -> Result<TransferReport, LoadError> {
    std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
    check_dir(dir)?;
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let mut seq = since;
    let mut agg = Applied::default();
    let (mut files, mut dirs, mut deleted, mut own) = (0u64, 0u64, 0u64, 0u64);
    let dir = Arc::new(dir.to_owned());
    loop {
        let page = changes_page(dev, &rec, seq).await?;
        if page.changes.is_empty() {
            break;
        }
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
            let a = res.map_err(|e| LoadError::Invalid {
                what: "pull task".into(),
                reason: e.to_string(),
            })??;
            files += a.file as u64;
            dirs += a.dir as u64;
            deleted += a.deleted as u64;
            own += a.own_echo as u64;
            agg.bytes += a.bytes;
            agg.chunks += a.chunks;
        }
        seq = page.seq.max(seq);
        if seq >= page.head_seq {
            break;
        }
    }
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

/// "Sync now" with nothing changed: reads the feed after `since` and checks each entry
/// against the local copy, then walks `dir` and compares every file's size with the
/// device's index (as the real client compares its cached stat). Changes nothing;
/// `report.mismatched` counts what a real sync would have had to transfer.
pub async fn resync(dev: &Device, dir: &Path, since: u64) -> Result<TransferReport, LoadError> {
    check_dir(dir)?;
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (mut seq, mut mismatched, mut own, mut files) = (since, 0u64, 0u64, 0u64);
    loop {
        let page = changes_page(dev, &rec, seq).await?;
        for c in &page.changes {
            let st = lock_files(dev).get_by_id(&c.file_id);
            match st {
                Some((_, s)) if s.head == c.version_id => {
                    own += (c.device_id == dev.device_id()) as u64
                }
                _ => mismatched += 1,
            }
        }
        if page.changes.is_empty() || page.seq >= page.head_seq {
            seq = page.seq.max(seq);
            break;
        }
        seq = page.seq;
    }
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
        let parts = parse_multipart("multipart/mixed; boundary=xyz", &body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].sid, "aa");
        assert_eq!(&parts[0].body[..], b"he\r\no");
        assert!(parts[1].missing);
        assert!(parse_multipart("multipart/mixed", &body).is_err());
        assert!(parse_multipart("multipart/mixed; boundary=q", &body).is_err());
    }
}

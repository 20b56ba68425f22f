//! Whole-vault and single-file device operations: push (chunk, `chunks/exists`, PUT the
//! missing chunks, post the version), pull (feed pages + batched chunk reads, atomic
//! SHA-verified writes), idle resync, delete, rename, long poll.
//!
//! Client conventions (documented in the crate root): file_id = first 16 bytes of
//! SHA-256("vaultbench/file\n" + path at creation), kept on rename; chunks are fixed 1 MiB
//! cuts, sid = SHA-256(chunk); `manifest_ct` = base64 of a JSON [`ClientManifest`].

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use protocol::Route;
use protocol::limits::{CLIENT_CHUNK_BYTES, CLIENT_GET_BATCH, MAX_CHANGES_LIMIT, MAX_EXISTS_SIDS};
use protocol::wire::{
    Change, ChangesResponse, ClientManifest, MissingResponse, SidsRequest, VersionPost,
    VersionPostResponse,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::client::{Device, FileState, Outgoing, lock_files};
use crate::error::LoadError;
use crate::stats::{HistSummary, Measured, Recorder, RouteStats};

/// `file_id` of a path at creation: the first 16 bytes of SHA-256("vaultbench/file\n" + path).
pub fn file_id_for(path: &str) -> String {
    let d = Sha256::digest(format!("vaultbench/file\n{path}").as_bytes());
    hex::encode(&d[..16])
}

/// Options of a whole-vault push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushOpts {
    /// Files in flight (the real plugin uploads four at a time).
    pub in_flight: usize,
    /// Record a throughput checkpoint every this many files.
    pub checkpoint_every: usize,
}

impl Default for PushOpts {
    fn default() -> Self {
        PushOpts {
            in_flight: protocol::limits::CLIENT_UPLOAD_CONCURRENCY,
            checkpoint_every: 1000,
        }
    }
}

/// Throughput over one checkpoint interval of a transfer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checkpoint {
    /// Files done when the checkpoint was taken.
    pub files: u64,
    /// Milliseconds since the transfer began.
    pub elapsed_ms: u64,
    /// Files per second since the previous checkpoint.
    pub files_per_s: f64,
}

fn ser_sign<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    HistSummary::of(h, 1).serialize(s)
}

/// What a push, pull or resync did.
#[derive(Debug, Clone, Serialize)]
pub struct TransferReport {
    /// Files pushed / written / compared (not folders).
    pub files: u64,
    /// Folders pushed / created.
    pub dirs: u64,
    /// File bytes pushed or written.
    pub bytes: u64,
    pub wall_ns: u64,
    /// Requests made, all routes.
    pub requests: u64,
    /// Chunks uploaded (push) or downloaded (pull).
    pub chunks_transferred: u64,
    /// Push: chunks the server already had (content dedupe).
    pub chunks_present: u64,
    /// Tombstones applied (pull) or sent.
    pub deleted: u64,
    /// Changes that were this device's own writes coming back (pull, resync).
    pub own_echo: u64,
    /// Resync: local files or feed entries that disagree with the device's index.
    pub mismatched: u64,
    /// The last change-feed seq seen (pull, resync) or posted (push).
    pub last_seq: u64,
    pub checkpoints: Vec<Checkpoint>,
    pub routes: BTreeMap<String, RouteStats>,
    /// Signing time in ns (summarised in µs in JSON).
    #[serde(rename = "signing_us", serialize_with = "ser_sign")]
    pub signing: Histogram<u64>,
}

impl TransferReport {
    fn new(m: Measured, wall: Duration) -> TransferReport {
        TransferReport {
            files: 0,
            dirs: 0,
            bytes: 0,
            wall_ns: wall.as_nanos() as u64,
            requests: m.requests(),
            chunks_transferred: 0,
            chunks_present: 0,
            deleted: 0,
            own_echo: 0,
            mismatched: 0,
            last_seq: 0,
            checkpoints: Vec::new(),
            routes: m.routes,
            signing: m.signing,
        }
    }

    /// Latency summary of one route in µs.
    pub fn latency_summary(&self, route: &str) -> Option<HistSummary> {
        self.routes.get(route).map(RouteStats::summary)
    }

    /// The HdrHistogram (µs) of one route.
    pub fn histogram(&self, route: &str) -> Option<&Histogram<u64>> {
        self.routes.get(route).map(|r| r.headline())
    }

    /// Signing time summarised in µs.
    pub fn signing_summary(&self) -> HistSummary {
        HistSummary::of(&self.signing, 1)
    }

    /// Files per second over the whole transfer.
    pub fn files_per_s(&self) -> f64 {
        self.files as f64 / (self.wall_ns as f64 / 1e9).max(1e-9)
    }
}

/// The answer to one version post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushedVersion {
    pub path: String,
    pub file_id: String,
    pub version_id: String,
    pub seq: u64,
    pub bytes: u64,
    pub conflicted: bool,
    /// Requests this operation made.
    pub requests: u64,
    /// Chunks uploaded.
    pub chunks_put: u64,
}

/// Rejects paths a server could use to escape the vault.
pub(crate) fn safe_rel_path(p: &str) -> Result<&str, LoadError> {
    let bad = p.is_empty()
        || p.starts_with('/')
        || p.contains('\\')
        || p.contains('\0')
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        Err(LoadError::UnsafePath { path: p.to_owned() })
    } else {
        Ok(p)
    }
}

fn manifest_bytes(path: &str, is_dir: bool, size: u64, sha256: &str) -> Vec<u8> {
    serde_json::to_vec(&ClientManifest {
        path: path.to_owned(),
        kind: if is_dir { "dir" } else { "file" }.to_owned(),
        size,
        sha256: sha256.to_owned(),
    })
    .expect("plain struct serialises")
}

/// Decodes a change's manifest (base64 of the JSON [`ClientManifest`]).
pub fn decode_manifest(change: &Change) -> Result<ClientManifest, LoadError> {
    let bad = |d: String| LoadError::BadAnswer {
        route: Route::Changes.label().into(),
        detail: format!("seq {}: {d}", change.seq),
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&change.manifest_ct)
        .map_err(|e| bad(format!("manifest_ct is not base64: {e}")))?;
    serde_json::from_slice(&raw)
        .map_err(|e| bad(format!("manifest is not a vaultbench manifest: {e}")))
}

/// Hashes a file in 1 MiB cuts: (sids in order, whole-file SHA-256, size). Blocking.
fn hash_file(path: &Path) -> std::io::Result<(Vec<String>, String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; CLIENT_CHUNK_BYTES];
    let mut whole = Sha256::new();
    let mut sids = Vec::new();
    let mut size = 0u64;
    loop {
        let n = read_full(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        whole.update(&buf[..n]);
        sids.push(hex::encode(Sha256::digest(&buf[..n])));
        size += n as u64;
        if n < buf.len() {
            break;
        }
    }
    Ok((sids, hex::encode(whole.finalize()), size))
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

async fn blocking<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, LoadError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| LoadError::io(path, e)),
        Err(e) => Err(LoadError::io(path, std::io::Error::other(e.to_string()))),
    }
}

/// The current heads of `file_id` on the server, or none if the server does not know it.
async fn server_heads(
    dev: &Device,
    rec: &Recorder,
    file_id: &str,
) -> Result<Vec<String>, LoadError> {
    let pq = format!("/v1/files/{file_id}");
    let a = dev
        .call(rec, Outgoing::new(Route::GetFile, &pq), &[200, 404])
        .await?;
    if a.status == 404 {
        return Ok(Vec::new());
    }
    let f: protocol::wire::FileResponse = a.json(Route::GetFile)?;
    Ok(f.heads)
}

/// Posts one version and updates the local index.
#[allow(clippy::too_many_arguments)]
async fn post_version(
    dev: &Device,
    rec: &Recorder,
    path: &str,
    file_id: &str,
    parents: Vec<String>,
    sids: Vec<String>,
    size: u64,
    sha256: &str,
    is_dir: bool,
    deleted: bool,
) -> Result<VersionPostResponse, LoadError> {
    let manifest = manifest_bytes(path, is_dir, size, sha256);
    let version_id = protocol::version_id(file_id, &parents, &manifest, &sids).map_err(|e| {
        LoadError::Invalid {
            what: path.to_owned(),
            reason: e.to_string(),
        }
    })?;
    let post = VersionPost {
        version_id: version_id.clone(),
        parents,
        sids: sids.clone(),
        bytes: size,
        domain_id: dev.domain_id().to_owned(),
        manifest_ct: base64::engine::general_purpose::STANDARD.encode(&manifest),
        manifest_nonce: dev.random_hex(12),
        deleted,
    };
    let pq = format!("/v1/files/{file_id}/versions");
    let body = serde_json::to_vec(&post).expect("plain struct serialises");
    let a = dev
        .call(
            rec,
            Outgoing::post_json(Route::PostVersion, &pq, body),
            &[200, 201],
        )
        .await?;
    let r: VersionPostResponse = a.json(Route::PostVersion)?;
    let mut idx = lock_files(dev);
    if deleted {
        idx.remove_id(file_id);
    } else {
        idx.insert(
            path,
            FileState {
                file_id: file_id.to_owned(),
                head: r.version_id.clone(),
                sids,
                size,
                sha256: sha256.to_owned(),
                is_dir,
            },
        );
    }
    Ok(r)
}

/// Uploads the chunks of `abs` the server lacks. Returns (uploaded, already present).
async fn upload_missing(
    dev: &Device,
    rec: &Recorder,
    abs: &Path,
    sids: &[String],
) -> Result<(u64, u64), LoadError> {
    let mut uniq: Vec<&String> = sids.iter().collect();
    uniq.sort();
    uniq.dedup();
    let mut missing = Vec::new();
    for batch in uniq.chunks(MAX_EXISTS_SIDS) {
        let body = serde_json::to_vec(&SidsRequest {
            sids: batch.iter().map(|s| (*s).clone()).collect(),
        })
        .expect("plain struct serialises");
        let a = dev
            .call(
                rec,
                Outgoing::post_json(Route::ChunksExists, "/v1/chunks/exists", body),
                &[200],
            )
            .await?;
        let m: MissingResponse = a.json(Route::ChunksExists)?;
        missing.extend(m.missing);
    }
    let mut present = uniq.len() as u64 - missing.len() as u64;
    let mut put = 0;
    for sid in &missing {
        let cell = crate::client::lock(&dev.inner.uploads)
            .entry(sid.clone())
            .or_default()
            .clone();
        let did_put = std::sync::atomic::AtomicBool::new(false);
        cell.get_or_try_init(|| async {
            // Chunk i starts at i MiB: read exactly that piece back from disk.
            let Some(i) = sids.iter().position(|s| s == sid) else {
                return Err(LoadError::BadAnswer {
                    route: Route::ChunksExists.label().into(),
                    detail: format!("missing sid {sid} was never asked about"),
                });
            };
            let p = abs.to_owned();
            let data = blocking(abs, move || {
                let f = std::fs::File::open(&p)?;
                let mut buf = vec![0u8; CLIENT_CHUNK_BYTES];
                let mut n = 0;
                let off = (i * CLIENT_CHUNK_BYTES) as u64;
                while n < buf.len() {
                    match f.read_at(&mut buf[n..], off + n as u64)? {
                        0 => break,
                        k => n += k,
                    }
                }
                buf.truncate(n);
                Ok(buf)
            })
            .await?;
            let pq = format!("/v1/chunks/{sid}");
            let req = Outgoing {
                body: Bytes::from(data),
                body_sha256: Some(sid),
                content_type: Some("application/octet-stream"),
                ..Outgoing::new(Route::PutChunk, &pq)
            };
            dev.call(rec, req, &[200, 201]).await?;
            did_put.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok::<(), LoadError>(())
        })
        .await?;
        if did_put.into_inner() {
            put += 1;
        } else {
            present += 1;
        }
    }
    Ok((put, present))
}

struct OneFile {
    version: VersionPostResponse,
    size: u64,
    put: u64,
    present: u64,
}

async fn push_one(
    dev: &Device,
    rec: &Recorder,
    abs: PathBuf,
    rel: String,
    ask_server: bool,
) -> Result<OneFile, LoadError> {
    let p = abs.clone();
    let (sids, sha, size) = blocking(&abs, move || hash_file(&p)).await?;
    let known = lock_files(dev)
        .by_path
        .get(&rel)
        .map(|s| (s.file_id.clone(), s.head.clone()));
    // A cold push sends what a real client sends for a new note (exists, PUT, version
    // post): it does not ask the server for heads of files it has never seen.
    let (file_id, parents) = match known {
        Some((id, head)) => (id, vec![head]),
        None if ask_server => {
            let id = file_id_for(&rel);
            let heads = server_heads(dev, rec, &id).await?;
            (id, heads)
        }
        None => (file_id_for(&rel), vec![]),
    };
    let (put, present) = upload_missing(dev, rec, &abs, &sids).await?;
    let version = post_version(
        dev, rec, &rel, &file_id, parents, sids, size, &sha, false, false,
    )
    .await?;
    Ok(OneFile {
        version,
        size,
        put,
        present,
    })
}

/// One entry of a vault walk.
enum Entry {
    Dir(String),
    File(PathBuf, String),
}

/// Walks `root` depth-first in sorted order, one directory listing in memory at a time per
/// level, skipping symlinks and vaultbench's own temp files.
struct Walk {
    stack: Vec<WalkLevel>,
}

/// (absolute dir, its vault-relative path, the rest of its sorted listing)
type WalkLevel = (PathBuf, String, std::vec::IntoIter<(String, bool)>);

impl Walk {
    fn new(root: &Path) -> Result<Walk, LoadError> {
        let list = list_dir(root)?;
        Ok(Walk {
            stack: vec![(root.to_owned(), String::new(), list.into_iter())],
        })
    }

    fn next_entry(&mut self) -> Result<Option<Entry>, LoadError> {
        loop {
            let Some((dir, rel, it)) = self.stack.last_mut() else {
                return Ok(None);
            };
            let Some((name, is_dir)) = it.next() else {
                self.stack.pop();
                continue;
            };
            let abs = dir.join(&name);
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if is_dir {
                let list = list_dir(&abs)?;
                self.stack.push((abs, r.clone(), list.into_iter()));
                return Ok(Some(Entry::Dir(r)));
            }
            return Ok(Some(Entry::File(abs, r)));
        }
    }
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with(".vbtmp-")
}

fn list_dir(dir: &Path) -> Result<Vec<(String, bool)>, LoadError> {
    let rd = std::fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| LoadError::io(dir, e))?;
        let ft = e.file_type().map_err(|err| LoadError::io(e.path(), err))?;
        let Ok(name) = e.file_name().into_string() else {
            return Err(LoadError::Invalid {
                what: e.path().display().to_string(),
                reason: "file name is not UTF-8".into(),
            });
        };
        if is_temp_name(&name) || ft.is_symlink() {
            continue;
        }
        if ft.is_dir() || ft.is_file() {
            out.push((name, ft.is_dir()));
        }
    }
    out.sort();
    Ok(out)
}

fn check_dir(dir: &Path) -> Result<(), LoadError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(LoadError::Invalid {
            what: dir.display().to_string(),
            reason: "is not a directory".into(),
        }),
        Err(e) => Err(LoadError::io(dir, e)),
    }
}

/// Pushes every folder and file under `dir` with `opts.in_flight` files in flight. Streams
/// from disk: at most one 1 MiB chunk per file in flight is held in memory.
pub async fn push_vault(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> Result<TransferReport, LoadError> {
    check_dir(dir)?;
    if opts.in_flight == 0 || opts.checkpoint_every == 0 {
        return Err(LoadError::Invalid {
            what: "push options".into(),
            reason: "in_flight and checkpoint_every must be at least 1".into(),
        });
    }
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let mut walk = Walk::new(dir)?;
    let mut set: JoinSet<Result<(bool, OneFile), LoadError>> = JoinSet::new();
    let (mut files, mut dirs, mut bytes, mut put, mut present, mut last_seq) = (0, 0, 0, 0, 0, 0);
    let mut checkpoints = Vec::new();
    let mut last_cp = (0u64, Duration::ZERO);
    let mut done = false;
    while !done || !set.is_empty() {
        while !done && set.len() < opts.in_flight {
            match walk.next_entry()? {
                None => done = true,
                Some(Entry::Dir(rel)) => {
                    let (d, r) = (dev.clone(), rec.clone());
                    set.spawn(async move {
                        let id = file_id_for(&rel);
                        let v = post_version(&d, &r, &rel, &id, vec![], vec![], 0, "", true, false)
                            .await?;
                        Ok((
                            true,
                            OneFile {
                                version: v,
                                size: 0,
                                put: 0,
                                present: 0,
                            },
                        ))
                    });
                }
                Some(Entry::File(abs, rel)) => {
                    let (d, r) = (dev.clone(), rec.clone());
                    set.spawn(async move {
                        push_one(&d, &r, abs, rel, false).await.map(|f| (false, f))
                    });
                }
            }
        }
        let Some(res) = set.join_next().await else {
            continue;
        };
        let (is_dir, one) = res.map_err(|e| LoadError::Invalid {
            what: "push task".into(),
            reason: e.to_string(),
        })??;
        last_seq = last_seq.max(one.version.seq);
        if is_dir {
            dirs += 1;
            continue;
        }
        files += 1;
        bytes += one.size;
        put += one.put;
        present += one.present;
        if files % opts.checkpoint_every as u64 == 0 {
            let now = t0.elapsed();
            checkpoints.push(checkpoint(files, now, last_cp));
            last_cp = (files, now);
        }
    }
    let wall = t0.elapsed();
    if files > last_cp.0 {
        checkpoints.push(checkpoint(files, wall, last_cp));
    }
    let mut r = TransferReport::new(rec.snapshot(), wall);
    r.files = files;
    r.dirs = dirs;
    r.bytes = bytes;
    r.chunks_transferred = put;
    r.chunks_present = present;
    r.last_seq = last_seq;
    r.checkpoints = checkpoints;
    Ok(r)
}

fn checkpoint(files: u64, now: Duration, last: (u64, Duration)) -> Checkpoint {
    let dt = (now - last.1).as_secs_f64().max(1e-9);
    Checkpoint {
        files,
        elapsed_ms: now.as_millis() as u64,
        files_per_s: (files - last.0) as f64 / dt,
    }
}

/// Pushes one file as a new version whose parent is the current head (from this device's
/// index, else from `GET /v1/files/{id}`).
pub async fn push_file(
    dev: &Device,
    vault_dir: &Path,
    rel_path: &str,
) -> Result<PushedVersion, LoadError> {
    let rel = safe_rel_path(rel_path)?.to_owned();
    let rec = dev.inner.ambient.clone();
    let before = rec.snapshot().requests();
    let one = push_one(dev, &rec, vault_dir.join(&rel), rel.clone(), true).await?;
    Ok(PushedVersion {
        file_id: lock_files(dev).by_path[&rel].file_id.clone(),
        path: rel,
        version_id: one.version.version_id,
        seq: one.version.seq,
        bytes: one.size,
        conflicted: one.version.conflicted,
        requests: rec.snapshot().requests() - before,
        chunks_put: one.put,
    })
}

/// The file_id and head of `rel` as this device knows it, else as the server does.
async fn known_or_server(
    dev: &Device,
    rec: &Recorder,
    rel: &str,
) -> Result<(String, Vec<String>, FileState), LoadError> {
    if let Some(st) = lock_files(dev).by_path.get(rel).cloned() {
        return Ok((st.file_id.clone(), vec![st.head.clone()], st));
    }
    let id = file_id_for(rel);
    let pq = format!("/v1/files/{id}");
    let a = dev
        .call(rec, Outgoing::new(Route::GetFile, &pq), &[200, 404])
        .await?;
    if a.status == 404 {
        return Err(LoadError::UnknownPath {
            path: rel.to_owned(),
        });
    }
    let f: protocol::wire::FileResponse = a.json(Route::GetFile)?;
    let v = f.versions.last().ok_or_else(|| LoadError::UnknownPath {
        path: rel.to_owned(),
    })?;
    let m = decode_manifest(v)?;
    let st = FileState {
        file_id: id.clone(),
        head: v.version_id.clone(),
        sids: v.sids.clone(),
        size: v.bytes,
        sha256: m.sha256,
        is_dir: m.kind == "dir",
    };
    Ok((id, f.heads, st))
}

/// Deletes a file: posts a tombstone (no sids, `deleted: true`) on top of its head.
pub async fn delete_file(dev: &Device, rel_path: &str) -> Result<PushedVersion, LoadError> {
    let rel = safe_rel_path(rel_path)?;
    let rec = dev.inner.ambient.clone();
    let before = rec.snapshot().requests();
    let (id, parents, st) = known_or_server(dev, &rec, rel).await?;
    let v = post_version(dev, &rec, rel, &id, parents, vec![], 0, "", st.is_dir, true).await?;
    Ok(PushedVersion {
        path: rel.to_owned(),
        file_id: id,
        version_id: v.version_id,
        seq: v.seq,
        bytes: 0,
        conflicted: v.conflicted,
        requests: rec.snapshot().requests() - before,
        chunks_put: 0,
    })
}

/// Renames a file, or a folder and every file and folder under it: each gets a new version
/// with the new path in its manifest and the same chunks (file_id is kept).
pub async fn rename_path(
    dev: &Device,
    from: &str,
    to: &str,
) -> Result<Vec<PushedVersion>, LoadError> {
    let from = safe_rel_path(from)?;
    let to = safe_rel_path(to)?;
    let rec = dev.inner.ambient.clone();
    let prefix = format!("{from}/");
    let mut moves: Vec<(String, FileState)> = lock_files(dev)
        .by_path
        .iter()
        .filter(|(p, _)| p.as_str() == from || p.starts_with(&prefix))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect();
    if moves.is_empty() {
        let (_, _, st) = known_or_server(dev, &rec, from).await?;
        moves.push((from.to_owned(), st));
    }
    let mut out = Vec::with_capacity(moves.len());
    for (old, st) in moves {
        let before = rec.snapshot().requests();
        let new = format!("{to}{}", &old[from.len()..]);
        let v = post_version(
            dev,
            &rec,
            &new,
            &st.file_id,
            vec![st.head.clone()],
            st.sids.clone(),
            st.size,
            &st.sha256,
            st.is_dir,
            false,
        )
        .await?;
        out.push(PushedVersion {
            path: new,
            file_id: st.file_id,
            version_id: v.version_id,
            seq: v.seq,
            bytes: st.size,
            conflicted: v.conflicted,
            requests: rec.snapshot().requests() - before,
            chunks_put: 0,
        });
    }
    Ok(out)
}

/// Holds `GET /v1/changes?since=..&wait=..` until a change lands or `wait_s` (≤ 55) passes.
pub async fn wait_changes(
    dev: &Device,
    since: u64,
    wait_s: u64,
) -> Result<ChangesResponse, LoadError> {
    let wait_s = wait_s.min(protocol::limits::MAX_WAIT_S);
    let pq = format!("/v1/changes?since={since}&wait={wait_s}&limit={MAX_CHANGES_LIMIT}");
    let a = dev
        .call(
            &dev.inner.ambient,
            Outgoing::new(Route::Changes, &pq).timeout(Duration::from_secs(wait_s + 15)),
            &[200],
        )
        .await?;
    a.json(Route::Changes)
}

async fn changes_page(
    dev: &Device,
    rec: &Recorder,
    since: u64,
) -> Result<ChangesResponse, LoadError> {
    let pq = format!("/v1/changes?since={since}&limit={MAX_CHANGES_LIMIT}");
    let a = dev
        .call(rec, Outgoing::new(Route::Changes, &pq), &[200])
        .await?;
    a.json(Route::Changes)
}

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
async fn fetch_chunks(
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
struct Applied {
    file: bool,
    dir: bool,
    deleted: bool,
    own_echo: bool,
    bytes: u64,
    chunks: u64,
}

fn local_matches(abs: &Path, size: u64, sha: &str) -> bool {
    match std::fs::metadata(abs) {
        Ok(m) if m.is_file() && m.len() == size => {
            hash_file(abs).map(|(_, h, _)| h == sha).unwrap_or(false)
        }
        _ => false,
    }
}

async fn apply_change(
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
async fn download_to(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ids_are_16_bytes_and_path_bound() {
        let a = file_id_for("notes/a.md");
        assert_eq!(a.len(), 32);
        assert_ne!(a, file_id_for("notes/b.md"));
    }

    #[test]
    fn unsafe_paths_refused() {
        for p in ["", "/etc/passwd", "a/../b", "..", "a//b", "./a", "a\\b"] {
            assert!(safe_rel_path(p).is_err(), "{p:?}");
        }
        assert!(safe_rel_path("a/b c.md").is_ok());
    }

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

    #[test]
    fn hash_file_cuts_at_one_mib() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..CLIENT_CHUNK_BYTES + 10)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let (sids, sha, size) = hash_file(&p).unwrap();
        assert_eq!(size, data.len() as u64);
        assert_eq!(sids.len(), 2);
        assert_eq!(
            sids[1],
            hex::encode(Sha256::digest(&data[CLIENT_CHUNK_BYTES..]))
        );
        assert_eq!(sha, hex::encode(Sha256::digest(&data)));
        std::fs::write(&p, b"").unwrap();
        assert_eq!(hash_file(&p).unwrap().0.len(), 0);
    }

    #[test]
    fn walk_is_sorted_and_skips_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/x.md"), b"x").unwrap();
        std::fs::write(dir.path().join("a.md"), b"a").unwrap();
        std::fs::write(dir.path().join(".vbtmp-0-a.md"), b"t").unwrap();
        let mut w = Walk::new(dir.path()).unwrap();
        let mut seen = Vec::new();
        while let Some(e) = w.next_entry().unwrap() {
            seen.push(match e {
                Entry::Dir(r) => format!("d:{r}"),
                Entry::File(_, r) => format!("f:{r}"),
            });
        }
        assert_eq!(seen, ["f:a.md", "d:b", "d:b/c", "f:b/c/x.md"]);
    }
}

//! Push: cut a file into chunks, ask `chunks/exists`, PUT the missing chunks (once per sid
//! per device), post the version; a whole vault with four files in flight, or one file.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use protocol::Route;
use protocol::limits::{CLIENT_CHUNK_BYTES, MAX_EXISTS_SIDS};
use protocol::wire::{MissingResponse, SidsRequest, VersionPost, VersionPostResponse};
use tokio::task::JoinSet;

use crate::error::LoadError;
use crate::protocols::obsync::client::{Device, FileState, Outgoing, lock_files};
use crate::stats::Recorder;

use super::local::{
    Entry, Walk, blocking, check_dir, file_id_for, hash_file, manifest_bytes, safe_rel_path,
};
use crate::transfer::{PushOpts, PushedVersion, TransferReport, checkpoint};

/// The current heads of `file_id` on the server, or none if the server does not know it.
pub(super) async fn server_heads(
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
pub(super) async fn post_version(
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
pub(super) async fn upload_missing(
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
        // The server may only name sids it was asked about, each once.
        let mut named = m.missing;
        named.sort();
        named.dedup();
        if let Some(stray) = named
            .iter()
            .find(|s| batch.binary_search_by(|b| b.as_str().cmp(s)).is_err())
        {
            return Err(LoadError::BadAnswer {
                route: Route::ChunksExists.label().into(),
                detail: format!("missing sid {} was never asked about", clip(stray)),
            });
        }
        missing.extend(named);
    }
    // `missing` is a subset of `uniq` (checked above), so this cannot go below zero.
    let mut present = (uniq.len() - missing.len()) as u64;
    let mut put = 0;
    for sid in &missing {
        let cell = crate::lock::lock(&dev.inner.uploads)
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

pub(super) struct OneFile {
    version: VersionPostResponse,
    size: u64,
    put: u64,
    present: u64,
}

/// What one push task did.
pub(super) enum Pushed {
    File,
    Dir,
    /// Already acknowledged with the same content (a resumed push).
    Skipped,
}

impl OneFile {
    /// A file a resumed push found already acknowledged: counted as neither file nor dir.
    fn skipped() -> OneFile {
        OneFile {
            version: VersionPostResponse {
                seq: 0,
                version_id: String::new(),
                heads: Vec::new(),
                conflicted: false,
            },
            size: 0,
            put: 0,
            present: 0,
        }
    }
}

pub(super) async fn push_one(
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

/// Pushes every folder and file under `dir` with `opts.in_flight` files in flight. Streams
/// from disk: at most one 1 MiB chunk per file in flight is held in memory.
pub async fn push_vault(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> Result<TransferReport, LoadError> {
    push_vault_from(dev, dir, opts, false).await
}

/// Resumes an interrupted [`push_vault`]: entries this device already has acknowledged with
/// the same content are skipped; the rest are pushed (a file the server already holds under a
/// head this device never saw acknowledged gets its heads asked first, as any client would).
pub async fn resume_vault(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> Result<TransferReport, LoadError> {
    push_vault_from(dev, dir, opts, true).await
}

/// A whole-vault push that failed part way: the error, and what the push had sent by then
/// (`report.requests` and `report.routes` count every request it made, those of the tasks
/// still in flight at the failure included; the file counts stay 0).
#[derive(Debug)]
pub struct Interrupted {
    pub error: LoadError,
    pub report: TransferReport,
}

/// [`push_vault`] (`resume` false) or [`resume_vault`] (`resume` true) that, on failure,
/// lets the files in flight finish or fail and returns what the push sent
/// ([`Interrupted`]): the requests a push cut short by a crash still count.
pub async fn push_vault_counted(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
    resume: bool,
) -> Result<TransferReport, Interrupted> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    push_vault_inner(dev, dir, opts, resume, resume, &rec, true)
        .await
        .map_err(|error| Interrupted {
            error,
            report: TransferReport::new(rec.snapshot(), t0.elapsed()),
        })
}

async fn push_vault_from(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
    resume: bool,
) -> Result<TransferReport, LoadError> {
    push_vault_inner(dev, dir, opts, resume, resume, &Recorder::new(false), false).await
}

/// The push. With `resume`, entries the device's index holds with the same content are
/// skipped; with `ask_server`, a file the index does not hold gets the server's heads asked
/// first (not needed when the index holds the server's whole listing). With `drain`, a
/// failure first waits for the tasks in flight (each bounded by its requests' timeouts), so
/// `rec` holds every request sent.
pub(super) async fn push_vault_inner(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
    resume: bool,
    ask_server: bool,
    rec: &Recorder,
    drain: bool,
) -> Result<TransferReport, LoadError> {
    check_dir(dir)?;
    if opts.in_flight == 0 || opts.checkpoint_every == 0 {
        return Err(LoadError::Invalid {
            what: "push options".into(),
            reason: "in_flight and checkpoint_every must be at least 1".into(),
        });
    }
    let t0 = Instant::now();
    let mut walk = Walk::new(dir)?;
    // Each task also returns how long its file took, for the checkpoints' median latency.
    let mut set: JoinSet<Result<(Pushed, OneFile, Duration), LoadError>> = JoinSet::new();
    let mut lat = crate::transfer::WindowLatency::default();
    let (mut files, mut dirs, mut bytes, mut put, mut present, mut last_seq) = (0, 0, 0, 0, 0, 0);
    let mut checkpoints = Vec::new();
    let mut last_cp = (0u64, Duration::ZERO);
    let mut done = false;
    while !done || !set.is_empty() {
        while !done && set.len() < opts.in_flight {
            match walk.next_entry()? {
                None => done = true,
                Some(Entry::Dir(rel)) if resume && lock_files(dev).by_path.contains_key(&rel) => {}
                Some(Entry::Dir(rel)) => {
                    let (d, r) = (dev.clone(), rec.clone());
                    set.spawn(async move {
                        let t = Instant::now();
                        let id = file_id_for(&rel);
                        let v = post_version(&d, &r, &rel, &id, vec![], vec![], 0, "", true, false)
                            .await?;
                        Ok((
                            Pushed::Dir,
                            OneFile {
                                version: v,
                                size: 0,
                                put: 0,
                                present: 0,
                            },
                            t.elapsed(),
                        ))
                    });
                }
                Some(Entry::File(abs, rel)) => {
                    let (d, r) = (dev.clone(), rec.clone());
                    set.spawn(async move {
                        let t = Instant::now();
                        if resume {
                            let p = abs.clone();
                            let (_, sha, _) = blocking(&abs, move || hash_file(&p)).await?;
                            let synced = lock_files(&d)
                                .by_path
                                .get(&rel)
                                .is_some_and(|s| s.sha256 == sha);
                            if synced {
                                return Ok((Pushed::Skipped, OneFile::skipped(), t.elapsed()));
                            }
                        }
                        push_one(&d, &r, abs, rel, ask_server)
                            .await
                            .map(|f| (Pushed::File, f, t.elapsed()))
                    });
                }
            }
        }
        let Some(res) = set.join_next().await else {
            continue;
        };
        let (kind, one, took) = match res.map_err(|e| LoadError::Invalid {
            what: "push task".into(),
            reason: e.to_string(),
        }) {
            Ok(Ok(done)) => done,
            Ok(Err(e)) | Err(e) => {
                if drain {
                    while set.join_next().await.is_some() {}
                }
                return Err(e);
            }
        };
        last_seq = last_seq.max(one.version.seq);
        match kind {
            Pushed::Skipped => continue,
            Pushed::Dir => {
                dirs += 1;
                continue;
            }
            Pushed::File => {}
        }
        files += 1;
        bytes += one.size;
        put += one.put;
        present += one.present;
        lat.push(took);
        if files % opts.checkpoint_every as u64 == 0 {
            let now = t0.elapsed();
            let mut cp = checkpoint(files, now, last_cp);
            cp.p50_ms = lat.take_p50();
            checkpoints.push(cp);
            last_cp = (files, now);
        }
    }
    let wall = t0.elapsed();
    if files > last_cp.0 {
        let mut cp = checkpoint(files, wall, last_cp);
        cp.p50_ms = lat.take_p50();
        checkpoints.push(cp);
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

/// At most 80 characters of a server's text, for a one-line error.
/// A server's string for a message: quoted, escaped and clipped.
fn clip(s: &str) -> String {
    contract::quote::quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A push that fails still reports every request it sent: three files in flight against
    /// a closed port, each tried three times (connect refused), counted whole.
    #[tokio::test]
    async fn an_interrupted_push_counts_the_requests_of_every_file_in_flight() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let target = crate::Target::parse(&format!("http://{port}"), false).unwrap();
        let dev = crate::protocols::obsync::client::tests::test_device(target);
        let dir = tempfile::tempdir().unwrap();
        for n in ["a.md", "b.md", "c.md"] {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let opts = PushOpts {
            in_flight: 4,
            checkpoint_every: 1,
        };
        let e = push_vault_counted(&dev, dir.path(), &opts, false)
            .await
            .unwrap_err();
        assert!(matches!(e.error, LoadError::Transport { .. }), "{e:?}");
        assert_eq!(e.report.requests, 9, "{:?}", e.report.routes.keys());
        assert!(push_vault(&dev, dir.path(), &opts).await.is_err());
    }
}

//! Delete and rename: a tombstone, or a version of the same file id under a new path (the
//! manifest carries the path, so the file id is kept).

use protocol::Route;

use crate::error::LoadError;
use crate::protocols::obsync::client::{Device, FileState, Outgoing, lock_files};
use crate::stats::Recorder;

use super::local::{decode_manifest, file_id_for, safe_rel_path};
use super::push::post_version;
use crate::transfer::PushedVersion;

/// The file_id and head of `rel` as this device knows it, else as the server does.
pub(super) async fn known_or_server(
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

//! Whole-vault operations over tus: an import (every file of a vault uploaded as its own
//! upload, its vault path in `Upload-Metadata`), and the read-back of an import (`HEAD` of
//! each upload for its offset, length and metadata, `GET` for its bytes, written under a
//! directory the caller compares with the vault). tus has no listing: the read-back knows the
//! uploads from the import's record ([`Imported`]).
//!
//! Reports are the shared [`TransferReport`]; the fields with no tus meaning (chunks, echo,
//! sequence numbers) stay zero.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;

use super::client::{Recorder, TusClient, Uploaded};
use super::error::TusError;
use super::header;
use crate::TransferReport;
use crate::inflight::{Progress, each_in_flight};
use crate::transfer::{local_tree, report};

/// Files in flight during a read-back: the figure every protocol's whole-vault transfer uses.
pub const IN_FLIGHT: usize = 4;

/// How an import uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOpts {
    pub in_flight: usize,
    pub checkpoint_every: usize,
}

/// One file's upload, as the import recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The upload's path on the target.
    pub url: String,
    pub len: u64,
    /// The `Upload-Metadata` pairs sent.
    pub meta: BTreeMap<String, String>,
}

/// What an import did beside its report: every upload by vault path, and the totals of the
/// protocol's own counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    pub uploads: BTreeMap<String, Upload>,
    /// `HEAD`s sent to resume, over every upload.
    pub resumes: u64,
    /// Body bytes sent beyond the files' lengths.
    pub resent_bytes: u64,
    /// `409 Conflict` answers.
    pub conflicts: u64,
    /// `460 Checksum Mismatch` answers.
    pub mismatches: u64,
    /// Uploads that needed at least one resume.
    pub resumed_uploads: u64,
}

/// The `Upload-Metadata` of vault file `rel`: `relativePath` (the vault path, folders
/// included, under the key Uppy's tus uploads give a file's path in a dropped folder) and
/// `filetype` (by extension, as tus-js-client's browser uploads send the file's type).
///
/// Not `filename`: `@tus/server` 2.4.5 copies `filename` raw into the `Content-Disposition` of
/// its `GET` answer, and a name with a character above U+00FF (a CJK note name) makes that
/// `GET` answer 500, so no such note could be read back.
pub fn metadata_of(rel: &str) -> BTreeMap<String, String> {
    let ext = rel.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let filetype = match ext.as_deref() {
        Some("md") => "text/markdown",
        Some("txt") => "text/plain",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
    };
    BTreeMap::from([
        ("relativePath".to_owned(), rel.to_owned()),
        ("filetype".to_owned(), filetype.to_owned()),
    ])
}

/// Uploads every file under `dir`, `opts.in_flight` at once, each as its own upload. The
/// client has discovered the server's capabilities.
pub async fn import_vault(
    client: &TusClient,
    dir: &Path,
    opts: ImportOpts,
) -> Result<(TransferReport, Imported), TusError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let (dirs, files) = local_tree(dir)?;
    let mut progress = Progress::new(t0, opts.checkpoint_every);
    let mut imported = Imported::default();
    let start = |(rel, abs, _): (String, PathBuf, u64)| {
        let (c, r) = (client.clone(), rec.clone());
        Ok::<_, TusError>(async move {
            let body = tokio::fs::read(&abs)
                .await
                .map_err(|e| TusError::io(&abs, e))?;
            let meta = metadata_of(&rel);
            let n = body.len() as u64;
            let t = Instant::now();
            let up = c.upload(&r, &meta, Bytes::from(body)).await?;
            Ok::<_, TusError>((rel, meta, up, n, t.elapsed()))
        })
    };
    let done =
        |(rel, meta, up, len, took): (String, BTreeMap<String, String>, Uploaded, u64, _)| {
            imported.resumes += up.resumes;
            imported.resent_bytes += up.resent_bytes;
            imported.conflicts += up.conflicts;
            imported.mismatches += up.mismatches;
            imported.resumed_uploads += u64::from(up.resumes > 0);
            progress.file_done(len, took);
            imported.uploads.insert(
                rel,
                Upload {
                    url: up.url,
                    len,
                    meta,
                },
            );
            Ok(())
        };
    each_in_flight(files, opts.in_flight, start, done, join_error).await?;
    let mut r = report(
        rec.snapshot(),
        t0.elapsed(),
        progress.files,
        dirs.len() as u64,
        progress.bytes,
    );
    r.checkpoints = progress.checkpoints;
    Ok((r, imported))
}

fn join_error(e: tokio::task::JoinError) -> TusError {
    TusError::Invalid {
        what: "tus task".into(),
        reason: e.to_string(),
    }
}

/// Reads every upload of `imported` back into `dir` (`IN_FLIGHT` at once): a `HEAD` whose
/// `Upload-Offset` and `Upload-Length` must both be the file's length and whose
/// `Upload-Metadata` must hold the pairs sent, then a `GET` of exactly that many bytes,
/// written at the vault path. The caller compares the tree under `dir` with the vault.
pub async fn read_back(
    client: &TusClient,
    imported: &Imported,
    dir: &Path,
) -> Result<TransferReport, TusError> {
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut files = 0u64;
    let items: Vec<(String, Upload)> = imported
        .uploads
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let start = |(rel, up): (String, Upload)| {
        let (c, r, out) = (client.clone(), rec.clone(), local_path(dir, &rel));
        Ok::<_, TusError>(async move {
            let body = verify_one(&c, &r, &rel, &up).await?;
            if let Some(parent) = out.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| TusError::io(parent, e))?;
            }
            tokio::fs::write(&out, &body)
                .await
                .map_err(|e| TusError::io(&out, e))?;
            Ok::<_, TusError>(body.len() as u64)
        })
    };
    let done = |n: u64| {
        bytes += n;
        files += 1;
        Ok(())
    };
    each_in_flight(items, IN_FLIGHT, start, done, join_error).await?;
    Ok(report(rec.snapshot(), t0.elapsed(), files, 0, bytes))
}

/// One upload read back and checked against what was sent; its bytes.
pub async fn verify_one(
    client: &TusClient,
    rec: &Recorder,
    rel: &str,
    up: &Upload,
) -> Result<Bytes, TusError> {
    let what = format!(
        "read-back of {} ({})",
        contract::quote::quote(rel),
        contract::quote::text(&up.url)
    );
    let mismatch = |reason: String| TusError::Mismatch {
        what: what.clone(),
        reason,
    };
    let a = client.head(rec, &up.url).await?;
    let offset = header::check_resumed(
        a.header("upload-offset"),
        a.header("upload-length"),
        up.len,
        up.len,
    )
    .map_err(mismatch)?;
    if a.header("upload-length").is_none() {
        return Err(mismatch(format!(
            "HEAD gives no Upload-Length (offset {offset}; {} sent)",
            up.len
        )));
    }
    let got = header::decode_metadata(a.header("upload-metadata").unwrap_or_default())
        .map_err(mismatch)?;
    if got != up.meta {
        return Err(mismatch(contract::quote::text_within(
            &format!(
                "Upload-Metadata reads back as {:?}, not the {:?} sent",
                got, up.meta
            ),
            400,
        )));
    }
    let body = client.get(rec, &up.url, up.len).await?;
    if body.len() as u64 != up.len {
        return Err(mismatch(format!(
            "GET answers {} bytes, not the {} uploaded",
            body.len(),
            up.len
        )));
    }
    Ok(body)
}

/// `rel` (a vault path this import read from disk) under `dir`.
fn local_path(dir: &Path, rel: &str) -> PathBuf {
    let mut p = dir.to_path_buf();
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        p.push(seg);
    }
    p
}

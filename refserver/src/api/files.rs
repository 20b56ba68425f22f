//! Files and versions: the version post (`POST /v1/files/{file_id}/versions`), one file's
//! heads (`GET /v1/files/{file_id}`) and the paged listing (`GET /v1/files`).

use std::time::Duration;

use base64::Engine as _;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use protocol::wire::{Change, FileResponse, VersionPost, VersionPostResponse};
use protocol::{ErrorCode, limits};
use serde::Serialize;

use super::auth::auth_with_body;
use super::chunks::check_sids;
use super::durable::{Durable, enqueue_apply, seq_after, until_durable};
use super::reply::{ApiError, ApiResult, is_hex_lower, json, num_param, parse_json, query_params};
use crate::app::App;
use crate::metrics::Metrics;
use crate::state::{FileState, Record, State};

/// Files per `GET /v1/files` page when `limit` is absent, and at most.
const MAX_LIST_FILES: usize = 1000;

pub(super) fn check_file_id(file_id: &str) -> Result<(), ApiError> {
    if is_hex_lower(file_id, 32) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("file_id {file_id:?} is not 32 lowercase hex"),
        ))
    }
}

/// The outcome of a version post decided under the state lock.
pub(super) enum Posted {
    Existing(VersionPostResponse),
    New(Durable, Vec<String>, bool, u64),
}

/// Burns `us` microseconds of CPU: the hidden `--inject-delay-us` knob that makes a second,
/// measurably slower "build" of the same binary for A/B sensitivity tests.
pub(super) fn inject_delay(us: u64) {
    if us == 0 {
        return;
    }
    let until = std::time::Instant::now() + Duration::from_micros(us);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Runs `n` iterations of a fixed hash kernel (the SplitMix64 finaliser, a serial chain the
/// compiler cannot fold or vectorise): the hidden `--inject-work` knob. Unlike a timed spin it
/// retires the same instructions in every run, so an instruction counter sees a fixed cost.
pub(super) fn inject_work(n: u64) -> u64 {
    let mut h = std::hint::black_box(0x5eed_u64);
    for _ in 0..n {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    std::hint::black_box(h)
}

/// `--inject-reindex`: re-reads every stored version's chunks from disk and writes one stdout
/// line per version, so a push of n files re-reads n²/2 versions. Off the async workers (the
/// reads block); a chunk that cannot be read is skipped, since the re-read is make-work.
async fn reindex(app: &App) {
    let stored: Vec<(String, String, Vec<std::path::PathBuf>)> = {
        let st = app.lock_state();
        st.changes
            .iter()
            .map(|c| {
                let paths = c.sids.iter().map(|s| app.chunks.path_of(s)).collect();
                (c.version_id.clone(), c.file_id.clone(), paths)
            })
            .collect()
    };
    let _ = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut sum = 0u64;
        for (version, file, paths) in stored {
            for p in paths {
                if let Ok(b) = std::fs::read(p) {
                    sum = b.iter().fold(sum, |h, &x| h.rotate_left(5) ^ u64::from(x));
                }
            }
            let _ = writeln!(out, "reindex version={version} file={file}");
        }
        let _ = out.flush();
        std::hint::black_box(sum)
    })
    .await;
}

pub(super) async fn post_version(app: &App, req: Request<Incoming>, file_id: &str) -> ApiResult {
    let (device, _, body) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    check_file_id(file_id)?;
    let v: VersionPost = parse_json(&body)?;
    let manifest = base64::engine::general_purpose::STANDARD
        .decode(&v.manifest_ct)
        .map_err(|_| ApiError::new(ErrorCode::BadRequest, "manifest_ct is not base64"))?;
    if !is_hex_lower(&v.manifest_nonce.to_ascii_lowercase(), 24) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "manifest_nonce is not 24 hex",
        ));
    }
    if v.deleted && !v.sids.is_empty() {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "a tombstone carries no sids",
        ));
    }
    if v.domain_id.is_empty() || v.domain_id.len() > 128 {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "domain_id must be 1..=128 bytes",
        ));
    }
    check_sids(&v.sids, usize::MAX)?;
    if let Some(p) = v.parents.iter().find(|p| !is_hex_lower(p, 64)) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("parent {p:?} is not 64 lowercase hex"),
        ));
    }
    let expected = protocol::version_id(file_id, &v.parents, &manifest, &v.sids)
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, e.to_string()))?;
    if expected != v.version_id {
        return Err(ApiError::new(
            ErrorCode::VersionIdMismatch,
            format!("version_id is {expected}, not {}", v.version_id),
        ));
    }
    if app.inject_delay_route == protocol::Route::PostVersion {
        inject_delay(app.inject_delay_us);
    }
    inject_work(app.inject_work);
    // Chunks are never deleted, so a check outside the state lock stays true.
    let missing: Vec<&String> = v.sids.iter().filter(|s| !app.chunks.exists(s)).collect();
    if !missing.is_empty() {
        return Err(ApiError::new(
            ErrorCode::MissingChunks,
            format!(
                "{} chunk(s) not uploaded: {}",
                missing.len(),
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    let posted = 'decide: {
        let st = app.lock_state();
        let empty_file = FileState::default();
        let f = st.files.get(file_id).unwrap_or(&empty_file);
        if let Some(&seq) = f.versions.get(&v.version_id) {
            // An existing version: a no-op, answered once that version is durable.
            let resp = VersionPostResponse {
                seq,
                version_id: v.version_id.clone(),
                heads: f.heads.clone(),
                conflicted: f.conflicted,
            };
            break 'decide Posted::Existing(resp);
        }
        if !f.versions.is_empty() && f.domain_id != v.domain_id {
            return Err(ApiError::new(
                ErrorCode::DomainMismatch,
                format!("file {file_id} belongs to domain {}", f.domain_id),
            ));
        }
        let heads = State::next_heads(&f.heads, &v.parents, &v.version_id);
        if heads.len() > limits::MAX_HEADS {
            return Err(ApiError::new(
                ErrorCode::TooManyHeads,
                format!("file {file_id} would have {} heads", heads.len()),
            ));
        }
        let seq = st.head_seq() + 1;
        let conflicted = heads.len() > 1;
        let change = Change {
            seq,
            file_id: file_id.to_owned(),
            domain_id: v.domain_id,
            version_id: v.version_id.clone(),
            parents: v.parents,
            sids: v.sids,
            bytes: v.bytes,
            manifest_ct: v.manifest_ct,
            manifest_nonce: v.manifest_nonce,
            device_id: device,
            ts: app.clock.now_ms(),
            deleted: v.deleted,
            heads: heads.clone(),
            conflicted,
        };
        Posted::New(
            enqueue_apply(app, st, Record::Version(change))?,
            heads,
            conflicted,
            seq,
        )
    };
    let (durable, heads, conflicted, seq) = match posted {
        Posted::Existing(resp) => {
            // An existing version: a no-op, answered once that version is durable.
            let mut rx = app.durable.clone();
            seq_after(&mut rx, resp.seq - 1).await;
            return json(StatusCode::OK, &resp);
        }
        Posted::New(d, heads, conflicted, seq) => (d, heads, conflicted, seq),
    };
    durable.wait().await?;
    Metrics::add(&app.metrics.versions, 1);
    if app.inject_reindex {
        reindex(app).await;
    }
    json(
        StatusCode::CREATED,
        &VersionPostResponse {
            seq,
            version_id: v.version_id,
            heads,
            conflicted,
        },
    )
}

pub(super) fn file_response(st: &State, file_id: &str, f: &FileState) -> FileResponse {
    let versions = f
        .heads
        .iter()
        .filter_map(|h| f.versions.get(h))
        .filter_map(|&seq| st.changes.get((seq - 1) as usize).cloned())
        .collect();
    FileResponse {
        file_id: file_id.to_owned(),
        domain_id: f.domain_id.clone(),
        heads: f.heads.clone(),
        conflicted: f.conflicted,
        versions,
    }
}

pub(super) async fn get_file(app: &App, req: Request<Incoming>, file_id: &str) -> ApiResult {
    auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    check_file_id(file_id)?;
    let resp = {
        let st = app.lock_state();
        let f = st
            .files
            .get(file_id)
            .ok_or_else(|| ApiError::new(ErrorCode::UnknownFile, format!("no file {file_id}")))?;
        file_response(&st, file_id, f)
    };
    until_durable(app, resp.versions.iter().map(|c| c.seq).max()).await;
    json(StatusCode::OK, &resp)
}

/// One page of `GET /v1/files?after=&limit=`. The protocol page names the route but not its
/// body; this is the reference server's shape: the files after `after` in file_id order, and
/// the `after` to ask for next (absent on the last page).
#[derive(Debug, Serialize)]
pub(super) struct FilesPage {
    files: Vec<FileResponse>,
    next_after: Option<String>,
}

pub(super) async fn list_files(app: &App, req: Request<Incoming>) -> ApiResult {
    let (_, parts, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let q = query_params(&parts);
    let after = q
        .iter()
        .find(|(k, _)| k == "after")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let limit = num_param(&q, "limit")?
        .map(|l| (l as usize).clamp(1, MAX_LIST_FILES))
        .unwrap_or(MAX_LIST_FILES);
    let (files, more) = {
        let st = app.lock_state();
        let mut files = Vec::new();
        let range = st
            .files
            .range::<String, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded));
        let mut more = false;
        for (id, f) in range {
            if files.len() == limit {
                more = true;
                break;
            }
            files.push(file_response(&st, id, f));
        }
        (files, more)
    };
    until_durable(
        app,
        files
            .iter()
            .flat_map(|f| f.versions.iter().map(|c| c.seq))
            .max(),
    )
    .await;
    let next_after = if more {
        files.last().map(|f| f.file_id.clone())
    } else {
        None
    };
    json(StatusCode::OK, &FilesPage { files, next_after })
}

#[cfg(test)]
mod inject_tests {
    use super::inject_work;

    #[test]
    fn inject_work_is_a_fixed_function_of_n() {
        assert_eq!(inject_work(0), 0x5eed);
        assert_eq!(inject_work(3), inject_work(3));
        assert_ne!(inject_work(3), inject_work(4));
    }
}

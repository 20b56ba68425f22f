//! Chunks: `POST /v1/chunks/exists`, `PUT` and `GET /v1/chunks/{sid}` (with single ranges),
//! and the streamed `multipart/mixed` batch read `POST /v1/chunks/get`.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use protocol::wire::{MissingResponse, SidsRequest};
use protocol::{ErrorCode, limits};

use super::auth::{auth_with_body, claim, content_length, verify};
use super::reply::{ApiError, ApiResult, json, parse_json, status_only};
use crate::app::App;
use crate::body::{ChannelBody, full};
use crate::store::chunks::{ChunkError, Stored};

pub(super) fn check_sids(sids: &[String], max: usize) -> Result<(), ApiError> {
    if sids.len() > max {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("{} sids, at most {max} per request", sids.len()),
        ));
    }
    if let Some(bad) = sids.iter().find(|s| !protocol::version::is_sid(s)) {
        return Err(ApiError::new(
            ErrorCode::BadSid,
            format!("sid {bad:?} is not 64 lowercase hex"),
        ));
    }
    Ok(())
}

pub(super) async fn chunks_exists(app: &App, req: Request<Incoming>) -> ApiResult {
    let (_, _, body) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let r: SidsRequest = parse_json(&body)?;
    check_sids(&r.sids, limits::MAX_EXISTS_SIDS)?;
    let missing = r
        .sids
        .into_iter()
        .filter(|s| !app.chunks.exists(s))
        .collect();
    json(StatusCode::OK, &MissingResponse { missing })
}

pub(super) fn chunk_error(e: ChunkError) -> ApiError {
    match e {
        ChunkError::TooLarge { .. } => ApiError::new(ErrorCode::BodyTooLarge, e.to_string()),
        ChunkError::VolumeFull { .. } => ApiError::new(ErrorCode::VolumeFull, e.to_string()),
        ChunkError::Body(_) => ApiError::new(ErrorCode::BadRequest, e.to_string()),
        ChunkError::Io { .. } => ApiError::new(ErrorCode::Internal, e.to_string()),
    }
}

pub(super) async fn put_chunk(app: &App, req: Request<Incoming>, sid: &str) -> ApiResult {
    let (parts, body) = req.into_parts();
    let c = claim(app, &parts)?;
    let limit = limits::MAX_CHUNK_BODY;
    match content_length(&parts)? {
        None => {
            return Err(ApiError::new(
                ErrorCode::LengthRequired,
                "content-length is required on a chunk put",
            ));
        }
        Some(n) if n > limit as u64 => {
            return Err(ApiError::new(
                ErrorCode::BodyTooLarge,
                format!("chunk of {n} bytes is over the {limit}-byte limit"),
            ));
        }
        Some(_) => {}
    }
    let temp = app.chunks.receive(body, limit).await.map_err(chunk_error)?;
    verify(app, &parts, c, &temp.sha256_hex, false).await?;
    if !protocol::version::is_sid(sid) {
        return Err(ApiError::new(
            ErrorCode::BadSid,
            format!("sid {sid:?} is not 64 lowercase hex"),
        ));
    }
    if temp.sha256_hex != sid {
        return Err(ApiError::new(
            ErrorCode::SidMismatch,
            format!("body hashes to {}, not {sid}", temp.sha256_hex),
        ));
    }
    match app.chunks.commit(temp, sid).await.map_err(chunk_error)? {
        Stored::New => status_only(StatusCode::CREATED),
        Stored::AlreadyPresent => status_only(StatusCode::OK),
    }
}

/// A single byte range `bytes=a-b`, `bytes=a-` or `bytes=-n` of a `len`-byte chunk: `Ok(None)`
/// means serve it whole (no range, another unit, or several ranges), `Err` is 416.
pub(super) fn parse_range(h: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    let range = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 || len == 0 {
            return Err(());
        }
        (len.saturating_sub(n), len - 1)
    } else {
        let start: u64 = a.parse().map_err(|_| ())?;
        let end: u64 = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            b.parse::<u64>().map_err(|_| ())?.min(len.saturating_sub(1))
        };
        if start >= len || start > end {
            return Err(());
        }
        (start, end)
    };
    Ok(Some(range))
}

pub(super) async fn get_chunk(app: &App, req: Request<Incoming>, sid: &str) -> ApiResult {
    let (_, parts, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    if !protocol::version::is_sid(sid) {
        return Err(ApiError::new(
            ErrorCode::BadSid,
            format!("sid {sid:?} is not 64 lowercase hex"),
        ));
    }
    let data = app
        .chunks
        .read(sid)
        .await
        .map_err(chunk_error)?
        .ok_or_else(|| ApiError::new(ErrorCode::UnknownChunk, format!("no chunk {sid}")))?;
    let len = data.len() as u64;
    let range = match parts
        .headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
    {
        None => None,
        Some(h) => parse_range(h, len).map_err(|()| {
            ApiError::new(
                ErrorCode::RangeNotSatisfiable,
                format!("range {h:?} does not fit a {len}-byte chunk"),
            )
        })?,
    };
    let mut r = match range {
        None => Response::new(full(data)),
        Some((a, b)) => {
            let mut r = Response::new(full(data.slice(a as usize..=b as usize)));
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {a}-{b}/{len}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r
        }
    };
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r.headers_mut()
        .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    Ok(r)
}

pub(super) async fn chunks_get(app: &App, req: Request<Incoming>) -> ApiResult {
    let (_, _, body) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let r: SidsRequest = parse_json(&body)?;
    check_sids(&r.sids, limits::MAX_GET_SIDS)?;
    let boundary = format!("obsync-{}", app.random_hex(16));
    // Two parts in flight at most: a 64-chunk answer is streamed, never held whole.
    let (tx, body) = ChannelBody::channel(2);
    let chunks = app.chunks_handle();
    let b = boundary.clone();
    tokio::spawn(async move {
        for sid in r.sids {
            let part = match chunks.read(&sid).await {
                Ok(Some(data)) => {
                    let head = format!(
                        "--{b}\r\ncontent-type: application/octet-stream\r\n{}: {sid}\r\ncontent-length: {}\r\n\r\n",
                        protocol::H_PART_SID,
                        data.len()
                    );
                    if tx.send(Ok(Bytes::from(head))).await.is_err() {
                        return;
                    }
                    if tx.send(Ok(data)).await.is_err() {
                        return;
                    }
                    Ok(Bytes::from_static(b"\r\n"))
                }
                Ok(None) => Ok(Bytes::from(format!(
                    "--{b}\r\n{}: {sid}\r\n{}: 1\r\ncontent-length: 0\r\n\r\n\r\n",
                    protocol::H_PART_SID,
                    protocol::H_PART_MISSING
                ))),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            let stop = part.is_err();
            if tx.send(part).await.is_err() || stop {
                return;
            }
        }
        let _ = tx.send(Ok(Bytes::from(format!("--{b}--\r\n")))).await;
    });
    let mut resp = Response::new(body);
    if let Ok(v) = HeaderValue::from_str(&format!("multipart/mixed; boundary={boundary}")) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-3", 10), Ok(Some((0, 3))));
        assert_eq!(parse_range("bytes=5-", 10), Ok(Some((5, 9))));
        assert_eq!(parse_range("bytes=-4", 10), Ok(Some((6, 9))));
        assert_eq!(parse_range("bytes=-40", 10), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=2-100", 10), Ok(Some((2, 9))));
        assert_eq!(parse_range("bytes=10-", 10), Err(()));
        assert_eq!(parse_range("bytes=4-2", 10), Err(()));
        assert_eq!(parse_range("bytes=x-2", 10), Err(()));
        assert_eq!(parse_range("bytes=-0", 10), Err(()));
        assert_eq!(parse_range("bytes=0-1,4-5", 10), Ok(None));
        assert_eq!(parse_range("items=0-1", 10), Ok(None));
    }
}

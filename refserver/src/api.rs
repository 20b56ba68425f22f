//! The HTTP routes of obsync wire protocol v1: routing, authentication, and one handler per
//! route. Errors and statuses are the protocol page's, through [`protocol::ErrorCode`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use protocol::wire::{
    ApproveRequest, Change, ChangesResponse, ClaimRequest, ClaimResponse, EnvelopeResponse,
    FileResponse, MissingResponse, PairingResponse, ReadyResponse, SetupRequest, SetupResponse,
    SidsRequest, VersionPost, VersionPostResponse,
};
use protocol::{ErrorCode, limits};
use serde::Serialize;

use crate::app::App;
use crate::body::{Body, ChannelBody, empty, full};
use crate::metrics::Metrics;
use crate::nonces::NonceError;
use crate::state::{DeviceStatus, FileState, Record, State};
use crate::store::chunks::{ChunkError, Stored};

/// How long a pairing's enroll token stays valid. The protocol page leaves it open; ten
/// minutes is the reference server's choice.
const PAIRING_TTL_MS: i64 = 10 * 60 * 1000;

/// Files per `GET /v1/files` page when `limit` is absent, and at most.
const MAX_LIST_FILES: usize = 1000;

/// An error answer: `{"error":"<code>","detail":"<text>"}` with the code's status.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub detail: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> ApiError {
        ApiError {
            code,
            detail: detail.into(),
        }
    }

    fn into_response(self) -> Response<Body> {
        let body = serde_json::to_vec(&protocol::error::ErrorBody::new(self.code, self.detail))
            .unwrap_or_default();
        let mut r = Response::new(full(body));
        *r.status_mut() =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

type ApiResult = Result<Response<Body>, ApiError>;

fn json<T: Serialize>(status: StatusCode, v: &T) -> ApiResult {
    let b = serde_json::to_vec(v).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let mut r = Response::new(full(b));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

fn status_only(status: StatusCode) -> ApiResult {
    let mut r = Response::new(empty());
    *r.status_mut() = status;
    Ok(r)
}

fn is_hex_lower(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Answers one request; never fails (errors become protocol error responses).
pub async fn handle(app: Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let (route, result) = dispatch(&app, peer, req).await;
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    app.metrics.count_request(route, resp.status().as_u16());
    resp
}

async fn dispatch(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> (&'static str, ApiResult) {
    let path = req.uri().path().to_owned();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let m = req.method().clone();
    let (route, allowed): (&'static str, Method) = match segs.as_slice() {
        ["livez"] => ("livez", Method::GET),
        ["readyz"] => ("readyz", Method::GET),
        ["metrics"] => ("metrics", Method::GET),
        ["v1", "setup"] => ("setup", Method::POST),
        ["v1", "pairing"] => ("pairing_create", Method::POST),
        ["v1", "pairing", _, "claim"] => ("pairing_claim", Method::POST),
        ["v1", "pairing", _, "approve"] => ("pairing_approve", Method::POST),
        ["v1", "pairing", _, "envelope"] => ("pairing_envelope", Method::GET),
        ["v1", "chunks", "exists"] => ("chunks_exists", Method::POST),
        ["v1", "chunks", "get"] => ("chunks_get", Method::POST),
        ["v1", "chunks", _] if m == Method::GET => ("get_chunk", Method::GET),
        ["v1", "chunks", _] => ("put_chunk", Method::PUT),
        ["v1", "files", _, "versions"] => ("post_version", Method::POST),
        ["v1", "files", _] => ("get_file", Method::GET),
        ["v1", "files"] => ("list_files", Method::GET),
        ["v1", "changes"] => ("changes", Method::GET),
        _ => {
            return (
                "other",
                Err(ApiError::new(
                    ErrorCode::NotFound,
                    format!("no route {path}"),
                )),
            );
        }
    };
    if m != allowed {
        return (
            route,
            Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{route} takes {allowed}, not {m}"),
            )),
        );
    }
    let seg = |i: usize| segs.get(i).copied().unwrap_or("").to_owned();
    let result = match route {
        "livez" => json(StatusCode::OK, &serde_json::json!({"live": true})),
        "readyz" => readyz(app),
        "metrics" => metrics(app, peer),
        "setup" => setup(app, req).await,
        "pairing_create" => pairing_create(app, req).await,
        "pairing_claim" => pairing_claim(app, req, &seg(2)).await,
        "pairing_approve" => pairing_approve(app, req, &seg(2)).await,
        "pairing_envelope" => pairing_envelope(app, req, &seg(2)).await,
        "chunks_exists" => chunks_exists(app, req).await,
        "chunks_get" => chunks_get(app, req).await,
        "get_chunk" => get_chunk(app, req, &seg(2)).await,
        "put_chunk" => put_chunk(app, req, &seg(2)).await,
        "post_version" => post_version(app, req, &seg(2)).await,
        "get_file" => get_file(app, req, &seg(2)).await,
        "list_files" => list_files(app, req).await,
        _ => changes(app, req).await,
    };
    (route, result)
}

fn readyz(app: &App) -> ApiResult {
    if app.journal.is_poisoned() || app.nonces.is_poisoned() {
        return Err(ApiError::new(
            ErrorCode::NotReady,
            "a storage write failed; restart to replay the journal",
        ));
    }
    json(
        StatusCode::OK,
        &ReadyResponse {
            ready: true,
            seq: *app.durable.borrow(),
        },
    )
}

fn metrics(app: &App, peer: SocketAddr) -> ApiResult {
    // Loopback peers only (issue 3): counters describe the server's internals.
    if !peer.ip().is_loopback() {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "/metrics is served to loopback peers only",
        ));
    }
    let mut r = Response::new(full(app.metrics.render()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(r)
}

// ---------------------------------------------------------------------------------------
// Bodies and authentication

fn content_length(req: &hyper::http::request::Parts) -> Result<Option<u64>, ApiError> {
    match req.headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| ApiError::new(ErrorCode::BadRequest, "content-length is not a number")),
    }
}

/// Reads a whole request body of at most `limit` bytes (`413 body_too_large` beyond).
async fn read_body(
    parts: &hyper::http::request::Parts,
    body: Incoming,
    limit: usize,
) -> Result<Bytes, ApiError> {
    if let Some(n) = content_length(parts)?
        && n > limit as u64
    {
        return Err(ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("body of {n} bytes is over the {limit}-byte limit"),
        ));
    }
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("body is over the {limit}-byte limit"),
        )),
        Err(e) => Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("reading the body: {e}"),
        )),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorCode::BadJson, e.to_string()))
}

/// The four authentication headers, checked for shape, of a device the server knows.
struct Claimed {
    device_id: String,
    device_raw: [u8; 16],
    secret: [u8; 32],
    status: DeviceStatus,
    ts: i64,
    nonce: String,
    nonce_raw: [u8; 16],
    sig: String,
}

/// First half of authentication, before the body is read: the headers are present and well
/// formed and name a known device.
fn claim(app: &App, parts: &hyper::http::request::Parts) -> Result<Claimed, ApiError> {
    let get = |name: &str| -> Result<String, ApiError> {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::new(ErrorCode::MissingHeaders, format!("missing {name}")))
    };
    let device_id = get(protocol::H_DEVICE)?.to_ascii_lowercase();
    let device_raw = protocol::version::decode_hex_array::<16>(&device_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::MissingHeaders,
            format!("{} is not 32 hex", protocol::H_DEVICE),
        )
    })?;
    let ts = get(protocol::H_TS)?.parse::<i64>().map_err(|_| {
        ApiError::new(
            ErrorCode::MissingHeaders,
            format!("{} is not an integer", protocol::H_TS),
        )
    })?;
    let nonce = get(protocol::H_NONCE)?;
    let nonce_raw = protocol::version::decode_hex_array::<16>(&nonce).ok_or_else(|| {
        ApiError::new(
            ErrorCode::MissingHeaders,
            format!("{} is not 32 hex", protocol::H_NONCE),
        )
    })?;
    let sig = get(protocol::H_SIG)?;
    let st = app.lock_state();
    let d = st
        .devices
        .get(&device_id)
        .ok_or_else(|| ApiError::new(ErrorCode::UnknownDevice, format!("no device {device_id}")))?;
    Ok(Claimed {
        secret: d.secret,
        status: d.status,
        device_id,
        device_raw,
        ts,
        nonce,
        nonce_raw,
        sig,
    })
}

/// Second half: the signature over the body's hash, the timestamp window, the nonce (spent
/// and durable before this returns), then the device's standing.
async fn verify(
    app: &App,
    parts: &hyper::http::request::Parts,
    c: Claimed,
    body_sha256_hex: &str,
    allow_pending: bool,
) -> Result<String, ApiError> {
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let canonical = protocol::canonical_string(
        parts.method.as_str(),
        target,
        c.ts,
        &c.nonce,
        body_sha256_hex,
    );
    if !protocol::sign::verify(&c.secret, &canonical, &c.sig) {
        return Err(ApiError::new(
            ErrorCode::BadSignature,
            "signature does not match the request",
        ));
    }
    let now_s = app.clock.now_s();
    if (now_s - c.ts).abs() > limits::TS_SKEW_S {
        return Err(ApiError::new(
            ErrorCode::StaleTimestamp,
            format!("timestamp {} is more than 300 s from {now_s}", c.ts),
        ));
    }
    app.nonces
        .spend(&c.device_raw, &c.nonce_raw, now_s)
        .await
        .map_err(|e| match e {
            NonceError::Replayed => ApiError::new(ErrorCode::ReplayedNonce, e.to_string()),
            NonceError::CacheFull => ApiError::new(ErrorCode::NonceCacheFull, e.to_string()),
            NonceError::LogUnavailable(_) => {
                ApiError::new(ErrorCode::NonceLogUnavailable, e.to_string())
            }
        })?;
    match c.status {
        DeviceStatus::Active => Ok(c.device_id),
        DeviceStatus::Pending if allow_pending => Ok(c.device_id),
        DeviceStatus::Pending => Err(ApiError::new(
            ErrorCode::DevicePending,
            "device is waiting for approval",
        )),
        DeviceStatus::Revoked => Err(ApiError::new(ErrorCode::DeviceRevoked, "device revoked")),
    }
}

/// Authenticates a request with a small body; returns the device and the body.
async fn auth_with_body(
    app: &App,
    req: Request<Incoming>,
    limit: usize,
    allow_pending: bool,
) -> Result<(String, hyper::http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let c = claim(app, &parts)?;
    let body = read_body(&parts, body, limit).await?;
    let device = verify(app, &parts, c, &protocol::sha256_hex(&body), allow_pending).await?;
    Ok((device, parts, body))
}

/// Appends a record to the journal and applies it, in that order, under the state lock (so
/// journal order is apply order). The receiver answers once the record is durable.
fn enqueue_apply(
    app: &App,
    mut st: std::sync::MutexGuard<'_, State>,
    rec: Record,
) -> Result<Durable, ApiError> {
    let seq = match &rec {
        Record::Version(c) => Some(c.seq),
        _ => None,
    };
    let payload =
        serde_json::to_vec(&rec).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let rx = app.journal.enqueue(&payload, seq).map_err(journal_error)?;
    st.apply(rec)
        .map_err(|e| ApiError::new(ErrorCode::Internal, e))?;
    Ok(Durable(rx))
}

/// A queued journal record; await [`Durable::wait`] before answering.
struct Durable(tokio::sync::oneshot::Receiver<Result<(), crate::store::log::AppendError>>);

impl Durable {
    async fn wait(self) -> Result<(), ApiError> {
        match self.0.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(journal_error(e)),
            Err(_) => Err(ApiError::new(
                ErrorCode::Internal,
                "the journal writer stopped",
            )),
        }
    }
}

fn journal_error(e: crate::store::log::AppendError) -> ApiError {
    if matches!(
        e.kind,
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) {
        ApiError::new(ErrorCode::VolumeFull, e.to_string())
    } else {
        ApiError::new(ErrorCode::Internal, e.to_string())
    }
}

// ---------------------------------------------------------------------------------------
// Enrolment

async fn setup(app: &App, req: Request<Incoming>) -> ApiResult {
    let (parts, body) = req.into_parts();
    let body = read_body(&parts, body, limits::MAX_JSON_BODY).await?;
    let r: SetupRequest = parse_json(&body)?;
    if !constant_time_eq(r.setup_token.trim().as_bytes(), app.setup_token.as_bytes()) {
        return Err(ApiError::new(ErrorCode::BadSetupToken, "wrong setup token"));
    }
    let account_id = app.random_hex(16);
    let device_id = app.random_hex(16);
    let secret = app.random_hex(32);
    let durable = {
        let st = app.lock_state();
        if st.account_id.is_some() {
            return Err(ApiError::new(
                ErrorCode::AlreadySetUp,
                "the server is already set up",
            ));
        }
        let rec = Record::Setup {
            account_id: account_id.clone(),
            account_name: r.account_name,
            device_id: device_id.clone(),
            secret: secret.clone(),
            name: r.device.name,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &SetupResponse {
            account_id,
            device_id,
            device_secret: secret,
        },
    )
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn pairing_create(app: &App, req: Request<Incoming>) -> ApiResult {
    let (device, _, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let pairing_id = app.random_hex(16);
    let enroll_token = app.random_hex(32);
    let expires = app.clock.now_ms() + PAIRING_TTL_MS;
    let durable = {
        let st = app.lock_state();
        let rec = Record::PairingCreated {
            pairing_id: pairing_id.clone(),
            enroll_token: enroll_token.clone(),
            creator: device,
            expires,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &PairingResponse {
            pairing_id,
            enroll_token,
            expires,
        },
    )
}

async fn pairing_claim(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (parts, body) = req.into_parts();
    let body = read_body(&parts, body, limits::MAX_JSON_BODY).await?;
    let r: ClaimRequest = parse_json(&body)?;
    let now = app.clock.now_ms();
    let device_id = app.random_hex(16);
    let secret = app.random_hex(32);
    let durable = {
        let st = app.lock_state();
        let unknown = || ApiError::new(ErrorCode::UnknownPairing, format!("no pairing {id}"));
        let p = st.pairings.get(id).ok_or_else(unknown)?;
        if !constant_time_eq(r.enroll_token.as_bytes(), p.enroll_token.as_bytes()) {
            return Err(ApiError::new(
                ErrorCode::BadEnrollToken,
                "wrong enroll token",
            ));
        }
        if p.claimant.is_some() {
            return Err(ApiError::new(
                ErrorCode::BadEnrollToken,
                "the enroll token was already used",
            ));
        }
        if now > p.expires {
            return Err(ApiError::new(
                ErrorCode::UnknownPairing,
                format!("pairing {id} expired"),
            ));
        }
        let rec = Record::PairingClaimed {
            pairing_id: id.to_owned(),
            device_id: device_id.clone(),
            secret: secret.clone(),
            name: r.name,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &ClaimResponse {
            device_id,
            device_secret: secret,
        },
    )
}

async fn pairing_approve(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (device, _, body) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let r: ApproveRequest = parse_json(&body)?;
    if base64::engine::general_purpose::STANDARD
        .decode(&r.envelope)
        .is_err()
    {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "envelope is not base64",
        ));
    }
    if !is_hex_lower(&r.nonce.to_ascii_lowercase(), 24) {
        return Err(ApiError::new(ErrorCode::BadRequest, "nonce is not 24 hex"));
    }
    let durable = {
        let st = app.lock_state();
        let p = st
            .pairings
            .get(id)
            .ok_or_else(|| ApiError::new(ErrorCode::UnknownPairing, format!("no pairing {id}")))?;
        if p.creator != device {
            return Err(ApiError::new(
                ErrorCode::NotPairingCreator,
                "only the device that created the pairing approves it",
            ));
        }
        if p.claimant.is_none() {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "the pairing has not been claimed yet",
            ));
        }
        if p.approved.is_some() {
            return status_only(StatusCode::NO_CONTENT);
        }
        let rec = Record::PairingApproved {
            pairing_id: id.to_owned(),
            envelope: r.envelope,
            nonce: r.nonce,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    status_only(StatusCode::NO_CONTENT)
}

async fn pairing_envelope(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (device, _, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, true).await?;
    let (durable, envelope, nonce) = {
        let st = app.lock_state();
        let p = st
            .pairings
            .get(id)
            .filter(|p| p.claimant.as_deref() == Some(device.as_str()))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownPairing,
                    format!("no pairing {id} claimed by this device"),
                )
            })?;
        let Some((envelope, nonce)) = p.approved.clone() else {
            return Err(ApiError::new(ErrorCode::NotApproved, "not approved yet"));
        };
        if p.envelope_consumed {
            return Err(ApiError::new(
                ErrorCode::EnvelopeConsumed,
                "the envelope was already fetched",
            ));
        }
        let rec = Record::EnvelopeConsumed {
            pairing_id: id.to_owned(),
        };
        (enqueue_apply(app, st, rec)?, envelope, nonce)
    };
    durable.wait().await?;
    json(StatusCode::OK, &EnvelopeResponse { envelope, nonce })
}

// ---------------------------------------------------------------------------------------
// Chunks

fn check_sids(sids: &[String], max: usize) -> Result<(), ApiError> {
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

async fn chunks_exists(app: &App, req: Request<Incoming>) -> ApiResult {
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

fn chunk_error(e: ChunkError) -> ApiError {
    match e {
        ChunkError::TooLarge { .. } => ApiError::new(ErrorCode::BodyTooLarge, e.to_string()),
        ChunkError::VolumeFull { .. } => ApiError::new(ErrorCode::VolumeFull, e.to_string()),
        ChunkError::Body(_) => ApiError::new(ErrorCode::BadRequest, e.to_string()),
        ChunkError::Io { .. } => ApiError::new(ErrorCode::Internal, e.to_string()),
    }
}

async fn put_chunk(app: &App, req: Request<Incoming>, sid: &str) -> ApiResult {
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
fn parse_range(h: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
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

async fn get_chunk(app: &App, req: Request<Incoming>, sid: &str) -> ApiResult {
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

async fn chunks_get(app: &App, req: Request<Incoming>) -> ApiResult {
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

// ---------------------------------------------------------------------------------------
// Files, versions and the change feed

fn check_file_id(file_id: &str) -> Result<(), ApiError> {
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
enum Posted {
    Existing(VersionPostResponse),
    New(Durable, Vec<String>, bool, u64),
}

/// Burns `us` microseconds of CPU: the hidden `--inject-delay-us` knob that makes a second,
/// measurably slower "build" of the same binary for A/B sensitivity tests.
fn inject_delay(us: u64) {
    if us == 0 {
        return;
    }
    let until = std::time::Instant::now() + Duration::from_micros(us);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

async fn post_version(app: &App, req: Request<Incoming>, file_id: &str) -> ApiResult {
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
    inject_delay(app.inject_delay_us);
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

fn file_response(st: &State, file_id: &str, f: &FileState) -> FileResponse {
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

/// Waits until `seq` (the newest version an answer shows) is durable: a version is applied in
/// memory before its journal record is on disk, and no answer may show it before then.
async fn until_durable(app: &App, seq: Option<u64>) {
    if let Some(seq) = seq {
        let mut rx = app.durable.clone();
        seq_after(&mut rx, seq.saturating_sub(1)).await;
    }
}

async fn get_file(app: &App, req: Request<Incoming>, file_id: &str) -> ApiResult {
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
struct FilesPage {
    files: Vec<FileResponse>,
    next_after: Option<String>,
}

fn query_params(parts: &hyper::http::request::Parts) -> Vec<(String, String)> {
    parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (kv.to_owned(), String::new()),
        })
        .collect()
}

fn num_param(q: &[(String, String)], name: &str) -> Result<Option<u64>, ApiError> {
    match q.iter().find(|(k, _)| k == name) {
        None => Ok(None),
        Some((_, v)) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::new(
                ErrorCode::BadRequest,
                format!("{name}={v:?} is not a non-negative integer"),
            )
        }),
    }
}

async fn list_files(app: &App, req: Request<Incoming>) -> ApiResult {
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

/// Waits until the durable seq passes `seq`; false if the journal writer is gone.
async fn seq_after(rx: &mut tokio::sync::watch::Receiver<u64>, seq: u64) -> bool {
    rx.wait_for(|d| *d > seq).await.is_ok()
}

async fn changes(app: &App, req: Request<Incoming>) -> ApiResult {
    let (_, parts, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let q = query_params(&parts);
    let since = num_param(&q, "since")?.unwrap_or(0);
    // Bounded by the protocol's maxima (wait ≤ 55 s, limit ≤ 1000); larger values are clamped.
    let wait = num_param(&q, "wait")?.unwrap_or(0).min(limits::MAX_WAIT_S);
    let limit = num_param(&q, "limit")?
        .map(|l| (l as usize).clamp(1, limits::MAX_CHANGES_LIMIT))
        .unwrap_or(limits::MAX_CHANGES_LIMIT);
    let mut durable = app.durable.clone();
    let head = *durable.borrow_and_update();
    if since > head {
        return Err(ApiError::new(
            ErrorCode::SeqAhead,
            format!("since={since} is ahead of the head {head}"),
        ));
    }
    if since == head && wait > 0 {
        let mut shutdown = app.shutdown.clone();
        let woken = tokio::select! {
            woken = seq_after(&mut durable, since) => woken,
            () = tokio::time::sleep(Duration::from_secs(wait)) => false,
            () = crate::server::until_shutdown(&mut shutdown) => false,
        };
        if woken {
            Metrics::add(&app.metrics.longpoll_wakeups, 1);
        }
    }
    let visible = *durable.borrow();
    let st = app.lock_state();
    let changes = st.changes_after(since, visible, limit).to_vec();
    drop(st);
    let seq = changes.last().map_or(since, |c| c.seq);
    json(
        StatusCode::OK,
        &ChangesResponse {
            seq,
            head_seq: visible,
            changes,
        },
    )
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

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}

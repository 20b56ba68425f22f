//! Bodies and device authentication: the body reader with its limit, and the two halves of
//! verifying a signed request (headers before the body, signature, timestamp and nonce after).

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::Request;
use hyper::body::Incoming;
use hyper::header;
use protocol::{ErrorCode, limits};

use super::reply::ApiError;
use crate::app::App;
use crate::nonces::NonceError;
use crate::state::DeviceStatus;

pub(super) fn content_length(req: &hyper::http::request::Parts) -> Result<Option<u64>, ApiError> {
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
pub(super) async fn read_body(
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

/// The four authentication headers, checked for shape, of a device the server knows.
pub(super) struct Claimed {
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
pub(super) fn claim(app: &App, parts: &hyper::http::request::Parts) -> Result<Claimed, ApiError> {
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
pub(super) async fn verify(
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
pub(super) async fn auth_with_body(
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

pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

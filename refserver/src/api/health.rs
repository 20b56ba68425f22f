//! Health and counters: `GET /livez`, `GET /readyz` and `GET /metrics` (loopback only).

use std::net::SocketAddr;

use hyper::Response;
use hyper::StatusCode;
use hyper::header::{self, HeaderValue};
use protocol::ErrorCode;
use protocol::wire::ReadyResponse;

use super::reply::{ApiError, ApiResult, json};
use crate::app::App;
use crate::body::full;

pub(super) fn livez() -> ApiResult {
    json(StatusCode::OK, &serde_json::json!({"live": true}))
}

pub(super) fn readyz(app: &App) -> ApiResult {
    if app.journal.is_poisoned() || app.nonces.is_poisoned() {
        return Err(ApiError::new(
            ErrorCode::NotReady,
            "a storage write failed; restart to replay the journal",
        ));
    }
    if let Err(free) = app.check_space() {
        return Err(ApiError::new(
            ErrorCode::NotReady,
            format!("the data volume is full ({free} bytes free); ready again once space is freed"),
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

pub(super) fn metrics(app: &App, peer: SocketAddr) -> ApiResult {
    // Loopback peers only: counters describe the server's internals.
    // `to_canonical`: on a dual-stack socket an IPv4 loopback peer is `::ffff:127.0.0.1`.
    if !peer.ip().to_canonical().is_loopback() {
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

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
    json(
        StatusCode::OK,
        &ReadyResponse {
            ready: true,
            seq: *app.durable.borrow(),
        },
    )
}

pub(super) fn metrics(app: &App, peer: SocketAddr) -> ApiResult {
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

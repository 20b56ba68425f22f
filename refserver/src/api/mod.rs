//! The HTTP routes of obsync wire protocol v1: the router over [`protocol::Route`] (an
//! exhaustive match, no fallback arm) and one module per resource. Errors and statuses are the
//! protocol page's, through [`protocol::ErrorCode`].
//!
//! Read in this order: this router → `health` → `pairing` (setup and pairing) → `chunks` →
//! `files` → `changes`; the shared pieces are `reply` (answers), `auth` (bodies, signatures)
//! and `durable` (journal appends and durability waits).

mod auth;
mod changes;
mod chunks;
mod durable;
mod files;
mod health;
mod pairing;
mod reply;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response};
use protocol::{ErrorCode, Route};

use self::reply::{ApiError, ApiResult};
use crate::app::App;
use crate::body::Body;

/// Answers one request; never fails (errors become protocol error responses).
pub async fn handle(app: Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let (route, result) = dispatch(&app, peer, req).await;
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    app.metrics.count_request(route, resp.status().as_u16());
    resp
}

/// Routes one request: `None` (counted as `other`) when no route has its path.
async fn dispatch(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> (Option<Route>, ApiResult) {
    let path = req.uri().path().to_owned();
    let m = req.method().clone();
    let Some(matched) = Route::recognize(m.as_str(), &path) else {
        return (
            None,
            Err(ApiError::new(
                ErrorCode::NotFound,
                format!("no route {path}"),
            )),
        );
    };
    let route = matched.route;
    let allowed = route.method();
    if m.as_str() != allowed.as_str() {
        return (
            Some(route),
            Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{} takes {allowed}, not {m}", route.metric_label()),
            )),
        );
    }
    if writes(route)
        && let Err(free) = app.check_space()
    {
        return (
            Some(route),
            Err(ApiError::new(
                ErrorCode::VolumeFull,
                format!("the data volume is full ({free} bytes free); reads still work"),
            )),
        );
    }
    let param = matched.param.unwrap_or("").to_owned();
    // `--inject-delay-route`: every route but version posts is slowed here, before its
    // handler (a version post is slowed inside its handler, after its checks, as always).
    if app.inject_delay_route == route && route != Route::PostVersion {
        files::inject_delay(app.inject_delay_us);
    }
    let result = match route {
        Route::Livez => health::livez(),
        Route::Readyz => health::readyz(app),
        Route::Metrics => health::metrics(app, peer),
        Route::Setup => pairing::setup(app, req).await,
        Route::PairingCreate => pairing::pairing_create(app, req).await,
        Route::PairingClaim => pairing::pairing_claim(app, req, &param).await,
        Route::PairingApprove => pairing::pairing_approve(app, req, &param).await,
        Route::PairingEnvelope => pairing::pairing_envelope(app, req, &param).await,
        Route::ChunksExists => chunks::chunks_exists(app, req).await,
        Route::ChunksGet => chunks::chunks_get(app, req).await,
        Route::GetChunk => chunks::get_chunk(app, req, &param).await,
        Route::PutChunk => chunks::put_chunk(app, req, &param).await,
        Route::PostVersion => files::post_version(app, req, &param).await,
        Route::GetFile => files::get_file(app, req, &param).await,
        Route::ListFiles => files::list_files(app, req).await,
        Route::Changes => changes::changes(app, req).await,
    };
    (Some(route), result)
}

/// Routes that store something. On a full volume they are answered `507 volume_full` before
/// anything else (authentication included: the answer tells nothing about the account), so
/// writes fail alike whichever writer met ENOSPC first, while reads go on.
fn writes(route: Route) -> bool {
    match route {
        Route::Setup
        | Route::PairingCreate
        | Route::PairingClaim
        | Route::PairingApprove
        | Route::PairingEnvelope
        | Route::PutChunk
        | Route::PostVersion => true,
        Route::Livez
        | Route::Readyz
        | Route::Metrics
        | Route::ChunksExists
        | Route::ChunksGet
        | Route::GetChunk
        | Route::GetFile
        | Route::ListFiles
        | Route::Changes => false,
    }
}

#[cfg(test)]
mod tests {
    use super::auth::constant_time_eq;

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}

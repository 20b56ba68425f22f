//! The change feed: `GET /v1/changes?since=&wait=&limit=`, a long poll when `wait` is set.

use std::time::Duration;

use hyper::Request;
use hyper::StatusCode;
use hyper::body::Incoming;
use protocol::wire::ChangesResponse;
use protocol::{ErrorCode, limits};

use super::auth::auth_with_body;
use super::durable::seq_after;
use super::reply::{ApiError, ApiResult, json, num_param, query_params};
use crate::app::{App, until_shutdown};
use crate::metrics::Metrics;

pub(super) async fn changes(app: &App, req: Request<Incoming>) -> ApiResult {
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
            () = until_shutdown(&mut shutdown) => false,
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

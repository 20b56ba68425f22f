//! The change feed from the device's side: a long poll (`wait_changes`) and the feed pages
//! pull and resync read.

use std::time::Duration;

use protocol::Route;
use protocol::limits::MAX_CHANGES_LIMIT;
use protocol::wire::ChangesResponse;

use crate::client::{Device, Outgoing};
use crate::error::LoadError;
use crate::stats::Recorder;

/// Holds `GET /v1/changes?since=..&wait=..` until a change lands or `wait_s` (≤ 55) passes.
pub async fn wait_changes(
    dev: &Device,
    since: u64,
    wait_s: u64,
) -> Result<ChangesResponse, LoadError> {
    let wait_s = wait_s.min(protocol::limits::MAX_WAIT_S);
    let pq = format!("/v1/changes?since={since}&wait={wait_s}&limit={MAX_CHANGES_LIMIT}");
    let a = dev
        .call(
            &dev.inner.ambient,
            Outgoing::new(Route::Changes, &pq).timeout(Duration::from_secs(wait_s + 15)),
            &[200],
        )
        .await?;
    a.json(Route::Changes)
}

pub(super) async fn changes_page(
    dev: &Device,
    rec: &Recorder,
    since: u64,
) -> Result<ChangesResponse, LoadError> {
    let pq = format!("/v1/changes?since={since}&limit={MAX_CHANGES_LIMIT}");
    let a = dev
        .call(rec, Outgoing::new(Route::Changes, &pq), &[200])
        .await?;
    a.json(Route::Changes)
}

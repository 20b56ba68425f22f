//! Hot internals reachable by the fuzz targets in `fuzz/` and the criterion benches: the
//! answer parser ([`h1`]), the `chunks/get` multipart parser ([`parse_chunks_get`]), the
//! change feed's page checks ([`follow_feed`]) and recording one sample. Hidden from the
//! docs; not the API.

use std::time::{Duration, Instant};

pub use crate::h1::probe as h1;
pub use crate::stats::Recorder;

/// Records one closed-loop request outcome into `recorder` exactly as a route-load worker
/// does: service latency `latency` ending now, `status` ("200", "io", ...), and bytes.
pub fn record(recorder: &Recorder, route: &str, status: &str, latency: Duration, bytes: u64) {
    let done = Instant::now();
    recorder.record(
        route,
        status,
        crate::stats::Sample {
            sent: done.checked_sub(latency).unwrap_or(done),
            intended: None,
            done,
            bytes_sent: bytes,
            bytes_received: bytes,
            sign: None,
        },
    );
}

/// One part of a `chunks/get` answer as the pull's parser read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPart {
    pub sid: String,
    pub missing: bool,
    pub body: Vec<u8>,
}

/// The pull's `multipart/mixed` parser on arbitrary bytes: the parts (at most `max_parts`),
/// or its one-line error.
pub fn parse_chunks_get(
    content_type: &str,
    body: &[u8],
    max_parts: usize,
) -> Result<Vec<ChunkPart>, String> {
    let body = bytes::Bytes::copy_from_slice(body);
    crate::protocols::obsync::sync::parse_multipart(content_type, &body, max_parts).map(|parts| {
        parts
            .into_iter()
            .map(|p| ChunkPart {
                sid: p.sid,
                missing: p.missing,
                body: p.body.to_vec(),
            })
            .collect()
    })
}

/// What a pull does with a run of feed answers, short of the network and the disk: each
/// page's JSON read, its size checked, each change's manifest decoded and its path checked
/// as safe, and the cursor moved (or the feed refused as stalled, or as past the default
/// [`FeedBounds`](crate::FeedBounds)). Returns the `since` the next page would be asked with
/// and whether the feed ended, or the one-line error.
pub fn follow_feed(pages: &[&[u8]], since: u64) -> Result<(u64, bool), String> {
    follow_feed_within(pages, since, crate::FeedBounds::DEFAULT)
}

/// [`follow_feed`] with other walk bounds.
pub fn follow_feed_within(
    pages: &[&[u8]],
    since: u64,
    bounds: crate::FeedBounds,
) -> Result<(u64, bool), String> {
    use crate::protocols::obsync::sync::{FeedCursor, check_page, decode_manifest, safe_rel_path};
    let mut cursor = FeedCursor::new(since, bounds);
    for body in pages {
        crate::json_budget::check(body, crate::json_budget::MAX_JSON_VALUES)
            .map_err(|e| format!("changes: malformed answer: {e}"))?;
        let page: protocol::wire::ChangesResponse =
            serde_json::from_slice(body).map_err(|e| format!("changes: malformed answer: {e}"))?;
        check_page(&page, protocol::limits::MAX_CHANGES_LIMIT).map_err(|e| e.to_string())?;
        // As the pull does: the page judged first, then its changes.
        let more = cursor.advance(&page).map_err(|e| e.to_string())?;
        for c in &page.changes {
            if c.deleted {
                continue;
            }
            let m = decode_manifest(c).map_err(|e| e.to_string())?;
            safe_rel_path(&m.path).map_err(|e| e.to_string())?;
        }
        if !more {
            return Ok((cursor.seq, true));
        }
    }
    Ok((cursor.seq, false))
}

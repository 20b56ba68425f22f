//! The change feed from the device's side: a long poll (`wait_changes`) and the feed pages
//! pull and resync read.

use std::time::Duration;

use protocol::Route;
use protocol::limits::MAX_CHANGES_LIMIT;
use protocol::wire::ChangesResponse;

use crate::error::LoadError;
use crate::feed::{FeedBounds, FeedWalk};
use crate::protocols::obsync::client::{Device, Outgoing};
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

/// [`wait_changes`] over `conn`, a connection the waiting device keeps to itself (see
/// [`held`](crate::protocols::obsync::held)): while the poll waits it holds a socket and
/// nothing else. A transport failure or a 503 is tried again, as the pool's requests are, up
/// to three times within the deadline.
pub async fn wait_changes_held(
    dev: &Device,
    conn: &mut crate::protocols::obsync::held::HeldConn,
    since: u64,
    wait_s: u64,
) -> Result<ChangesResponse, LoadError> {
    let wait_s = wait_s.min(protocol::limits::MAX_WAIT_S);
    let pq = format!("/v1/changes?since={since}&wait={wait_s}&limit={MAX_CHANGES_LIMIT}");
    let timeout = Duration::from_secs(wait_s + 15);
    let deadline = std::time::Instant::now() + timeout;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let req = Outgoing::new(Route::Changes, &pq).timeout(left);
        let res = dev.send_held(&dev.inner.ambient, conn, &req).await;
        let retry = match &res {
            Err(LoadError::Transport { .. }) => true,
            Ok(a) => a.status == 503,
            Err(_) => false,
        };
        let backoff = Duration::from_millis(50 << (attempt - 1));
        if retry && attempt < 3 && std::time::Instant::now() + backoff < deadline {
            tokio::time::sleep(backoff).await;
            continue;
        }
        let a = res?;
        return if a.status == 200 {
            a.json(Route::Changes)
        } else {
            Err(a.into_error(Route::Changes))
        };
    }
}

/// Pages a feed may list changes without moving `seq` before the reader gives up: a server
/// whose page is stale once (a reader racing a write) moves on at the next ask; three in a
/// row is a server that will not.
pub(crate) const MAX_STALLED_PAGES: u32 = 3;

/// A reader's place in the feed: the `since` of the next page. Follows each page's `seq`
/// (protocol: "a client pages by asking again with `since = seq` until `seq ≥ head_seq`"),
/// never backwards, refuses a feed that keeps listing changes without moving, and counts the
/// walk against its [`FeedBounds`], so a feed that keeps inventing entries under a rising
/// `seq` ends at the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FeedCursor {
    pub seq: u64,
    stalled: u32,
    walk: FeedWalk,
}

impl FeedCursor {
    pub fn new(since: u64, bounds: FeedBounds) -> FeedCursor {
        FeedCursor {
            seq: since,
            stalled: 0,
            walk: FeedWalk::new(bounds),
        }
    }

    /// Takes in one page, before anything acts on it: `Ok(true)` when there is more to read,
    /// `Ok(false)` at the end of the feed (an empty page, or `seq` reaching `head_seq`), and
    /// an error when the page lists changes without moving past the cursor for the
    /// [`MAX_STALLED_PAGES`]th time in a row, or takes the walk past one of its bounds.
    pub fn advance(&mut self, page: &ChangesResponse) -> Result<bool, LoadError> {
        if page.changes.is_empty() {
            return Ok(false);
        }
        if page.seq > self.seq {
            self.seq = page.seq;
            self.stalled = 0;
        } else {
            self.stalled += 1;
            if self.stalled >= MAX_STALLED_PAGES {
                return Err(LoadError::FeedStalled {
                    route: Route::Changes.label().to_owned(),
                    seq: self.seq,
                    pages: self.stalled,
                });
            }
        }
        let more = self.seq < page.head_seq;
        self.walk
            .page(page.changes.len(), more)
            .map_err(|overrun| LoadError::FeedOverrun {
                route: FEED_ROUTE.to_owned(),
                overrun,
            })?;
        Ok(more)
    }
}

/// The feed's request as a bound's error names it.
const FEED_ROUTE: &str = "GET /v1/changes";

pub(super) async fn changes_page(
    dev: &Device,
    rec: &Recorder,
    since: u64,
) -> Result<ChangesResponse, LoadError> {
    let pq = format!("/v1/changes?since={since}&limit={MAX_CHANGES_LIMIT}");
    let a = dev
        .call(rec, Outgoing::new(Route::Changes, &pq), &[200])
        .await?;
    let page: ChangesResponse = a.json(Route::Changes)?;
    check_page(&page, MAX_CHANGES_LIMIT)?;
    Ok(page)
}

/// The checks a feed page passes before anything acts on it: no more entries than asked for.
/// (`seq` values are only compared, never added, so any `u64` is safe.)
pub(crate) fn check_page(page: &ChangesResponse, limit: usize) -> Result<(), LoadError> {
    if page.changes.len() > limit {
        return Err(LoadError::BadAnswer {
            route: Route::Changes.label().to_owned(),
            detail: format!(
                "a page of {} changes, over the limit of {limit} asked for",
                page.changes.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(seq: u64, head_seq: u64, n: usize) -> ChangesResponse {
        let c = protocol::wire::Change {
            seq,
            file_id: String::new(),
            domain_id: String::new(),
            version_id: String::new(),
            parents: vec![],
            sids: vec![],
            bytes: 0,
            manifest_ct: String::new(),
            manifest_nonce: String::new(),
            device_id: String::new(),
            ts: 0,
            deleted: false,
            heads: vec![],
            conflicted: false,
        };
        ChangesResponse {
            seq,
            head_seq,
            changes: vec![c; n],
        }
    }

    #[test]
    fn the_cursor_follows_seq_and_refuses_a_stalled_feed() {
        let mut c = FeedCursor::new(0, FeedBounds::DEFAULT);
        assert!(c.advance(&page(5, 10, 2)).unwrap());
        assert_eq!(c.seq, 5);
        // Once stale, then moving on: fine.
        assert!(c.advance(&page(5, 10, 1)).unwrap());
        assert!(!c.advance(&page(10, 10, 1)).unwrap());
        assert!(
            !c.advance(&page(10, 10, 0)).unwrap(),
            "an empty page ends it"
        );
        // Never backwards, and the third page in a row that does not move is an error.
        let mut c = FeedCursor::new(7, FeedBounds::DEFAULT);
        assert!(c.advance(&page(3, u64::MAX, 1)).unwrap());
        assert_eq!(c.seq, 7);
        assert!(c.advance(&page(7, u64::MAX, 1)).unwrap());
        let e = c.advance(&page(7, u64::MAX, 1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "changes: server's changes feed did not advance seq past 7 in 3 pages (each listed changes)"
        );
    }

    #[test]
    fn the_cursor_stops_a_rising_feed_at_its_bounds() {
        let b = FeedBounds {
            max_entries: 5,
            max_pages: 100,
            ..FeedBounds::DEFAULT
        };
        let mut c = FeedCursor::new(0, b);
        assert!(c.advance(&page(1, u64::MAX, 3)).unwrap());
        let e = c.advance(&page(2, u64::MAX, 3)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "GET /v1/changes: server's changes feed listed more than 5 entries in one walk (bound --feed-max-entries)"
        );
        let mut c = FeedCursor::new(
            0,
            FeedBounds {
                max_entries: 100,
                max_pages: 2,
                ..FeedBounds::DEFAULT
            },
        );
        assert!(c.advance(&page(1, u64::MAX, 1)).unwrap());
        let e = c.advance(&page(2, u64::MAX, 1)).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("went on past 2 pages in one walk (bound --feed-max-pages)"),
            "{e}"
        );
        // A feed that ends on the last page allowed is whole.
        let mut c = FeedCursor::new(0, FeedBounds { max_pages: 2, ..b });
        assert!(c.advance(&page(1, 2, 1)).unwrap());
        assert!(!c.advance(&page(2, 2, 1)).unwrap());
    }

    #[test]
    fn a_page_over_its_limit_is_refused() {
        assert!(check_page(&page(1, 1, 3), 3).is_ok());
        let e = check_page(&page(1, 1, 4), 3).unwrap_err();
        assert!(e.to_string().contains("over the limit of 3"), "{e}");
    }
}

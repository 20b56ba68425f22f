//! The bounds of one walk of a changes feed, shared by every protocol that reads one (each
//! protocol's [`crate::protocols::Spec`] gives its defaults): a file of its own, so no
//! protocol's reader imports another's.

/// How far one walk of a changes feed may go before it stops with an error naming the bound:
/// a walk is the pages one read of the feed asks for, from where the reader is to the feed's
/// end (a cold pull, an idle resync, a catch-up, a replication pass). The feed that does not
/// advance is refused on its third page already; these bound the feed that keeps inventing
/// new entries under a rising `seq`, which would otherwise run until the phase's time limit.
///
/// The defaults are sized from the largest vault profile, `vault100k` (100,000 notes at the
/// real-vault shape, 4 folders per 100 notes), with headroom for a user's own vault and its
/// history (every version of a file is a feed entry, and real vaults see bulk changes of
/// 1,000–6,600 files):
/// - entries: `vault100k` lists 104,000 (100,000 files and 4,000 folders) on the signed
///   protocol's feed; 2^20 = 1,048,576 is ten times that. Its pull holds one page at a time,
///   so the bound is about time, not memory;
/// - pages: that feed pages by 1,000 (the protocol's largest `limit`), so `vault100k`
///   takes 104 pages and the entry bound 1,049; 4,096 pages is 39 times the first and 4 times
///   the second, and stops a feed of one-entry pages after 4,096 requests, not 1,048,576;
/// - a protocol whose feed pages or documents differ sets its own defaults in its
///   [`crate::protocols::Spec`].
///
/// A pull that holds documents while it walks (a replica's: chunks until the file that lists
/// them is written, files waiting for chunks, what it keeps of each file written) has a byte
/// budget too, `max_bytes` ([`FeedBounds::HELD_BYTES_DEFAULT`]); a pull that holds one page
/// at a time (the signed protocol's) does not read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeedBounds {
    /// Entries (changes, rows) one walk may list.
    pub max_entries: u64,
    /// Pages one walk may ask for.
    pub max_pages: u64,
    /// Bytes of documents a pull may hold at once (read by a pull that holds documents).
    #[serde(default = "held_bytes_default")]
    pub max_bytes: u64,
}

fn held_bytes_default() -> u64 {
    FeedBounds::HELD_BYTES_DEFAULT
}

impl FeedBounds {
    /// The defaults of the reference server's signed feed (pages of up to 1,000 entries), and
    /// of a protocol that sets none of its own.
    pub const DEFAULT: FeedBounds = FeedBounds {
        max_entries: 1 << 20,
        max_pages: 4096,
        max_bytes: FeedBounds::HELD_BYTES_DEFAULT,
    };
    /// What a pull may hold at once, 64 MiB. Sized from `vault100k` as the counts
    /// are: a pull in the feed's order holds what it keeps of every file written (its id,
    /// path and revision, counted with 128 bytes of overhead each: 24.6 MiB for
    /// `vault100k`'s 100,000 files) and the chunks of the file being assembled (at most
    /// 0.44 MiB there, its largest file as carried); 64 MiB is 2.6 times their sum, and holds
    /// an answer of the 64 MiB cap only when the pull holds nothing else. (Counted by the
    /// slow test `the_byte_budget_holds_vault100k` among the hostile-server tests.) Each
    /// answer is capped at what is left of the budget, so the pull's memory stays within
    /// about twice the budget whatever the server sends.
    pub const HELD_BYTES_DEFAULT: u64 = 64 << 20;

    /// These bounds with the ones a user set (`--feed-max-*`) in place of their own.
    pub fn with(self, set: FeedOverrides) -> FeedBounds {
        FeedBounds {
            max_entries: set.max_entries.unwrap_or(self.max_entries),
            max_pages: set.max_pages.unwrap_or(self.max_pages),
            max_bytes: set.max_bytes.unwrap_or(self.max_bytes),
        }
    }
}

/// The feed bounds a user set (`--feed-max-*`); the unset ones keep the protocol's defaults
/// ([`FeedBounds::with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeedOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl Default for FeedBounds {
    fn default() -> FeedBounds {
        FeedBounds::DEFAULT
    }
}

/// A walk that passed one of its [`FeedBounds`]: the server's behaviour and the flag that sets
/// the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FeedOverrun {
    #[error(
        "server's changes feed listed more than {limit} entries in one walk (bound --feed-max-entries)"
    )]
    Entries { limit: u64 },
    #[error(
        "server's changes feed went on past {limit} pages in one walk (bound --feed-max-pages)"
    )]
    Pages { limit: u64 },
}

/// What one walk has read so far, against its bounds. Counts are checked: a server's page
/// cannot wrap them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FeedWalk {
    bounds: FeedBounds,
    pages: u64,
    entries: u64,
}

impl FeedWalk {
    pub fn new(bounds: FeedBounds) -> FeedWalk {
        FeedWalk {
            bounds,
            pages: 0,
            entries: 0,
        }
    }

    /// Counts one page of `entries`, before anything acts on it; `more`: whether the walk
    /// would ask for another page after it. An error when the walk has now listed more
    /// entries than its bound, or would ask for a page past its last.
    pub fn page(&mut self, entries: usize, more: bool) -> Result<(), FeedOverrun> {
        let b = self.bounds;
        let too_many = FeedOverrun::Entries {
            limit: b.max_entries,
        };
        self.entries = u64::try_from(entries)
            .ok()
            .and_then(|n| self.entries.checked_add(n))
            .filter(|&n| n <= b.max_entries)
            .ok_or(too_many)?;
        let past = FeedOverrun::Pages { limit: b.max_pages };
        self.pages = self.pages.checked_add(1).ok_or(past)?;
        if more && self.pages >= b.max_pages {
            return Err(past);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_stops_past_its_entries_and_at_its_last_page() {
        let b = FeedBounds {
            max_entries: 10,
            max_pages: 3,
            ..FeedBounds::DEFAULT
        };
        let mut w = FeedWalk::new(b);
        assert_eq!(w.page(4, true), Ok(()));
        assert_eq!(w.page(6, true), Ok(()), "exactly the bound is fine");
        assert_eq!(w.page(1, true), Err(FeedOverrun::Entries { limit: 10 }));
        // Three pages, the last one ending the feed: fine; a fourth asked for is not.
        let mut w = FeedWalk::new(b);
        for _ in 0..2 {
            w.page(1, true).unwrap();
        }
        assert_eq!(w.page(1, false), Ok(()));
        let mut w = FeedWalk::new(b);
        w.page(1, true).unwrap();
        w.page(1, true).unwrap();
        let e = w.page(1, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "server's changes feed went on past 3 pages in one walk (bound --feed-max-pages)"
        );
    }

    #[test]
    fn counts_never_wrap() {
        let mut w = FeedWalk::new(FeedBounds {
            max_entries: u64::MAX,
            max_pages: u64::MAX,
            ..FeedBounds::DEFAULT
        });
        w.page(usize::MAX, true).unwrap();
        assert_eq!(
            w.page(usize::MAX, true),
            Err(FeedOverrun::Entries { limit: u64::MAX })
        );
        let mut w = FeedWalk {
            pages: u64::MAX,
            ..FeedWalk::new(FeedBounds::DEFAULT)
        };
        w.bounds.max_pages = u64::MAX;
        assert_eq!(
            w.page(0, false),
            Err(FeedOverrun::Pages { limit: u64::MAX })
        );
        assert_eq!(
            FeedOverrun::Entries { limit: 1 << 20 }.to_string(),
            "server's changes feed listed more than 1048576 entries in one walk (bound --feed-max-entries)"
        );
    }
}

//! One generator of several (`--shard I/N`, or a Locust worker's index): which enrolled
//! devices are its own. Shard `i` with `k` devices per shard owns device indices
//! `i*k .. (i+1)*k` of the shared state file, and its nonce streams carry `i` in their upper
//! 32 bits (`StateFile::stream_tag`), so no two shards ever send from the same device or draw
//! the same nonce.

use std::ops::Range;
use std::str::FromStr;

/// Most shards: stream tags are 32 bits, and device ranges must stay far below `usize::MAX`.
pub const MAX_SHARDS: u32 = 1 << 20;

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The only shard: a generator alone.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// The device indices this shard owns with `per_shard` devices each; `None` when they
    /// would not fit a `usize`.
    pub fn devices(self, per_shard: usize) -> Option<Range<usize>> {
        let start = (self.index as usize).checked_mul(per_shard)?;
        Some(start..start.checked_add(per_shard)?)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `I/N` with `0 <= I < N <= 2^20`, e.g. `0/4` (Kubernetes' `JOB_COMPLETION_INDEX` and a
    /// GitHub Actions matrix index both count from 0).
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = |why: &str| format!("shard {s:?}: {why}");
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, e.g. 0/4"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| bad("I is not a whole number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("N is not a whole number"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(bad(&format!("N must be 1 to {MAX_SHARDS}")));
        }
        if index >= count {
            return Err(bad("I must be below N (shards count from 0)"));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_ranges_are_disjoint() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["4/4", "1", "a/2", "0/0", "-1/3", "1/2/3", ""] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        let ranges: Vec<_> = (0..4)
            .map(|i| Shard { index: i, count: 4 }.devices(10).unwrap())
            .collect();
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert_eq!(ranges[0], 0..10);
        assert_eq!(
            Shard {
                index: MAX_SHARDS - 1,
                count: MAX_SHARDS
            }
            .devices(usize::MAX / 2),
            None
        );
    }
}

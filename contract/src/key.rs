//! The metric-key grammar. Keys are dot-separated; the route-load keys have a fixed shape,
//! `route.<route>.c<in_flight>.<stat>` (e.g. `route.get-chunk.c4.p99_us`), typed here so no
//! call site builds or splits them by hand. Route names and stats never contain a dot.

use std::fmt;
use std::str::FromStr;

/// The first segment of every route-load key.
pub const ROUTE_PREFIX: &str = "route";

/// `route.<route>.c<in_flight>.<stat>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteLoadKey {
    pub route: String,
    pub in_flight: u32,
    pub stat: String,
}

impl RouteLoadKey {
    pub fn new(route: &str, in_flight: u32, stat: &str) -> RouteLoadKey {
        RouteLoadKey {
            route: route.to_owned(),
            in_flight,
            stat: stat.to_owned(),
        }
    }
}

impl RouteLoadKey {
    /// This key with another stat (`p50_us` -> `rps`).
    pub fn with_stat(&self, stat: &str) -> RouteLoadKey {
        RouteLoadKey::new(&self.route, self.in_flight, stat)
    }

    /// The stat-less prefix `route.<route>.c<in_flight>`, the key of the level's latency
    /// histogram.
    pub fn level(&self) -> String {
        format!("{ROUTE_PREFIX}.{}.c{}", self.route, self.in_flight)
    }
}

impl fmt::Display for RouteLoadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{ROUTE_PREFIX}.{}.c{}.{}",
            self.route, self.in_flight, self.stat
        )
    }
}

/// A key that is not of the shape asked for (the key named).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metric key {0:?} is not of the form route.<route>.c<in_flight>.<stat>")]
pub struct KeyError(pub String);

impl FromStr for RouteLoadKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<RouteLoadKey, KeyError> {
        let bad = || KeyError(s.to_owned());
        let mut parts = s.split('.');
        let (Some(ROUTE_PREFIX), Some(route), Some(level), Some(stat), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        let digits = level.strip_prefix('c').ok_or_else(bad)?;
        // Only the canonical spelling: `c4`, never `c04` or `c+4`, so display(parse(k)) == k.
        if route.is_empty()
            || stat.is_empty()
            || digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return Err(bad());
        }
        Ok(RouteLoadKey {
            route: route.to_owned(),
            in_flight: digits.parse().map_err(|_| bad())?,
            stat: stat.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_key_gives_its_siblings_and_its_level() {
        let k = RouteLoadKey::new("get-chunk", 4, "p50_us");
        assert_eq!(k.with_stat("rps").to_string(), "route.get-chunk.c4.rps");
        assert_eq!(k.level(), "route.get-chunk.c4");
        assert!(k.to_string().starts_with(&format!("{}.", k.level())));
    }

    #[test]
    fn parses_and_refuses() {
        let k: RouteLoadKey = "route.get-chunk.c4.p99_us".parse().unwrap();
        assert_eq!(k, RouteLoadKey::new("get-chunk", 4, "p99_us"));
        for bad in [
            "route.get-chunk.4.p99_us",
            "route.get-chunk.c04.p99_us",
            "route.get-chunk.c4",
            "route.get-chunk.c4.p99_us.x",
            "cold_pull.get-chunk.c4.p99_us",
            "route..c4.rps",
        ] {
            assert!(bad.parse::<RouteLoadKey>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(
            route in "[a-z][a-z-]{0,15}",
            n in any::<u32>(),
            stat in "[a-z][a-z0-9_]{0,10}",
        ) {
            let k = RouteLoadKey::new(&route, n, &stat);
            let s = k.to_string();
            prop_assert_eq!(s.parse::<RouteLoadKey>().unwrap(), k);
            prop_assert_eq!(s.parse::<RouteLoadKey>().unwrap().to_string(), s);
        }
    }
}

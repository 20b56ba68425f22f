//! The server under load: a parsed `http://host:port` URL, loopback-only unless allowed.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use crate::error::LoadError;
use crate::feed::FeedBounds;

/// A validated target. Only plain HTTP/1.1 is spoken (the reference server and the servers
/// measured beside it listen in the clear on loopback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http://host:port` without a trailing slash, as given (host spelling kept).
    base: String,
    /// The address the name resolved to when parsed (first one).
    addr: SocketAddr,
    /// How far one walk of this target's changes feed may go (a pull, a resync, a
    /// listing): carried by every device of the target.
    feed: FeedBounds,
}

impl Target {
    /// Parses `http://HOST[:PORT][/]`. Refuses anything whose every resolved address is not
    /// loopback (127.0.0.0/8, ::1) unless `allow_remote` is set: a load
    /// generator aimed at somebody else's server by a typo is an attack, not a benchmark.
    pub fn parse(url: &str, allow_remote: bool) -> Result<Target, LoadError> {
        let bad = |reason: &str| LoadError::BadTarget {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = if let Some(r) = url.strip_prefix("http://") {
            r
        } else if url.starts_with("https://") {
            return Err(bad("https is not supported (plain http/1.1 only)"));
        } else {
            return Err(bad("expected http://HOST:PORT"));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() {
            return Err(bad("missing host"));
        }
        if authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(bad("expected http://HOST:PORT with no path, query or user"));
        }
        // Split host and port; IPv6 literals come in brackets.
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in host"))?;
            let port = match after {
                "" => 80,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse::<u16>().ok())
                    .ok_or_else(|| bad("bad port"))?,
            };
            (h.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse::<u16>().map_err(|_| bad("bad port"))?),
                None => (authority.to_owned(), 80),
            }
        };
        if port == 0 {
            return Err(bad("port 0"));
        }
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| bad(&format!("cannot resolve {host}: {e}")))?
                .collect(),
        };
        let Some(&addr) = addrs.first() else {
            return Err(bad(&format!("{host} resolved to no address")));
        };
        if !allow_remote && !addrs.iter().all(|a| a.ip().is_loopback()) {
            return Err(LoadError::RemoteRefused {
                url: url.to_owned(),
            });
        }
        Ok(Target {
            base: format!("http://{authority}"),
            addr,
            feed: FeedBounds::DEFAULT,
        })
    }

    /// This target with other feed walk bounds ([`FeedBounds::DEFAULT`] unless set); devices
    /// enrolled on it, or loaded for it, carry them.
    pub fn with_feed_bounds(mut self, bounds: FeedBounds) -> Target {
        self.feed = bounds;
        self
    }

    /// The bounds of one walk of this target's changes feed.
    pub fn feed_bounds(&self) -> FeedBounds {
        self.feed
    }

    /// `http://host:port`
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `host:port` as given (the `Host` header).
    pub fn authority(&self) -> &str {
        // `strip_prefix`, not `trim_start_matches`: this runs once per request of the lean
        // path, and a pattern searcher per call showed in its profile.
        self.base.strip_prefix("http://").unwrap_or(&self.base)
    }

    /// The resolved socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Full URL of a request target such as `/v1/changes?since=0`.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{}", self.base, path_and_query)
    }

    /// File-name-safe label for the default state file (`127.0.0.1-8080`).
    pub fn label(&self) -> String {
        self.base
            .trim_start_matches("http://")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_forms_accepted() {
        for u in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.9.9.9:1",
            "http://[::1]:9000",
            "http://localhost:7000",
        ] {
            let t = Target::parse(u, false).unwrap_or_else(|e| panic!("{u}: {e}"));
            assert!(t.addr().ip().is_loopback(), "{u}");
        }
        let t = Target::parse("http://127.0.0.1:8080/", false).unwrap();
        assert_eq!(t.url("/livez"), "http://127.0.0.1:8080/livez");
        assert_eq!(t.label(), "127.0.0.1-8080");
    }

    #[test]
    fn remote_refused_without_flag() {
        let err = Target::parse("http://10.1.2.3:80", false).unwrap_err();
        assert!(matches!(err, LoadError::RemoteRefused { .. }), "{err}");
        assert!(err.to_string().contains("--allow-remote"));
        let err = Target::parse("http://[2001:db8::1]:80", false).unwrap_err();
        assert!(matches!(err, LoadError::RemoteRefused { .. }));
        assert!(Target::parse("http://10.1.2.3:80", true).is_ok());
    }

    #[test]
    fn malformed_urls_named() {
        for u in [
            "127.0.0.1:80",
            "https://127.0.0.1",
            "http://",
            "http://127.0.0.1:x",
            "http://127.0.0.1:0",
            "http://127.0.0.1:80/v1",
            "http://[::1",
        ] {
            let err = Target::parse(u, false).unwrap_err();
            assert!(matches!(err, LoadError::BadTarget { .. }), "{u}: {err}");
            assert!(err.to_string().contains(u), "{err}");
        }
    }
}

//! The metric-key grammar: every key the harness writes is built here and every reader that
//! needs a key's parts parses it here, so no call site formats or splits keys by hand.
//!
//! Keys are dot-separated segments, none empty. Four families, told apart by their segments
//! alone (no list of phases or routes is needed):
//!
//! | family | shape | examples |
//! |---|---|---|
//! | route load ([`RouteLoadKey`]) | `route.<route>.c<N>.<stat>` | `route.get-chunk.c4.p99_us` |
//! | server cost ([`ServerKey`]) | `<scope>.server.<stat…>`, or `server.<stat…>` for the whole sample | `cold_push.server.cpu_us_per_file`, `route.changes.c1.server.cpu_us_per_request`, `edit.server.thread_cpu_ms.nonce-writer`, `server.io.rchar` |
//! | phase route ([`PhaseRouteKey`]) | `<phase>.<route>.p<Q>_us` | `cold_push.post-version.p50_us` |
//! | phase ([`PhaseKey`]) | `<phase>.<stat…>` | `cold_push.wall_ms`, `cold_push.requests.put-chunk`, `cold_push.own_echo.answers` |
//!
//! A route-load stat is one segment (the generator's own figures); a server or phase stat may
//! hold dots (`fsyncs.journal`, `syscalls.fsync`, `checkpoint.0001000.files_per_s`). Reading
//! goes by the first segment: `route` starts a route level (`route.<route>.c<N>`), `server`
//! a sample-wide server key, anything else is a phase; after the scope, `server.` starts a
//! server-cost stat; a phase followed by exactly two segments, the second `p<Q>_us`, is a
//! phase route; anything else after a phase is a phase stat. Only canonical spellings parse
//! into the typed parts (`c4`, never `c04`; `p50_us`, never `p050_us`), so
//! `parse(k).to_string() == k` for every key (`tests/recorded.rs` checks every committed one).
//!
//! The latency histograms beside the metrics have keys of their own ([`HistogramKey`]):
//! `route.<route>.c<N>` for a route-load level and `<phase>.<route>` for a transfer phase's
//! route.

use std::fmt;
use std::str::FromStr;

/// The whole-sync phases by their key names, in the order a scenario runs them.
pub const SYNC_PHASES: [&str; 6] = [
    "cold_start",
    "cold_push",
    "cold_pull",
    "idle_resync",
    "edit",
    "folder_rename",
];

/// The first segment of every route-load key and histogram.
pub const ROUTE_PREFIX: &str = "route";

/// The segment that starts a server-cost stat (and the first segment of a sample-wide one).
pub const SERVER: &str = "server";

/// The group of the per-name syscall counts of the cost sample's strace run:
/// `<scope>.server.syscalls.<name>`.
pub const SYSCALLS: &str = "syscalls";

/// The group of the fsync counters by kind the reference server exports on `/metrics`:
/// `<scope>.server.fsyncs.<kind>`.
pub const FSYNCS: &str = "fsyncs";

/// A key that is not of the shape asked for: the key, and the shape expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metric key {key:?} is not of the form {expected}")]
pub struct KeyError {
    pub key: String,
    pub expected: &'static str,
}

fn key_error(key: &str, expected: &'static str) -> KeyError {
    KeyError {
        key: key.to_owned(),
        expected,
    }
}

/// `c<N>` in its one spelling: `c4`, never `c04` or `c+4`.
fn parse_level(seg: &str) -> Option<u32> {
    let digits = seg.strip_prefix('c')?;
    canonical_u32(digits)
}

/// `p<Q>_us` in its one spelling.
fn parse_quantile(seg: &str) -> Option<u32> {
    canonical_u32(seg.strip_prefix('p')?.strip_suffix("_us")?)
}

fn canonical_u32(digits: &str) -> Option<u32> {
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// A dotted stat: one or more non-empty segments.
fn valid_stat(stat: &str) -> bool {
    !stat.is_empty() && stat.split('.').all(|s| !s.is_empty())
}

/// A phase name: one non-empty segment that is neither `route` nor `server`.
fn valid_phase(phase: &str) -> bool {
    !phase.is_empty() && !phase.contains('.') && phase != ROUTE_PREFIX && phase != SERVER
}

/// `route.<route>.c<in_flight>`: one concurrency level of a route-load step. It is the key of
/// the level's latency histogram and the scope of its server cost.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteLevel {
    pub route: String,
    pub in_flight: u32,
}

impl RouteLevel {
    pub fn new(route: &str, in_flight: u32) -> RouteLevel {
        RouteLevel {
            route: route.to_owned(),
            in_flight,
        }
    }

    /// The route-load key of `stat` at this level (`route.<route>.c<N>.<stat>`).
    pub fn stat(&self, stat: &str) -> RouteLoadKey {
        RouteLoadKey::new(&self.route, self.in_flight, stat)
    }

    /// The server-cost key of `stat` at this level (`route.<route>.c<N>.server.<stat>`).
    pub fn server(&self, stat: &str) -> ServerKey {
        ServerKey::new(Scope::Level(self.clone()), stat)
    }

    /// A level from its route segment and its `c<N>` segment.
    fn from_parts(route: &str, level: &str) -> Option<RouteLevel> {
        if route.is_empty() {
            return None;
        }
        Some(RouteLevel {
            route: route.to_owned(),
            in_flight: parse_level(level)?,
        })
    }
}

impl fmt::Display for RouteLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ROUTE_PREFIX}.{}.c{}", self.route, self.in_flight)
    }
}

impl FromStr for RouteLevel {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<RouteLevel, KeyError> {
        let bad = || key_error(s, "route.<route>.c<in_flight>");
        let mut parts = s.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(ROUTE_PREFIX), Some(route), Some(level), None) => {
                RouteLevel::from_parts(route, level).ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }
}

/// `route.<route>.c<in_flight>.<stat>`: what the load generator measured at one level. The
/// stat is one segment (`p50_us`, `p99_us`, `rps`, `requests`, `errors`); the server's cost at
/// the level is a [`ServerKey`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

    /// This key with another stat (`p50_us` -> `rps`).
    pub fn with_stat(&self, stat: &str) -> RouteLoadKey {
        RouteLoadKey::new(&self.route, self.in_flight, stat)
    }

    /// The level without its stat (`route.<route>.c<in_flight>`): the key of the level's
    /// latency histogram and the scope of its server cost.
    pub fn level(&self) -> RouteLevel {
        RouteLevel::new(&self.route, self.in_flight)
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

impl FromStr for RouteLoadKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<RouteLoadKey, KeyError> {
        let bad = || key_error(s, "route.<route>.c<in_flight>.<stat>");
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
        let level = RouteLevel::from_parts(route, level).ok_or_else(bad)?;
        if stat.is_empty() {
            return Err(bad());
        }
        Ok(level.stat(stat))
    }
}

/// Where a server-cost key's figures were taken: a phase, or one level of a route-load step.
/// Its text (`cold_push`, `route.post-version.c1`) also names the cost sample's parts (the
/// callgrind dump, the strace window).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Phase(String),
    Level(RouteLevel),
}

impl Scope {
    pub fn phase(name: &str) -> Scope {
        Scope::Phase(name.to_owned())
    }

    /// The phase's name; `None` for a route level.
    pub fn phase_name(&self) -> Option<&str> {
        match self {
            Scope::Phase(p) => Some(p),
            Scope::Level(_) => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Phase(p) => f.write_str(p),
            Scope::Level(l) => l.fmt(f),
        }
    }
}

impl From<RouteLevel> for Scope {
    fn from(l: RouteLevel) -> Scope {
        Scope::Level(l)
    }
}

impl FromStr for Scope {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Scope, KeyError> {
        if s.starts_with("route.") {
            return s.parse().map(Scope::Level);
        }
        if valid_phase(s) {
            Ok(Scope::phase(s))
        } else {
            Err(key_error(s, "<phase> or route.<route>.c<in_flight>"))
        }
    }
}

/// `<scope>.server.<stat…>`: what the server did in a phase or a route-load level (its CPU,
/// io, fsyncs, syscalls, instructions), or with no scope, `server.<stat…>`, over the whole
/// sample (`server.cpu_s`, `server.io.rchar`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerKey {
    /// `None`: the whole sample.
    pub scope: Option<Scope>,
    pub stat: String,
}

impl ServerKey {
    pub fn new(scope: Scope, stat: &str) -> ServerKey {
        ServerKey {
            scope: Some(scope),
            stat: stat.to_owned(),
        }
    }

    /// `<scope>.server.<group>.<item>`: one member of a group of counters
    /// ([`SYSCALLS`], [`FSYNCS`], `thread_cpu_ms`).
    pub fn grouped(scope: Scope, group: &str, item: &str) -> ServerKey {
        ServerKey::new(scope, &format!("{group}.{item}"))
    }

    /// A whole-sample key, `server.<stat>`.
    pub fn sample(stat: &str) -> ServerKey {
        ServerKey {
            scope: None,
            stat: stat.to_owned(),
        }
    }

    /// `server.<group>.<item>`: one member of a whole-sample group (`io`, `thread_cpu_s`).
    pub fn sample_grouped(group: &str, item: &str) -> ServerKey {
        ServerKey::sample(&format!("{group}.{item}"))
    }

    /// Whether the key has a scope and is a member of `group`: `<scope>.server.<group>.<item>`
    /// (a phase's fsyncs by kind, a cost part's syscalls by name).
    pub fn is_scoped_member_of(&self, group: &str) -> bool {
        self.scope.is_some() && self.group() == group && self.item().is_some()
    }

    /// The stat's first segment: `fsyncs` for `fsyncs.journal`, `syscalls` for
    /// `syscalls.fsync`, the whole stat when it has one segment.
    pub fn group(&self) -> &str {
        self.stat.split('.').next().unwrap_or("")
    }

    /// The rest of the stat after its group (`journal` for `fsyncs.journal`); `None` for a
    /// one-segment stat.
    pub fn item(&self) -> Option<&str> {
        self.stat.split_once('.').map(|(_, rest)| rest)
    }
}

impl fmt::Display for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            Some(scope) => write!(f, "{scope}.{SERVER}.{}", self.stat),
            None => write!(f, "{SERVER}.{}", self.stat),
        }
    }
}

impl FromStr for ServerKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<ServerKey, KeyError> {
        match s.parse::<MetricKey>() {
            Ok(MetricKey::Server(k)) => Ok(k),
            _ => Err(key_error(s, "<scope>.server.<stat> or server.<stat>")),
        }
    }
}

/// `<phase>.<route>.p<Q>_us`: a latency quantile of one route's requests in a transfer phase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhaseRouteKey {
    pub phase: String,
    pub route: String,
    /// `50` for `p50_us`.
    pub quantile: u32,
}

impl PhaseRouteKey {
    pub fn new(phase: &str, route: &str, quantile: u32) -> PhaseRouteKey {
        PhaseRouteKey {
            phase: phase.to_owned(),
            route: route.to_owned(),
            quantile,
        }
    }

    /// The key of the route's latency histogram in the phase (`<phase>.<route>`).
    pub fn histogram(&self) -> HistogramKey {
        HistogramKey::Transfer {
            phase: self.phase.clone(),
            route: self.route.clone(),
        }
    }
}

impl fmt::Display for PhaseRouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.p{}_us", self.phase, self.route, self.quantile)
    }
}

/// `<phase>.<stat…>`: anything else a phase measured (`wall_ms`, `files`, `requests.<route>`,
/// `own_echo.answers`, `checkpoint.0001000.files_per_s`). A stat that starts with `server.`
/// is a [`ServerKey`], and `<route>.p<Q>_us` a [`PhaseRouteKey`]: built as a phase stat they
/// would read back as those.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhaseKey {
    pub phase: String,
    pub stat: String,
}

impl PhaseKey {
    pub fn new(phase: &str, stat: &str) -> PhaseKey {
        PhaseKey {
            phase: phase.to_owned(),
            stat: stat.to_owned(),
        }
    }

    /// `<phase>.requests.<route>`: the requests a transfer phase sent on one route.
    pub fn requests(phase: &str, route: &str) -> PhaseKey {
        PhaseKey::new(phase, &format!("requests.{route}"))
    }

    /// The route of a `requests.<route>` stat.
    pub fn requests_route(&self) -> Option<&str> {
        self.stat
            .strip_prefix("requests.")
            .filter(|r| !r.contains('.'))
    }
}

impl fmt::Display for PhaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.phase, self.stat)
    }
}

/// Any metric key, in its family.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetricKey {
    RouteLoad(RouteLoadKey),
    Server(ServerKey),
    PhaseRoute(PhaseRouteKey),
    Phase(PhaseKey),
}

impl MetricKey {
    /// `<phase>.<stat…>`.
    pub fn phase(phase: &str, stat: &str) -> MetricKey {
        MetricKey::Phase(PhaseKey::new(phase, stat))
    }

    /// The phase the key belongs to: a phase stat's, a phase route's, or a server key's whose
    /// scope is a phase; `None` for route-load keys and sample-wide server keys.
    pub fn phase_name(&self) -> Option<&str> {
        match self {
            MetricKey::Phase(k) => Some(&k.phase),
            MetricKey::PhaseRoute(k) => Some(&k.phase),
            MetricKey::Server(k) => k.scope.as_ref().and_then(Scope::phase_name),
            MetricKey::RouteLoad(_) => None,
        }
    }

    /// The route-load level the key belongs to: a route-load key's, or a server key's whose
    /// scope is a level.
    pub fn route_level(&self) -> Option<RouteLevel> {
        match self {
            MetricKey::RouteLoad(k) => Some(k.level()),
            MetricKey::Server(ServerKey {
                scope: Some(Scope::Level(l)),
                ..
            }) => Some(l.clone()),
            _ => None,
        }
    }

    /// The server-cost key, if it is one.
    pub fn as_server(&self) -> Option<&ServerKey> {
        match self {
            MetricKey::Server(k) => Some(k),
            _ => None,
        }
    }

    /// Whether `key` reads as a scoped server key in `group`
    /// ([`ServerKey::is_scoped_member_of`]); a key that does not parse is in no group.
    pub fn is_scoped_server_member(key: &str, group: &str) -> bool {
        key.parse::<MetricKey>()
            .ok()
            .as_ref()
            .and_then(MetricKey::as_server)
            .is_some_and(|s| s.is_scoped_member_of(group))
    }
}

impl fmt::Display for MetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricKey::RouteLoad(k) => k.fmt(f),
            MetricKey::Server(k) => k.fmt(f),
            MetricKey::PhaseRoute(k) => k.fmt(f),
            MetricKey::Phase(k) => k.fmt(f),
        }
    }
}

impl FromStr for MetricKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<MetricKey, KeyError> {
        const SHAPES: &str = "route.<route>.c<N>.<stat>, <scope>.server.<stat>, \
                              server.<stat>, <phase>.<route>.p<Q>_us or <phase>.<stat>";
        let bad = || key_error(s, SHAPES);
        if !valid_stat(s) {
            return Err(bad());
        }
        let (head, rest) = s.split_once('.').ok_or_else(bad)?;
        // Where the stat after a scope starts, and the scope.
        let (scope, after) = match head {
            ROUTE_PREFIX => {
                let mut parts = rest.splitn(3, '.');
                let (Some(route), Some(level)) = (parts.next(), parts.next()) else {
                    return Err(bad());
                };
                let level = RouteLevel::from_parts(route, level).ok_or_else(bad)?;
                // `route.<route>.c<N>` alone is a histogram, not a metric.
                let after = parts.next().ok_or_else(bad)?;
                if !after.contains('.') {
                    return Ok(MetricKey::RouteLoad(level.stat(after)));
                }
                (Scope::Level(level), after)
            }
            SERVER => return Ok(MetricKey::Server(ServerKey::sample(rest))),
            phase => (Scope::phase(phase), rest),
        };
        if let Some(stat) = after.strip_prefix("server.") {
            return Ok(MetricKey::Server(ServerKey::new(scope, stat)));
        }
        let Scope::Phase(phase) = scope else {
            // A route level followed by a dotted stat that is not the server's.
            return Err(bad());
        };
        if let Some((route, q)) = after.split_once('.')
            && let Some(quantile) = parse_quantile(q)
        {
            return Ok(MetricKey::PhaseRoute(PhaseRouteKey {
                phase,
                route: route.to_owned(),
                quantile,
            }));
        }
        Ok(MetricKey::Phase(PhaseKey {
            phase,
            stat: after.to_owned(),
        }))
    }
}

impl From<RouteLoadKey> for MetricKey {
    fn from(k: RouteLoadKey) -> MetricKey {
        MetricKey::RouteLoad(k)
    }
}
impl From<ServerKey> for MetricKey {
    fn from(k: ServerKey) -> MetricKey {
        MetricKey::Server(k)
    }
}
impl From<PhaseRouteKey> for MetricKey {
    fn from(k: PhaseRouteKey) -> MetricKey {
        MetricKey::PhaseRoute(k)
    }
}
impl From<PhaseKey> for MetricKey {
    fn from(k: PhaseKey) -> MetricKey {
        MetricKey::Phase(k)
    }
}

/// A key as the `String` a metrics map holds.
macro_rules! into_string {
    ($($t:ty),*) => {$(
        impl From<$t> for String {
            fn from(k: $t) -> String {
                k.to_string()
            }
        }
    )*};
}
into_string!(
    MetricKey,
    RouteLoadKey,
    ServerKey,
    PhaseRouteKey,
    PhaseKey,
    HistogramKey
);

/// The key of a latency histogram beside the metrics.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HistogramKey {
    /// `route.<route>.c<N>`: one route-load level.
    Level(RouteLevel),
    /// `<phase>.<route>`: one route's requests in a transfer phase.
    Transfer { phase: String, route: String },
}

impl HistogramKey {
    /// The metric key of the histogram's `p<Q>_us` (`route.<route>.c<N>.p50_us`,
    /// `<phase>.<route>.p50_us`).
    pub fn quantile(&self, q: u32) -> MetricKey {
        match self {
            HistogramKey::Level(l) => l.stat(&format!("p{q}_us")).into(),
            HistogramKey::Transfer { phase, route } => PhaseRouteKey::new(phase, route, q).into(),
        }
    }
}

impl fmt::Display for HistogramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistogramKey::Level(l) => l.fmt(f),
            HistogramKey::Transfer { phase, route } => write!(f, "{phase}.{route}"),
        }
    }
}

impl From<RouteLevel> for HistogramKey {
    fn from(l: RouteLevel) -> HistogramKey {
        HistogramKey::Level(l)
    }
}

impl FromStr for HistogramKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<HistogramKey, KeyError> {
        if let Ok(l) = s.parse::<RouteLevel>() {
            return Ok(HistogramKey::Level(l));
        }
        match s.split_once('.') {
            Some((phase, route))
                if valid_phase(phase) && !route.is_empty() && !route.contains('.') =>
            {
                Ok(HistogramKey::Transfer {
                    phase: phase.to_owned(),
                    route: route.to_owned(),
                })
            }
            _ => Err(key_error(
                s,
                "route.<route>.c<in_flight> or <phase>.<route>",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(s: &str) -> MetricKey {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_key_gives_its_siblings_and_its_level() {
        let k = RouteLoadKey::new("get-chunk", 4, "p50_us");
        assert_eq!(k.with_stat("rps").to_string(), "route.get-chunk.c4.rps");
        assert_eq!(k.level().to_string(), "route.get-chunk.c4");
        assert!(k.to_string().starts_with(&format!("{}.", k.level())));
        assert_eq!(
            k.level().server("cpu_us_per_request").to_string(),
            "route.get-chunk.c4.server.cpu_us_per_request"
        );
    }

    #[test]
    fn parses_and_refuses_route_load_keys() {
        let k: RouteLoadKey = "route.get-chunk.c4.p99_us".parse().unwrap();
        assert_eq!(k, RouteLoadKey::new("get-chunk", 4, "p99_us"));
        for bad in [
            "route.get-chunk.4.p99_us",
            "route.get-chunk.c04.p99_us",
            "route.get-chunk.c4",
            "route.get-chunk.c4.p99_us.x",
            "route.get-chunk.c4.server.cpu_us_per_request",
            "cold_pull.get-chunk.c4.p99_us",
            "route..c4.rps",
        ] {
            assert!(bad.parse::<RouteLoadKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_family_reads_into_its_parts() {
        assert_eq!(
            parse("route.changes.c1.server.cpu_us_per_request"),
            MetricKey::Server(RouteLevel::new("changes", 1).server("cpu_us_per_request"))
        );
        assert_eq!(
            parse("route.put-chunk.c4.server.syscalls.fsync"),
            MetricKey::Server(RouteLevel::new("put-chunk", 4).server("syscalls.fsync"))
        );
        let fsync = parse("cold_push.server.fsyncs.journal");
        assert_eq!(
            fsync,
            MetricKey::Server(ServerKey::new(Scope::phase("cold_push"), "fsyncs.journal"))
        );
        assert_eq!(fsync.as_server().unwrap().group(), FSYNCS);
        assert_eq!(
            fsync.as_server().unwrap(),
            &ServerKey::grouped(Scope::phase("cold_push"), FSYNCS, "journal")
        );
        assert_eq!(fsync.as_server().unwrap().item(), Some("journal"));
        assert!(MetricKey::is_scoped_server_member(
            "route.put-chunk.c4.server.syscalls.fsync",
            SYSCALLS
        ));
        for (k, group) in [
            ("server.fsyncs.journal", FSYNCS),
            ("cold_push.server.fsyncs_per_file", FSYNCS),
            ("cold_push.server.syscalls_per_request", SYSCALLS),
            ("cold_push.fsyncs.journal", FSYNCS),
            ("cold_push.server.fsyncs.journal", SYSCALLS),
        ] {
            assert!(!MetricKey::is_scoped_server_member(k, group), "{k}");
        }
        assert_eq!(fsync.phase_name(), Some("cold_push"));
        assert_eq!(
            parse("server.thread_cpu_s.tokio-runtime-w"),
            MetricKey::Server(ServerKey::sample("thread_cpu_s.tokio-runtime-w"))
        );
        assert_eq!(parse("server.cpu_s").phase_name(), None);
        assert_eq!(
            parse("cold_pull.propfind-depth1.p95_us"),
            MetricKey::PhaseRoute(PhaseRouteKey::new("cold_pull", "propfind-depth1", 95))
        );
        let req = parse("cold_push.requests.put-chunk");
        assert_eq!(
            req,
            MetricKey::Phase(PhaseKey::requests("cold_push", "put-chunk"))
        );
        let MetricKey::Phase(req) = req else {
            unreachable!()
        };
        assert_eq!(req.requests_route(), Some("put-chunk"));
        for (k, phase, stat) in [
            (
                "cold_push.own_echo.answers",
                "cold_push",
                "own_echo.answers",
            ),
            ("edit.p50_ms", "edit", "p50_ms"),
            (
                "cost_sample.vgdb_dump_ms.max",
                "cost_sample",
                "vgdb_dump_ms.max",
            ),
            (
                "cold_push.checkpoint.0001000.files_per_s",
                "cold_push",
                "checkpoint.0001000.files_per_s",
            ),
            // Not canonical as a quantile: a phase stat, which still round-trips.
            ("cold_push.x.p050_us", "cold_push", "x.p050_us"),
        ] {
            assert_eq!(parse(k), MetricKey::phase(phase, stat), "{k}");
        }
        assert_eq!(
            parse("route.move.c4.rps").route_level(),
            Some(RouteLevel::new("move", 4))
        );
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in [
            "",
            "wall_ms",
            "cold_push.",
            ".wall_ms",
            "cold_push..wall_ms",
            "route.x.c1",
            "route.x.c01.rps",
            "route.x.c1.a.b",
            "route.x",
            "server",
        ] {
            let e = bad.parse::<MetricKey>().unwrap_err();
            assert_eq!(e.key, bad);
        }
    }

    #[test]
    fn histogram_keys_and_their_quantiles() {
        let h: HistogramKey = "route.get-chunk.c4".parse().unwrap();
        assert_eq!(h, HistogramKey::Level(RouteLevel::new("get-chunk", 4)));
        assert_eq!(h.quantile(50).to_string(), "route.get-chunk.c4.p50_us");
        let h: HistogramKey = "cold_pull.changes".parse().unwrap();
        assert_eq!(h.quantile(99).to_string(), "cold_pull.changes.p99_us");
        assert_eq!(
            PhaseRouteKey::new("cold_pull", "changes", 50).histogram(),
            h
        );
        for bad in ["route.x.c1.p50_us", "cold_pull", "a.b.c", "server.x"] {
            assert!(bad.parse::<HistogramKey>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(
            route in "[a-z][a-z0-9-]{0,15}",
            phase in "[a-z][a-z_]{0,12}",
            n in any::<u32>(),
            q in 0u32..1000,
            stat in "[a-z][a-z0-9_]{0,10}",
            dotted in "[a-z][a-z0-9_-]{0,6}(\\.[a-z0-9][a-z0-9_-]{0,6}){0,2}",
        ) {
            prop_assume!(phase != "route" && phase != "server" && route != "server");
            let level = RouteLevel::new(&route, n);
            let keys: Vec<MetricKey> = vec![
                level.stat(&stat).into(),
                level.server(&dotted).into(),
                ServerKey::new(Scope::phase(&phase), &dotted).into(),
                ServerKey::sample(&dotted).into(),
                PhaseRouteKey::new(&phase, &route, q).into(),
                PhaseKey::requests(&phase, &route).into(),
            ];
            for k in keys {
                let s = k.to_string();
                prop_assert_eq!(s.parse::<MetricKey>().unwrap(), k);
            }
            // Any phase stat reads back as some key with the same text.
            let p = PhaseKey::new(&phase, &dotted).to_string();
            prop_assert_eq!(p.parse::<MetricKey>().unwrap().to_string(), p);
            for h in [
                HistogramKey::Level(level),
                HistogramKey::Transfer { phase, route },
            ] {
                prop_assert_eq!(h.to_string().parse::<HistogramKey>().unwrap(), h);
            }
        }
    }
}

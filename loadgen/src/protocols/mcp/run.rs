//! One measured life of an MCP server over stdio: spawn, the era probe and handshake, the
//! first `tools/list` (cold boot, each step its own timestamp), warm listings, the seeded
//! `tools/call` workload at each in-flight level (concurrent ids on the one pipe), and the
//! shutdown (stdin closed → exit). The server's CPU per call comes from its process group's
//! `/proc` figures around each level, its peak RSS from its `VmHWM` and `wait4`.
//! [`Report::keys`] names the figures in the metric-key grammar of `contract::key`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use contract::key::{PhaseKey, PhaseRouteKey, Scope, ServerKey};
use contract::schema::MetricClass;

use super::McpError;
use super::session::{CallOutcome, Conn, Era, Listing, Negotiated, Session};
use super::stdio::{EndedBy, Shutdown, StdioConfig, StdioConn, Traffic};
use super::workload::{self, ToolMap};

/// What one run does and how long each wait may take.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub stdio: StdioConfig,
    /// The vault the server serves (the workload's paths are absolute under it).
    pub vault: PathBuf,
    /// The workload's seed.
    pub seed: u64,
    /// Calls per op of the workload, at each level.
    pub calls_per_op: usize,
    /// In-flight levels, each its own phase (`mcp_calls_c<N>`).
    pub levels: Vec<usize>,
    /// Warm `tools/list` calls after the first.
    pub warm_lists: usize,
    /// The most `tools/list` pages followed.
    pub max_pages: usize,
    /// How long `server/discover` may go unanswered before the handshake era is assumed.
    pub probe: Duration,
    /// Spawn to the first complete listing.
    pub boot: Duration,
    /// One call's answer.
    pub call: Duration,
    /// One level's whole workload.
    pub level: Duration,
    /// stdin closed to exit, before SIGTERM (a preset's `[mcp] shutdown_grace`); over
    /// HTTP, the session's DELETE.
    pub shutdown: Duration,
    /// SIGTERM to exit, before SIGKILL.
    pub term: Duration,
    /// The target's own search tool (`[mcp] search_tool`); `None`: the tools known by name.
    pub search: Option<crate::launch::mcp::SearchSpec>,
}

impl RunConfig {
    /// `argv` over `vault` with the defaults: 20 calls per op at 1 and 8 in flight.
    pub fn new(argv: Vec<String>, vault: PathBuf) -> RunConfig {
        RunConfig {
            stdio: StdioConfig::new(argv),
            vault,
            seed: 0x5eed,
            calls_per_op: 20,
            levels: vec![1, 8],
            warm_lists: 5,
            max_pages: DEFAULT_MAX_PAGES,
            probe: Duration::from_secs(3),
            boot: Duration::from_secs(30),
            call: Duration::from_secs(10),
            level: Duration::from_secs(300),
            shutdown: Duration::from_secs(5),
            term: Duration::from_secs(5),
            search: None,
        }
    }
}

/// 100 pages: a field report's vault server registered 157 tools, and the reference
/// filesystem server lists its 14 in one page; a hundred pages is a listing no honest server
/// of that size needs, however small its pages.
pub const DEFAULT_MAX_PAGES: usize = 100;

/// Spawn → each step of the cold boot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Boot {
    pub first_byte: Duration,
    /// `server/discover` or `initialize` answered.
    pub handshake: Duration,
    pub first_list: Duration,
}

/// One in-flight level's calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Level {
    /// Latencies by tool, µs, in call order.
    pub latency_us: BTreeMap<String, Vec<u64>>,
    pub calls: u64,
    pub tool_errors: u64,
    pub protocol_errors: u64,
    pub wall: Duration,
    /// The server's process group's CPU over the level, µs.
    pub cpu_us: u64,
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub negotiated: Negotiated,
    pub boot: Boot,
    pub tools: usize,
    pub list_pages: usize,
    pub list_bytes: usize,
    pub tool_map: ToolMap,
    pub warm_list_us: Vec<u64>,
    pub levels: BTreeMap<usize, Level>,
    /// stdin closed → exit (stdio, whichever step ended it), or the session's DELETE
    /// answered (HTTP); `None`: an HTTP server had no session to delete.
    pub shutdown: Option<Duration>,
    /// The step that ended a stdio server (stdin closed, SIGTERM, SIGKILL); `None` over HTTP.
    pub shutdown_by: Option<EndedBy>,
    /// The grace between stdin closed and SIGTERM (stdio).
    pub shutdown_grace: Duration,
    /// `stdio` or `http`.
    pub transport: &'static str,
    pub peak_rss_kib: u64,
    pub traffic: Traffic,
}

/// One metric as the recording types it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue {
    pub key: String,
    pub class: MetricClass,
    pub value: f64,
    pub unit: &'static str,
}

/// The nearest-rank quantile `q` (0..=100) of `v` (not empty).
fn quantile(v: &[u64], q: u32) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = (u64::from(q) * s.len() as u64).div_ceil(100).max(1) as usize;
    s[rank.min(s.len()) - 1]
}

/// A tool name as one key segment: letters, digits, `_` and `-`; others become `_`.
pub fn segment(tool: &str) -> String {
    let s: String = tool
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".into() } else { s }
}

/// The phase names of the keys.
pub const BOOT: &str = "mcp_boot";
pub const WARM: &str = "mcp_list_warm";
pub const SHUTDOWN: &str = "mcp_shutdown";
/// The phase of level `n`.
pub fn calls_phase(n: usize) -> String {
    format!("mcp_calls_c{n}")
}

impl Report {
    /// Every figure as a metric key with its class and unit.
    pub fn keys(&self) -> Vec<KeyValue> {
        let mut out = self.phase_keys();
        out.push(KeyValue {
            key: ServerKey::sample("peak_rss_kib").to_string(),
            class: MetricClass::Resource,
            value: self.peak_rss_kib as f64,
            unit: "KiB",
        });
        out
    }

    /// The figures of the phases (`mcp_*`), without the server's sample-wide peak RSS (which
    /// a recording's sample measures on its own).
    pub fn phase_keys(&self) -> Vec<KeyValue> {
        let mut out = Vec::new();
        let mut put = |key: String, class, value: f64, unit| {
            out.push(KeyValue {
                key,
                class,
                value,
                unit,
            })
        };
        let us = |d: Duration| d.as_micros() as f64;
        let phase = |p: &str, stat: &str| PhaseKey::new(p, stat).to_string();
        put(
            phase(BOOT, "first_byte_us"),
            MetricClass::Timing,
            us(self.boot.first_byte),
            "us",
        );
        put(
            phase(BOOT, "handshake_us"),
            MetricClass::Timing,
            us(self.boot.handshake),
            "us",
        );
        put(
            phase(BOOT, "first_list_us"),
            MetricClass::Timing,
            us(self.boot.first_list),
            "us",
        );
        put(
            phase(BOOT, "tools"),
            MetricClass::Exact,
            self.tools as f64,
            "tools",
        );
        put(
            phase(BOOT, "list_bytes"),
            MetricClass::Exact,
            self.list_bytes as f64,
            "B",
        );
        put(
            phase(BOOT, "list_pages"),
            MetricClass::Exact,
            self.list_pages as f64,
            "pages",
        );
        if !self.warm_list_us.is_empty() {
            put(
                phase(WARM, "p50_us"),
                MetricClass::Timing,
                quantile(&self.warm_list_us, 50) as f64,
                "us",
            );
        }
        for (n, l) in &self.levels {
            let p = calls_phase(*n);
            for (tool, v) in &l.latency_us {
                if v.is_empty() {
                    continue;
                }
                let t = segment(tool);
                for q in [50, 99] {
                    put(
                        PhaseRouteKey::new(&p, &t, q).to_string(),
                        MetricClass::Timing,
                        quantile(v, q) as f64,
                        "us",
                    );
                }
                put(
                    PhaseKey::new(&p, &format!("calls.{t}")).to_string(),
                    MetricClass::Exact,
                    v.len() as f64,
                    "calls",
                );
            }
            // The same latencies by the workload's op, whatever the tool's name: a release
            // that renames its read tool (`read_file` → `read_text_file`) is still compared.
            for (op, tool) in self.tool_map.by_op() {
                let Some(v) = l.latency_us.get(tool).filter(|v| !v.is_empty()) else {
                    continue;
                };
                for q in [50, 99] {
                    put(
                        PhaseRouteKey::new(&p, &format!("op_{op}"), q).to_string(),
                        MetricClass::Timing,
                        quantile(v, q) as f64,
                        "us",
                    );
                }
            }
            put(
                phase(&p, "tool_errors"),
                MetricClass::Exact,
                l.tool_errors as f64,
                "calls",
            );
            put(
                phase(&p, "protocol_errors"),
                MetricClass::Exact,
                l.protocol_errors as f64,
                "calls",
            );
            put(
                phase(&p, "wall_ms"),
                MetricClass::Timing,
                l.wall.as_secs_f64() * 1e3,
                "ms",
            );
            if l.calls > 0 {
                put(
                    ServerKey::new(Scope::phase(&p), "cpu_us_per_call").to_string(),
                    MetricClass::Resource,
                    l.cpu_us as f64 / l.calls as f64,
                    "us",
                );
            }
        }
        if let Some(d) = self.shutdown {
            let stat = if self.transport == "http" {
                "delete_us"
            } else {
                "exit_us"
            };
            put(phase(SHUTDOWN, stat), MetricClass::Timing, us(d), "us");
        }
        if let Some(by) = self.shutdown_by {
            put(
                phase(SHUTDOWN, &format!("ended_by.{}", by.name())),
                MetricClass::Exact,
                1.0,
                "bool",
            );
            put(
                phase(SHUTDOWN, "grace_ms"),
                MetricClass::Exact,
                self.shutdown_grace.as_millis() as f64,
                "ms",
            );
        }
        out
    }
}

/// The CPU of `pgid`'s live processes, µs: each thread's `schedstat` (nanoseconds; `stat`'s
/// clock ticks of 10 ms would round a level of 40 calls to 250 µs per call). A thread that
/// exits during a level takes its CPU with it (a server's worker threads live as long as it).
pub fn group_cpu_us(pgid: u32) -> u64 {
    procstat::read::group_pids(pgid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| procstat::read::threads_cpu_ns(procstat::Pid::Of(p)).ok())
        .sum::<u64>()
        / 1000
}

/// The peak RSS of `pgid`'s live processes, KiB (the largest one's).
fn group_peak_rss_kib(pgid: u32) -> u64 {
    procstat::read::group_pids(pgid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            procstat::read::peak_rss_kib(procstat::Pid::Of(p))
                .ok()
                .flatten()
        })
        .max()
        .unwrap_or(0)
}

/// A server up: its session, spawn → each step of the boot, and its first listing.
pub struct Booted {
    pub session: Arc<Session>,
    pub boot: Boot,
    pub listing: Listing,
}

/// The cold boot over `conn` (spawned at `conn.spawned()`): the era probe and handshake, then
/// the first complete listing, all within `cfg.boot` of the spawn.
pub async fn boot(conn: impl Into<Conn>, cfg: &RunConfig) -> Result<Booted, McpError> {
    let conn = conn.into();
    let t0 = conn.spawned();
    let boot_by = t0 + cfg.boot;
    let session = Session::open(conn, cfg.probe, boot_by).await?;
    let handshake = t0.elapsed();
    let listing = session
        .list_tools(cfg.max_pages, boot_by)
        .await
        .map_err(|e| session.conn.with_stderr(e))?;
    let first_list = t0.elapsed();
    let first_byte = session
        .conn
        .first_byte()
        .map_or(handshake, |t| t.duration_since(t0));
    Ok(Booted {
        session: Arc::new(session),
        boot: Boot {
            first_byte,
            handshake,
            first_list,
        },
        listing,
    })
}

/// `n` warm listings, one after another, each within `cfg.call`: their times, µs.
pub async fn warm_lists(
    session: &Session,
    n: usize,
    cfg: &RunConfig,
) -> Result<Vec<u64>, McpError> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let at = Instant::now();
        session
            .list_tools(cfg.max_pages, at + cfg.call)
            .await
            .map_err(|e| session.conn.with_stderr(e))?;
        out.push(at.elapsed().as_micros() as u64);
    }
    Ok(out)
}

/// The seeded workload over `cfg.vault` for the tools of `listing`.
pub fn workload(
    cfg: &RunConfig,
    listing: &Listing,
) -> Result<(ToolMap, Vec<workload::Call>), McpError> {
    let (files, folders) = workload::walk(&cfg.vault)?;
    let mut tool_map = ToolMap::from_listing(listing);
    if cfg.search.is_some()
        && let Some(s) = super::quality::search_tool(listing, cfg.search.as_ref())?
    {
        tool_map = tool_map.with_search(s);
    }
    let mut calls = workload::plan(
        &cfg.vault,
        &files,
        &folders,
        &tool_map,
        cfg.calls_per_op,
        cfg.seed,
    );
    // A server without vault tools (the reference test server) gets its own calls.
    if calls.is_empty() {
        calls = super::generic::plan(listing, &files, cfg.calls_per_op, cfg.seed);
    }
    Ok((tool_map, calls))
}

/// The peak RSS of the session's server now (its process group's largest `VmHWM`), KiB.
pub fn peak_rss_now(session: &Session) -> u64 {
    group_peak_rss_kib(session.conn.pid())
}

/// The transport's end of the session: stdin closed and the exit awaited for `cfg.shutdown`,
/// then SIGTERM and `cfg.term` more, then SIGKILL; or the session's DELETE within
/// `cfg.shutdown`. Every call must have ended (the session is not shared any more).
pub async fn shutdown(session: Arc<Session>, cfg: &RunConfig) -> Result<Shutdown, McpError> {
    let Ok(mut session) = Arc::try_unwrap(session) else {
        return Err(McpError::Protocol {
            method: "shutdown".into(),
            what: "a call was still in flight".into(),
        });
    };
    session.conn.shutdown(cfg.shutdown, cfg.term).await
}

/// Runs one server's whole measured life. Every wait has its bound; on an error the server's
/// group is killed and reaped before the error returns.
pub async fn run(cfg: &RunConfig) -> Result<Report, McpError> {
    // The vault is read before the spawn: a missing one fails before any server starts.
    workload::walk(&cfg.vault)?;
    let conn = StdioConn::spawn(&cfg.stdio)?;
    run_over(conn, cfg).await
}

/// [`run`] over a connection made elsewhere: a stdio server's, or an HTTP server's (whose
/// process its owner stops; the run ends with the session's DELETE).
pub async fn run_over(conn: impl Into<Conn>, cfg: &RunConfig) -> Result<Report, McpError> {
    let Booted {
        session,
        boot,
        listing,
    } = boot(conn, cfg).await?;
    let warm_list_us = warm_lists(&session, cfg.warm_lists, cfg).await?;
    let (tool_map, calls) = workload(cfg, &listing)?;
    let mut levels = BTreeMap::new();
    for &n in &cfg.levels {
        let level = run_level(&session, &calls, n.max(1), cfg)
            .await
            .map_err(|e| session.conn.with_stderr(e))?;
        levels.insert(n, level);
    }
    close(session, boot, &listing, tool_map, warm_list_us, levels, cfg).await
}

/// The report of a run whose calls are done: the server's peak RSS and traffic read, then
/// its shutdown ([`shutdown`]).
pub async fn close(
    session: Arc<Session>,
    boot: Boot,
    listing: &Listing,
    tool_map: ToolMap,
    warm_list_us: Vec<u64>,
    levels: BTreeMap<usize, Level>,
    cfg: &RunConfig,
) -> Result<Report, McpError> {
    let peak_rss_kib = peak_rss_now(&session);
    let traffic = session.conn.traffic();
    let negotiated = session.negotiated.clone();
    let transport = session.conn.transport();
    let down = shutdown(session, cfg).await?;
    Ok(Report {
        negotiated,
        boot,
        tools: listing.tools.len(),
        list_pages: listing.pages,
        list_bytes: listing.bytes,
        tool_map,
        warm_list_us,
        levels,
        shutdown: down.after,
        shutdown_by: down.by,
        shutdown_grace: cfg.shutdown,
        transport,
        peak_rss_kib: peak_rss_kib.max(down.usage.peak_rss_kib),
        traffic,
    })
}

/// The workload at `n` in flight: `n` tasks take the next call in plan order.
pub async fn run_level(
    session: &Arc<Session>,
    calls: &[workload::Call],
    n: usize,
    cfg: &RunConfig,
) -> Result<Level, McpError> {
    let calls: Arc<[workload::Call]> = calls.to_vec().into();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let level_by = started + cfg.level;
    let cpu0 = group_cpu_us(session.conn.pid());
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (s, calls, next, per_call) = (session.clone(), calls.clone(), next.clone(), cfg.call);
        set.spawn(async move {
            let mut done: Vec<(String, u64, CallOutcome)> = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(c) = calls.get(i) else {
                    return Ok(done);
                };
                let at = Instant::now();
                let by = level_by.min(at + per_call);
                let outcome = s.call_tool(&c.tool, c.arguments.clone(), by).await?;
                done.push((c.tool.clone(), at.elapsed().as_micros() as u64, outcome));
            }
        });
    }
    let mut level = Level::default();
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok(done)) => {
                for (tool, us, outcome) in done {
                    level.calls += 1;
                    match outcome {
                        CallOutcome::Ok => {}
                        CallOutcome::ToolError => level.tool_errors += 1,
                        CallOutcome::ProtocolError => level.protocol_errors += 1,
                    }
                    level.latency_us.entry(tool).or_default().push(us);
                }
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
                set.abort_all();
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                first_err.get_or_insert(McpError::Protocol {
                    method: "tools/call".into(),
                    what: format!("a call task failed: {e}"),
                });
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    level.wall = started.elapsed();
    level.cpu_us = group_cpu_us(session.conn.pid()).saturating_sub(cpu0);
    Ok(level)
}

/// The era's name and the version, as a recording names them (`stateless 2026-07-28`).
pub fn era_line(n: &Negotiated) -> String {
    let era: Era = n.era;
    format!("{} {}", era.name(), n.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_and_segments_are_key_safe() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 50), 50);
        assert_eq!(quantile(&v, 99), 99);
        assert_eq!(quantile(&[7], 99), 7);
        assert_eq!(quantile(&[3, 1, 2], 50), 2);
        assert_eq!(segment("read_text_file"), "read_text_file");
        assert_eq!(segment("a.b c"), "a_b_c");
        assert_eq!(segment(""), "_");
        let k = PhaseRouteKey::new(&calls_phase(8), &segment("read.x"), 99).to_string();
        assert_eq!(k, "mcp_calls_c8.read_x.p99_us");
        assert_eq!(
            k.parse::<contract::key::MetricKey>().unwrap().to_string(),
            k
        );
        let op = PhaseRouteKey::new(&calls_phase(1), "op_read_note", 50).to_string();
        assert_eq!(op, "mcp_calls_c1.op_read_note.p50_us");
        assert!(op.parse::<contract::key::MetricKey>().is_ok());
    }

    #[test]
    fn ops_name_the_tools_the_server_has() {
        let map = ToolMap {
            read: Some("read_file".into()),
            search: Some("search_notes".into()),
            ..ToolMap::default()
        };
        assert_eq!(
            map.by_op(),
            [("read_note", "read_file"), ("search", "search_notes")]
        );
    }
}

//! Scenario definitions: a vault profile plus phases, as data (TOML).
//!
//! Built-ins live in `scenarios/scenarios/*.toml` and are embedded at compile time; users pass
//! their own with `--scenario-file`. Parsing is strict (unknown keys are errors) and pure.

use serde::{Deserialize, Serialize};

/// One scenario: what vault, which phases, how many samples by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// One line: what this scenario is for and where its shape comes from.
    pub doc: String,
    /// A vault profile name (`scenarios::PROFILE_NAMES`); empty when `profile_file` is given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// A shape file written by `vault measure`, relative to the scenario file: the vault is
    /// that shape's synthetic twin ([`Scenario::profile_file_in`]). Exclusive with `profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_file: Option<String>,
    /// Vault seed; the profile's default when absent.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Counted samples per recording (after one discarded warm-up).
    #[serde(default = "default_samples")]
    pub samples: u32,
    /// Enrolled devices (A pushes, B pulls, all of them share route load).
    #[serde(default = "default_devices")]
    pub devices: usize,
    /// The protocol the devices speak (default: the reference server's signed protocol). What
    /// a protocol can run (faults, crash phases, long-poll steps, an options table) is checked
    /// against the harness's protocol registry before anything runs.
    #[serde(default, skip_serializing_if = "Protocol::is_default")]
    pub protocol: Protocol,
    /// WebDAV options (only with `protocol = "webdav"`; defaults when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webdav: Option<WebdavOptions>,
    /// S3 options (only with `protocol = "s3"`; defaults when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// The user's own sync client as the devices (client mode): the command lines device A
    /// and device B run in place of the harness's protocol client. The target, its readiness
    /// and credentials still come from `protocol`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientOptions>,
    /// A fault hop between the devices and the target: each rule picks a seeded share of one
    /// route's requests (a protocol whose client runs the hop; the others refuse it). None
    /// when empty.
    #[serde(default, rename = "fault", skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultRule>,
    /// Vault sizes in notes (`scenarios::sizes`): each sample runs the phases once per size,
    /// in order, each over a fresh server holding the first `n` notes of the vault. Empty: one
    /// run over the whole vault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<u32>,
    #[serde(rename = "phase")]
    pub phases: Vec<Phase>,
    /// Log counters: lines of the target's own output (or a log file it writes) matched by a
    /// regular expression, counted or summed per phase (`[[count]]`; `--count` and `--sum` add
    /// to them).
    #[serde(default, rename = "count", skip_serializing_if = "Vec::is_empty")]
    pub counts: Vec<LogCount>,
}

/// One log counter: `regex` run on every line of `source` read during a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogCount {
    /// The key's name (`PHASE.log.NAME`): lowercase letters, digits and `_`.
    pub name: String,
    /// A regular expression (the `regex` crate's syntax, run in linear time). A `sum` needs a
    /// named capture `value` holding a decimal number.
    pub regex: String,
    #[serde(default, skip_serializing_if = "CountKind::is_count")]
    pub kind: CountKind,
    /// `"output"` (stdout and stderr, the default) or `"file:REL"`, a file the target writes,
    /// relative to its data dir (tailed while it grows).
    #[serde(default = "default_source", skip_serializing_if = "is_output")]
    pub source: String,
}

/// What a log counter adds up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountKind {
    /// Lines that match.
    #[default]
    Count,
    /// The named capture `value` of every line that matches.
    Sum,
}

impl CountKind {
    pub fn is_count(&self) -> bool {
        *self == CountKind::Count
    }
}

fn default_source() -> String {
    "output".into()
}
fn is_output(s: &String) -> bool {
    s == "output"
}

impl LogCount {
    /// The log file's path relative to the data dir, or `None` for the target's output.
    pub fn file(&self) -> Option<&str> {
        self.source.strip_prefix("file:")
    }

    /// Checks the name and the source (the regex is compiled by whoever runs it).
    pub fn check(&self) -> Result<(), String> {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(ok) {
            return Err(format!(
                "count name {:?} must be 1 to 64 of a-z, 0-9 and _",
                self.name
            ));
        }
        match self.file() {
            None if self.source == "output" => Ok(()),
            None => Err(format!(
                "count {} source {:?} must be \"output\" or \"file:REL\"",
                self.name, self.source
            )),
            Some(rel) => {
                let p = std::path::Path::new(rel);
                let inside = !rel.is_empty()
                    && p.components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)));
                if inside {
                    Ok(())
                } else {
                    Err(format!(
                        "count {} source {:?}: the file must be a relative path inside the data dir",
                        self.name, self.source
                    ))
                }
            }
        }
    }
}

/// One rule of a fault hop's schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// A route label (`put-chunk`, `post-version`, ...) or `*`.
    pub route: String,
    pub kind: FaultKind,
    /// Share of the route's requests picked, in `[0, 1]`, drawn from the scenario's seed.
    pub rate: f64,
    /// Milliseconds of delay (`delay`) or of the stall (`stall_body`).
    #[serde(default)]
    pub ms: u64,
}

pub use contract::fault::FaultKind;

pub use crate::client::ClientOptions;

/// The longest delay or stall a fault rule may ask for.
pub const MAX_FAULT_MS: u64 = 60_000;

/// Which protocol the phases speak: a name the harness's protocol registry resolves (and
/// refuses, naming the known ones, when it knows no such protocol).
pub use contract::protocol::Protocol;

/// How the WebDAV client walks and waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebdavOptions {
    /// PROPFIND depth of the pull and resync walks: `"1"` (folder by folder, as the
    /// Remotely Save plugin lists) or `"infinity"` (one request; Apache and nginx refuse it).
    #[serde(default = "default_depth")]
    pub depth: String,
    /// Edit propagation: how often B polls the edited note's folder with PROPFIND, in ms.
    /// WebDAV has no long poll, so the measured delay is bounded below by this interval.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
}

impl Default for WebdavOptions {
    fn default() -> Self {
        WebdavOptions {
            depth: default_depth(),
            poll_ms: default_poll_ms(),
        }
    }
}

fn default_depth() -> String {
    "1".into()
}
/// 100 ms: fine enough to resolve a round's delay to a tenth of a second, while B's polls
/// (at most ten PROPFINDs a second of one folder) stay a small load next to A's PUT.
fn default_poll_ms() -> u64 {
    100
}

/// How the S3 client writes, resyncs and waits, in the terms of Remotely Save's S3 settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Options {
    /// Edit propagation: how often B lists the edited note's folder, in ms. S3 has no change
    /// feed, so the measured delay is bounded below by this interval.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// The plugin's "accurate mtime" setting: every listing walk of the idle resync also
    /// reads each object with HeadObject (off by default in the plugin: each HEAD is a billed
    /// request on a hosted S3).
    #[serde(default)]
    pub accurate_mtime: bool,
    /// The plugin's "generate folder objects" setting: the push writes a zero-byte
    /// `FOLDER/` object for every folder (off by default: folders are key prefixes only).
    #[serde(default)]
    pub folder_objects: bool,
    /// The plugin's end-to-end encryption: `"openssl-base64"` (names and bodies in OpenSSL's
    /// AES-256-CBC format, a PBKDF2 of 20,000 rounds per name and body; the remote is flat,
    /// every folder a zero-byte object). Absent: none, the plugin's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    /// The encryption password (default `vaultbench`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// The encryption methods `[s3] encryption` takes.
pub const S3_ENCRYPTIONS: &[&str] = &["openssl-base64"];

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            poll_ms: default_poll_ms(),
            accurate_mtime: false,
            folder_objects: false,
            encryption: None,
            password: None,
        }
    }
}

fn default_samples() -> u32 {
    5
}
fn default_devices() -> usize {
    4
}

/// The phases a sample runs, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Phase {
    /// Spawn to ready: the server's cold start (always measured; this phase only names it).
    ColdStart,
    /// Device A uploads the whole vault, `in_flight` files at a time (the real plugin uses 4).
    ColdPush {
        #[serde(default = "default_in_flight")]
        in_flight: usize,
        /// Throughput is reported per this many files, so a push that slows as the store grows shows.
        #[serde(default = "default_checkpoint")]
        checkpoint_every: usize,
    },
    /// Device B downloads everything and verifies it byte-identical.
    ColdPull,
    /// "Sync now" with nothing changed: count the requests it still makes.
    IdleResync,
    /// A edits a note while B holds a long poll; time until B has the new bytes on disk.
    EditPropagation {
        #[serde(default = "default_rounds")]
        rounds: usize,
    },
    /// Rename the vault's largest folder: a new version of every file under it.
    FolderRename,
    /// Device A pushes the vault and the target's whole process tree is killed (SIGKILL) after
    /// a seeded number of acknowledged version posts, `crashes` times; after each restart on
    /// the same data dir, every acknowledged version must pull back byte-identical, then the
    /// push resumes. Proves process-crash consistency (a SIGKILL keeps the page cache).
    ///
    /// `kill_at` picks the crash points: `"acked"` (default) kills after K acknowledged posts;
    /// `"mid_body"` kills while a large chunk upload's body is half sent (a seeded number of
    /// its bytes), so the vault needs a file of at least a chunk (`small-big`).
    Crash {
        #[serde(default = "default_in_flight")]
        in_flight: usize,
        #[serde(default = "default_crashes")]
        crashes: usize,
        #[serde(default, skip_serializing_if = "KillAt::is_acked")]
        kill_at: KillAt,
    },
    /// Each route at each in-flight level, bounded either by time (`seconds`, with a
    /// `max_requests` ceiling: throughput keys) or by work (`requests`: exactly that many
    /// requests, so both arms of an A/B do the same work and costs per request compare).
    RouteLoad {
        routes: Vec<String>,
        in_flight: Vec<usize>,
        /// Seconds per route and level (a time-bounded step).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
        /// Ceiling on the requests of a time-bounded step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_requests: Option<u64>,
        /// Requests per route and level (a fixed-work step).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requests: Option<u64>,
    },
    /// `waiters` more devices are enrolled and each holds `GET /v1/changes?wait=` long polls
    /// while `pushers` devices each post `posts` notes, one every `interval_ms`: how long after
    /// a post each waiting device has it (the fan-out), the server's RSS and CPU per 1,000 held
    /// devices and the generator's RSS per 1,000. A waiter refused by the server's connection
    /// cap is counted as a refusal, not an error. Only a protocol with long-poll devices;
    /// keys under `fanout.`.
    LongPollFanout {
        waiters: usize,
        #[serde(default = "default_pushers")]
        pushers: usize,
        #[serde(default = "default_posts")]
        posts: u32,
        #[serde(default = "default_interval_ms")]
        interval_ms: u64,
        /// `wait` of each long poll, in seconds (at most 55, the protocol's bound).
        #[serde(default = "default_wait_s")]
        wait_s: u64,
        /// After every waiter's first poll is out, before the first post.
        #[serde(default = "default_settle_ms")]
        settle_ms: u64,
    },
    /// Several devices pushing at once, the case group commit exists for: at each level D of
    /// `pushers`, D devices each push their own part of the vault (file `i` goes to pusher
    /// `i mod D`, every file tagged so no chunk of an earlier level is reused) as fast as they
    /// are answered, while `waiters` devices long-poll. Journal flushes per post, push
    /// throughput and fan-out per level, under `push_d<D>.`. Only a protocol with long-poll
    /// devices.
    ConcurrentPush {
        pushers: Vec<usize>,
        #[serde(default)]
        waiters: usize,
        /// The vault's first `files` files in sorted order (default: all of them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<usize>,
        #[serde(default = "default_wait_s")]
        wait_s: u64,
        #[serde(default = "default_settle_ms")]
        settle_ms: u64,
    },
    /// An MCP server's `tools/list` asked `lists` more times after the cold boot's first
    /// listing (every `nextCursor` page followed), one at a time: the warm listing's median,
    /// under `mcp_list_warm.`. Only an MCP scenario.
    McpListWarm {
        #[serde(default = "default_mcp_lists")]
        lists: usize,
    },
    /// An MCP server's `tools/call` under the seeded workload over the vault (read a note,
    /// read several, list a folder, search where the server has a search tool; `calls_per_op`
    /// calls of each), once at each level of `in_flight` calls outstanding: per-tool
    /// latencies, tool and protocol errors apart, the server's CPU per call, under
    /// `mcp_calls_c<N>.`. Only an MCP scenario.
    McpCalls {
        #[serde(default = "default_mcp_in_flight")]
        in_flight: Vec<usize>,
        #[serde(default = "default_mcp_calls_per_op")]
        calls_per_op: usize,
    },
    /// tus's one promise under faults: `cuts` of the vault's files (the first in sorted order
    /// with at least two bytes) are uploaded again, each as a new upload, one at a time,
    /// through a seeded cutting hop in front of the target that cuts each first `PATCH` body
    /// part-way (a creation `POST` without a body, then the `PATCH`); the client resumes with
    /// `HEAD` and a `PATCH` from the server's offset, and every resumed upload is read back
    /// past the hop and compared byte for byte. Keys under `tus.` (`tus.resumed_byte_identical`
    /// must be 1: a sample whose resumed upload differs fails). Only a tus scenario.
    TusResume {
        #[serde(default = "default_tus_cuts")]
        cuts: usize,
    },
}

/// The most uploads one `tus_resume` phase may cut (each costs the hop a 50 ms pause).
pub const MAX_TUS_CUTS: usize = 1_000;

fn default_tus_cuts() -> usize {
    20
}

/// The most calls of each kind one `mcp_calls` level may make, and the most warm listings.
pub const MAX_MCP_CALLS: usize = 100_000;
/// The most calls one `mcp_calls` level may have outstanding.
pub const MAX_MCP_IN_FLIGHT: usize = 256;

fn default_mcp_lists() -> usize {
    5
}
fn default_mcp_in_flight() -> Vec<usize> {
    vec![1, 8]
}
fn default_mcp_calls_per_op() -> usize {
    20
}

/// The most long-polling devices one step may enrol.
pub const MAX_WAITERS: usize = 100_000;
/// The most devices pushing at once in one step or level.
pub const MAX_PUSHERS: usize = 1_000;
/// The longest `wait` of a long poll, in seconds (the protocol's bound).
pub const MAX_WAIT_S: u64 = 55;

/// `long_poll_fanout`'s defaults (`vaultbench load fanout` has the same knobs and defaults).
pub mod fanout_defaults {
    /// Devices holding long polls (the step has no default; `load fanout`'s).
    pub const WAITERS: usize = 100;
    pub const PUSHERS: usize = 1;
    pub const POSTS: u32 = 5;
    pub const INTERVAL_MS: u64 = 200;
    pub const WAIT_S: u64 = 30;
    pub const SETTLE_MS: u64 = 1000;
}

fn default_pushers() -> usize {
    fanout_defaults::PUSHERS
}
fn default_posts() -> u32 {
    fanout_defaults::POSTS
}
fn default_interval_ms() -> u64 {
    fanout_defaults::INTERVAL_MS
}
fn default_wait_s() -> u64 {
    fanout_defaults::WAIT_S
}
fn default_settle_ms() -> u64 {
    fanout_defaults::SETTLE_MS
}

/// How a validated `route_load` step is bounded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RouteBound {
    /// Run for `seconds` or until `max_requests`, whichever comes first.
    Time { seconds: f64, max_requests: u64 },
    /// Run exactly `requests` requests (bounded by [`FIXED_WORK_DEADLINE_S`]).
    Requests(u64),
}

/// The most requests a fixed-work step may ask for per route and level.
pub const MAX_FIXED_REQUESTS: u64 = 10_000_000;
/// The deadline of a fixed-work step: the largest `seconds` a time-bounded step may have, so
/// a hung target still ends the sample; a step that reaches it fails.
pub const FIXED_WORK_DEADLINE_S: f64 = 600.0;

impl RouteBound {
    /// The bound of a `route_load` step's fields, after `validate`-style checks.
    pub fn of(
        seconds: Option<f64>,
        max_requests: Option<u64>,
        requests: Option<u64>,
    ) -> Result<RouteBound, String> {
        match (seconds, max_requests, requests) {
            (None, None, Some(n)) if (1..=MAX_FIXED_REQUESTS).contains(&n) => {
                Ok(RouteBound::Requests(n))
            }
            (None, None, Some(n)) => Err(format!(
                "route_load requests {n} must be in 1..={MAX_FIXED_REQUESTS}"
            )),
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => Err(
                "route_load takes either requests or seconds with max_requests, not both".into(),
            ),
            (Some(s), Some(m), None) => {
                if !(s.is_finite() && s > 0.0 && s <= 600.0) {
                    Err(format!("route_load seconds {s} must be in (0, 600]"))
                } else if m == 0 {
                    Err("route_load max_requests must be at least 1".into())
                } else {
                    Ok(RouteBound::Time {
                        seconds: s,
                        max_requests: m,
                    })
                }
            }
            _ => Err("route_load needs requests = N, or seconds and max_requests".into()),
        }
    }
}

impl RouteBound {
    /// The load generator's (duration in seconds, request ceiling) for this bound.
    pub fn duration_and_ceiling(self) -> (f64, u64) {
        match self {
            RouteBound::Time {
                seconds,
                max_requests,
            } => (seconds, max_requests),
            RouteBound::Requests(n) => (FIXED_WORK_DEADLINE_S, n),
        }
    }
}

impl Phase {
    /// A `route_load` step's bound (`None` for other phases or an invalid step).
    pub fn route_bound(&self) -> Option<RouteBound> {
        match self {
            Phase::RouteLoad {
                seconds,
                max_requests,
                requests,
                ..
            } => RouteBound::of(*seconds, *max_requests, *requests).ok(),
            _ => None,
        }
    }
}

fn default_in_flight() -> usize {
    4
}
fn default_checkpoint() -> usize {
    1000
}
fn default_rounds() -> usize {
    20
}
fn default_crashes() -> usize {
    1
}

/// Where a crash phase's kills land.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillAt {
    /// After a seeded number of acknowledged version posts.
    #[default]
    Acked,
    /// Inside a large chunk upload's body, after a seeded number of its bytes.
    MidBody,
}

impl KillAt {
    pub fn is_acked(&self) -> bool {
        *self == KillAt::Acked
    }

    pub fn name(self) -> &'static str {
        match self {
            KillAt::Acked => "acked",
            KillAt::MidBody => "mid_body",
        }
    }
}

/// Most crash points in one crash phase: each costs a restart and a full pull.
pub const MAX_CRASHES: usize = 50;

impl Phase {
    pub fn name(&self) -> &'static str {
        match self {
            Phase::ColdStart => "cold_start",
            Phase::ColdPush { .. } => "cold_push",
            Phase::ColdPull => "cold_pull",
            Phase::IdleResync => "idle_resync",
            Phase::EditPropagation { .. } => "edit",
            Phase::FolderRename => "folder_rename",
            Phase::Crash { .. } => "crash",
            Phase::RouteLoad { .. } => "route",
            Phase::LongPollFanout { .. } => "fanout",
            Phase::ConcurrentPush { .. } => "concurrent_push",
            Phase::McpListWarm { .. } => "mcp_list_warm",
            Phase::McpCalls { .. } => "mcp_calls",
            Phase::TusResume { .. } => "tus_resume",
        }
    }

    /// Whether the phase is one an MCP server runs (`mcp_list_warm`, `mcp_calls`).
    pub fn is_mcp(&self) -> bool {
        matches!(self, Phase::McpListWarm { .. } | Phase::McpCalls { .. })
    }

    /// Whether the step holds many long-polling devices (its devices are enrolled by the step).
    pub fn is_fanout(&self) -> bool {
        matches!(
            self,
            Phase::LongPollFanout { .. } | Phase::ConcurrentPush { .. }
        )
    }
}

/// The key scope of one level of a `concurrent_push` step: `push_d<D>`.
pub fn push_level_scope(pushers: usize) -> String {
    format!("push_d{pushers}")
}

impl Scenario {
    /// Where the `profile_file` of the scenario read from `scenario_file` lives: relative to
    /// the scenario file's folder unless absolute. Pure path arithmetic; the caller reads it.
    pub fn profile_file_in(&self, scenario_file: &std::path::Path) -> Option<std::path::PathBuf> {
        let f = self.profile_file.as_deref()?;
        let dir = scenario_file.parent().unwrap_or(std::path::Path::new(""));
        Some(dir.join(f))
    }
}

/// Why a scenario file did not parse or validate.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("scenario {origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("unknown scenario {name:?} (known: {known})")]
    Unknown { name: String, known: String },
}

/// The built-in scenarios, embedded at compile time: `(name, toml)`.
pub const BUILTIN: &[(&str, &str)] = &[
    ("small", include_str!("../scenarios/small.toml")),
    ("assets", include_str!("../scenarios/assets.toml")),
    ("personal", include_str!("../scenarios/personal.toml")),
    ("vault1k", include_str!("../scenarios/vault1k.toml")),
    ("fixture", include_str!("../scenarios/fixture.toml")),
    ("large", include_str!("../scenarios/large.toml")),
    ("vault100k", include_str!("../scenarios/vault100k.toml")),
    ("hazards", include_str!("../scenarios/hazards.toml")),
    ("crash-small", include_str!("../scenarios/crash-small.toml")),
    (
        "crash-mid-body",
        include_str!("../scenarios/crash-mid-body.toml"),
    ),
    (
        "faults-small",
        include_str!("../scenarios/faults-small.toml"),
    ),
    (
        "small-webdav",
        include_str!("../scenarios/small-webdav.toml"),
    ),
    (
        "personal-webdav",
        include_str!("../scenarios/personal-webdav.toml"),
    ),
    (
        "small-couchdb",
        include_str!("../scenarios/small-couchdb.toml"),
    ),
    ("small-s3", include_str!("../scenarios/small-s3.toml")),
    (
        "small-s3-encrypted",
        include_str!("../scenarios/small-s3-encrypted.toml"),
    ),
    ("personal-s3", include_str!("../scenarios/personal-s3.toml")),
    (
        "personal-couchdb",
        include_str!("../scenarios/personal-couchdb.toml"),
    ),
    (
        "fanout-small",
        include_str!("../scenarios/fanout-small.toml"),
    ),
    ("import", include_str!("../scenarios/import.toml")),
    (
        "import-small",
        include_str!("../scenarios/import-small.toml"),
    ),
    (
        "import-webdav",
        include_str!("../scenarios/import-webdav.toml"),
    ),
    (
        "import-small-webdav",
        include_str!("../scenarios/import-small-webdav.toml"),
    ),
    (
        "import-couchdb",
        include_str!("../scenarios/import-couchdb.toml"),
    ),
    (
        "import-small-couchdb",
        include_str!("../scenarios/import-small-couchdb.toml"),
    ),
    ("import-s3", include_str!("../scenarios/import-s3.toml")),
    (
        "import-small-s3",
        include_str!("../scenarios/import-small-s3.toml"),
    ),
    ("small-mcp", include_str!("../scenarios/small-mcp.toml")),
    ("vault1k-mcp", include_str!("../scenarios/vault1k-mcp.toml")),
    ("growth-mcp", include_str!("../scenarios/growth-mcp.toml")),
    (
        "growth-mcp-small",
        include_str!("../scenarios/growth-mcp-small.toml"),
    ),
    ("import-tus", include_str!("../scenarios/import-tus.toml")),
    (
        "import-tus-small",
        include_str!("../scenarios/import-tus-small.toml"),
    ),
];

/// Names of the built-in scenarios.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// A built-in scenario by name; the error lists the known ones.
pub fn builtin(name: &str) -> Result<Scenario, ScenarioError> {
    match BUILTIN.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => parse(text, &format!("built-in {n}")),
        None => Err(ScenarioError::Unknown {
            name: name.to_owned(),
            known: builtin_names().join(", "),
        }),
    }
}

/// The longest scenario name: its files (`NAME.json`, `NAME.provenance.json`,
/// `NAME.attempts.jsonl`) stay well under the 255-byte file-name limit of Linux file systems.
pub const MAX_NAME_LEN: usize = 64;

/// A scenario name must be a plain file name: it becomes `<out>/NAME.json`. ASCII letters,
/// digits, `-`, `_` and `.`, not starting with `.` (no `..`, no hidden files), at most
/// [`MAX_NAME_LEN`] bytes; so no `/`, no NUL, nothing absolute, never empty.
pub fn check_file_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("is longer than 64 bytes");
    }
    if name.starts_with('.') {
        return Err("starts with '.'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("may hold only ASCII letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// Parses and validates a scenario; `origin` names it in errors (a path or "built-in X").
pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
        origin: origin.to_owned(),
        message: e.message().to_owned()
            + &e.span()
                .map(|r| format!(" (at byte {})", r.start))
                .unwrap_or_default(),
    })?;
    let invalid = |message: String| {
        Err(ScenarioError::Invalid {
            origin: origin.to_owned(),
            message,
        })
    };
    if let Err(why) = check_file_name(&s.name) {
        return invalid(format!(
            "name {:?} {why}: it names the baseline file under --out",
            s.name
        ));
    }
    match (&s.profile_file, s.profile.is_empty()) {
        (Some(_), false) => {
            return invalid("profile and profile_file are exclusive: give one".into());
        }
        (Some(f), true) if f.is_empty() => return invalid("profile_file is empty".into()),
        (None, true) => return invalid("needs a profile or a profile_file".into()),
        _ => {}
    }
    if s.profile_file.is_none() && crate::profile::profile(&s.profile).is_none() {
        return invalid(format!(
            "unknown profile {:?} (known: {})",
            s.profile,
            crate::profile::PROFILE_NAMES.join(", ")
        ));
    }
    if s.samples == 0 {
        return invalid("samples must be at least 1".into());
    }
    if !s.sizes.is_empty() {
        if let Err(e) = crate::sizes::check(&s.sizes) {
            return invalid(format!("sizes {e}"));
        }
        if s.client.is_some() {
            return invalid(
                "sizes and [client] do not go together: a growth scenario is driven by its protocol's own client"
                    .into(),
            );
        }
        if s.profile_file.is_some() {
            return invalid(
                "sizes take a named notes-only profile, not a profile_file (a twin has attachments)"
                    .into(),
            );
        }
        if let Some(p) = crate::profile::profile(&s.profile) {
            let seed = s.seed.unwrap_or(p.default_seed);
            if let Err(e) = crate::sizes::check_profile(&s.sizes, &p, seed) {
                return invalid(format!("sizes {e}"));
            }
        }
    }
    if s.devices < 2 {
        return invalid("devices must be at least 2 (A pushes, B pulls)".into());
    }
    if s.phases.is_empty() {
        return invalid("no phases".into());
    }
    for (i, c) in s.counts.iter().enumerate() {
        if let Err(m) = c.check() {
            return invalid(m);
        }
        if s.counts[..i].iter().any(|o| o.name == c.name) {
            return invalid(format!("count {} is defined twice", c.name));
        }
    }
    if let Some(w) = &s.webdav {
        if w.depth != "1" && w.depth != "infinity" {
            return invalid(format!(
                "webdav depth {:?} must be \"1\" or \"infinity\"",
                w.depth
            ));
        }
        if w.poll_ms == 0 || w.poll_ms > 60_000 {
            return invalid(format!("webdav poll_ms {} must be in 1..=60000", w.poll_ms));
        }
    }
    if let Some(o) = &s.s3 {
        if o.poll_ms == 0 || o.poll_ms > 60_000 {
            return invalid(format!("s3 poll_ms {} must be in 1..=60000", o.poll_ms));
        }
        if let Some(e) = &o.encryption
            && !S3_ENCRYPTIONS.contains(&e.as_str())
        {
            let why = if e == "rclone-base64" {
                " (the plugin's rclone-format encryption is not reproduced)"
            } else {
                ""
            };
            return invalid(format!(
                "s3 encryption {e:?} is not one of {}{why}",
                S3_ENCRYPTIONS.join(", ")
            ));
        }
        if o.password.is_some() && o.encryption.is_none() {
            return invalid("s3 password is given but no encryption".to_owned());
        }
    }
    if let Some(Err(e)) = s.client.as_ref().map(ClientOptions::check) {
        return invalid(e);
    }
    for f in &s.faults {
        if !(f.rate.is_finite() && (0.0..=1.0).contains(&f.rate)) {
            return invalid(format!("fault rate {} must be in [0, 1]", f.rate));
        }
        if f.ms > MAX_FAULT_MS {
            return invalid(format!("fault ms {} is over {MAX_FAULT_MS}", f.ms));
        }
    }
    for p in &s.phases {
        match p {
            Phase::ColdPush {
                in_flight,
                checkpoint_every,
            } if *in_flight == 0 || *checkpoint_every == 0 => {
                return invalid(
                    "cold_push in_flight and checkpoint_every must be at least 1".into(),
                );
            }
            Phase::EditPropagation { rounds } if *rounds == 0 => {
                return invalid("edit_propagation rounds must be at least 1".into());
            }
            Phase::Crash {
                in_flight, crashes, ..
            } if *in_flight == 0 || *crashes == 0 || *crashes > MAX_CRASHES => {
                return invalid(format!(
                    "crash in_flight must be at least 1 and crashes in 1..={MAX_CRASHES}"
                ));
            }
            Phase::RouteLoad {
                routes,
                in_flight,
                seconds,
                max_requests,
                requests,
            } => {
                if routes.is_empty() || in_flight.is_empty() || in_flight.contains(&0) {
                    return invalid(
                        "route_load needs routes and in_flight levels of at least 1".into(),
                    );
                }
                if let Err(e) = RouteBound::of(*seconds, *max_requests, *requests) {
                    return invalid(e);
                }
            }
            Phase::LongPollFanout {
                waiters,
                pushers,
                posts,
                interval_ms,
                wait_s,
                settle_ms,
            } => {
                if let Err(e) = check_fanout(*waiters, &[*pushers], *wait_s, *settle_ms) {
                    return invalid(format!("long_poll_fanout {e}"));
                }
                if *posts == 0 || *posts > 10_000 {
                    return invalid(format!(
                        "long_poll_fanout posts {posts} must be in 1..=10000"
                    ));
                }
                if *interval_ms > 60_000 {
                    return invalid(format!(
                        "long_poll_fanout interval_ms {interval_ms} is over 60000"
                    ));
                }
            }
            Phase::ConcurrentPush {
                pushers,
                waiters,
                files,
                wait_s,
                settle_ms,
            } => {
                if let Err(e) = check_fanout(*waiters, pushers, *wait_s, *settle_ms) {
                    return invalid(format!("concurrent_push {e}"));
                }
                let mut seen = pushers.clone();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() != pushers.len() {
                    return invalid(format!(
                        "concurrent_push pushers {pushers:?} names a level twice"
                    ));
                }
                if *files == Some(0) {
                    return invalid("concurrent_push files must be at least 1".into());
                }
            }
            Phase::McpListWarm { lists } if *lists > MAX_MCP_CALLS => {
                return invalid(format!(
                    "mcp_list_warm lists {lists} is over {MAX_MCP_CALLS}"
                ));
            }
            Phase::McpCalls {
                in_flight,
                calls_per_op,
            } => {
                if in_flight.is_empty()
                    || in_flight.iter().any(|n| *n == 0 || *n > MAX_MCP_IN_FLIGHT)
                {
                    return invalid(format!(
                        "mcp_calls needs in_flight levels in 1..={MAX_MCP_IN_FLIGHT}"
                    ));
                }
                if *calls_per_op == 0 || *calls_per_op > MAX_MCP_CALLS {
                    return invalid(format!(
                        "mcp_calls calls_per_op {calls_per_op} must be in 1..={MAX_MCP_CALLS}"
                    ));
                }
                let mut seen = in_flight.clone();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() != in_flight.len() {
                    return invalid(format!(
                        "mcp_calls in_flight {in_flight:?} names a level twice"
                    ));
                }
            }
            Phase::TusResume { cuts } if *cuts == 0 || *cuts > MAX_TUS_CUTS => {
                return invalid(format!(
                    "tus_resume cuts {cuts} must be in 1..={MAX_TUS_CUTS}"
                ));
            }
            _ => {}
        }
    }
    for kind in [
        "fanout",
        "concurrent_push",
        "mcp_list_warm",
        "mcp_calls",
        "tus_resume",
    ] {
        if s.phases.iter().filter(|p| p.name() == kind).count() > 1 {
            return invalid(format!(
                "{kind}: one such step per scenario (their keys would collide)"
            ));
        }
    }
    let pushes = s
        .phases
        .iter()
        .position(|p| matches!(p, Phase::ColdPush { .. } | Phase::Crash { .. }));
    for (i, p) in s.phases.iter().enumerate() {
        let needs_push = !matches!(
            p,
            Phase::ColdStart
                | Phase::ColdPush { .. }
                | Phase::Crash { .. }
                | Phase::RouteLoad { .. }
                | Phase::LongPollFanout { .. }
                | Phase::ConcurrentPush { .. }
                | Phase::McpListWarm { .. }
                | Phase::McpCalls { .. }
                | Phase::TusResume { .. }
        );
        if needs_push && pushes.is_none_or(|j| j > i) {
            return invalid(format!("phase {} needs a cold_push before it", p.name()));
        }
    }
    Ok(s)
}

/// The bounds shared by the long-polling steps: waiters, every pusher level, the wait and the
/// settle time. The error is the message after the step's kind.
fn check_fanout(
    waiters: usize,
    pushers: &[usize],
    wait_s: u64,
    settle_ms: u64,
) -> Result<(), String> {
    if waiters > MAX_WAITERS {
        return Err(format!("waiters {waiters} is over {MAX_WAITERS}"));
    }
    if pushers.is_empty() {
        return Err("needs at least one pushers level".into());
    }
    if let Some(d) = pushers.iter().find(|d| **d == 0 || **d > MAX_PUSHERS) {
        return Err(format!("pushers {d} must be in 1..={MAX_PUSHERS}"));
    }
    if wait_s == 0 || wait_s > MAX_WAIT_S {
        return Err(format!(
            "wait_s {wait_s} must be in 1..={MAX_WAIT_S} (the protocol's bound)"
        ));
    }
    if settle_ms > 60_000 {
        return Err(format!("settle_ms {settle_ms} is over 60000"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_names_itself() {
        for (name, _) in BUILTIN {
            let s = builtin(name).unwrap();
            assert_eq!(&s.name, name);
            assert!(!s.doc.is_empty());
        }
    }

    #[test]
    fn count_rules_parse_and_bad_ones_are_refused() {
        let head = "name = \"c\"\ndoc = \"d\"\nprofile = \"small\"\n\
                    [[phase]]\nkind = \"cold_push\"\n";
        let ok = format!(
            "{head}[[count]]\nname = \"reindex\"\nregex = '^reindex '\n\
             [[count]]\nname = \"sql_ms\"\nregex = 'ms=(?P<value>[0-9.]+)'\nkind = \"sum\"\n\
             source = \"file:logs/server.log\"\n"
        );
        let s = parse(&ok, "t").unwrap();
        assert_eq!(s.counts.len(), 2);
        assert_eq!(s.counts[1].kind, CountKind::Sum);
        assert_eq!(s.counts[1].file(), Some("logs/server.log"));
        assert_eq!(s.counts[0].file(), None);
        for (bad, why) in [
            ("name = \"Bad\"\nregex = 'x'", "a-z"),
            (
                "name = \"x\"\nregex = 'x'\nsource = \"file:../up.log\"",
                "inside the data dir",
            ),
            ("name = \"x\"\nregex = 'x'\nsource = \"stdout\"", "must be"),
        ] {
            let e = parse(&format!("{head}[[count]]\n{bad}\n"), "t")
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{e}");
        }
        let twice = format!(
            "{head}[[count]]\nname = \"x\"\nregex = 'a'\n[[count]]\nname = \"x\"\nregex = 'b'\n"
        );
        assert!(
            parse(&twice, "t")
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn tus_resume_takes_a_bounded_number_of_cuts() {
        let head = "name = \"t\"\ndoc = \"d\"\nprofile = \"small\"\nprotocol = \"tus\"\n";
        let s = parse(&format!("{head}[[phase]]\nkind = \"tus_resume\"\n"), "t").unwrap();
        assert_eq!(s.phases, vec![Phase::TusResume { cuts: 20 }]);
        assert_eq!(s.phases[0].name(), "tus_resume");
        for bad in [0, MAX_TUS_CUTS + 1] {
            let e = parse(
                &format!("{head}[[phase]]\nkind = \"tus_resume\"\ncuts = {bad}\n"),
                "t",
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("tus_resume cuts"), "{e}");
        }
        let twice =
            format!("{head}[[phase]]\nkind = \"tus_resume\"\n[[phase]]\nkind = \"tus_resume\"\n");
        assert!(
            parse(&twice, "t")
                .unwrap_err()
                .to_string()
                .contains("one such step")
        );
        for name in ["import-tus-small", "import-tus"] {
            let s = builtin(name).unwrap();
            assert!(s.phases.contains(&Phase::TusResume { cuts: 20 }), "{name}");
        }
    }

    #[test]
    fn small_has_the_issue_phases() {
        let s = builtin("small").unwrap();
        let names: Vec<_> = s.phases.iter().map(|p| p.name()).collect();
        let mut want = contract::key::SYNC_PHASES.to_vec();
        want.push("route");
        assert_eq!(names, want);
        assert_eq!(s.seed, Some(0x5eed));
        assert_eq!(s.devices, 4);
    }

    #[test]
    fn couchdb_scenarios_name_their_protocol_and_routes() {
        for (name, profile) in [("small-couchdb", "small"), ("personal-couchdb", "personal")] {
            let s = builtin(name).unwrap();
            assert_eq!(s.protocol.name(), "couchdb", "{name}");
            assert_eq!(s.profile, profile);
            let Some(Phase::RouteLoad { routes, .. }) = s.phases.last() else {
                panic!("{name}: no route load last");
            };
            assert_eq!(
                routes,
                &[
                    "bulk-docs",
                    "changes",
                    "revs-diff",
                    "bulk-get",
                    "all-docs-keys"
                ]
            );
        }
    }

    #[test]
    fn webdav_scenarios_name_their_protocol_and_routes() {
        for (name, profile) in [("small-webdav", "small"), ("personal-webdav", "personal")] {
            let s = builtin(name).unwrap();
            assert_eq!(s.protocol.name(), "webdav", "{name}");
            assert_eq!(s.profile, profile);
            let w = s.webdav.clone().unwrap_or_default();
            assert_eq!((w.depth.as_str(), w.poll_ms), ("1", 100));
            let Some(Phase::RouteLoad {
                routes, in_flight, ..
            }) = s.phases.last()
            else {
                panic!("{name}: no route load last");
            };
            assert_eq!(routes, &["propfind-depth1", "put-file", "get-file", "move"]);
            assert_eq!(in_flight, &[1, 4]);
        }
        // Scenarios of the default protocol serialise as before: no protocol or webdav key.
        let json = serde_json::to_string(&builtin("small").unwrap()).unwrap();
        assert!(
            !json.contains("protocol") && !json.contains("webdav"),
            "{json}"
        );
        let e = parse(
            "name='x'\ndoc='d'\nprofile='small'\nprotocol='webdav'\n[webdav]\ndepth='2'\n[[phase]]\nkind='cold_start'\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("depth"), "{e}");
    }

    #[test]
    fn route_load_is_bounded_by_requests_or_by_time() {
        let step = |body: &str| {
            parse(
                &format!(
                    "name='x'\ndoc='d'\nprofile='small'\n[[phase]]\nkind='route_load'\nroutes=['changes']\nin_flight=[1]\n{body}"
                ),
                "f.toml",
            )
        };
        let s = step("requests = 2000\n").unwrap();
        assert_eq!(s.phases[0].route_bound(), Some(RouteBound::Requests(2000)));
        let s = step("seconds = 1.5\nmax_requests = 10\n").unwrap();
        assert_eq!(
            s.phases[0].route_bound(),
            Some(RouteBound::Time {
                seconds: 1.5,
                max_requests: 10
            })
        );
        for (body, says) in [
            ("requests = 5\nseconds = 1.0\n", "not both"),
            ("requests = 5\nmax_requests = 9\n", "not both"),
            ("requests = 0\n", "requests 0"),
            ("seconds = 1.0\n", "needs requests"),
            ("", "needs requests"),
            ("seconds = 0.0\nmax_requests = 1\n", "seconds 0"),
            ("seconds = 1.0\nmax_requests = 0\n", "max_requests"),
        ] {
            let e = step(body).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("f.toml"), "{body}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // A fixed-work step serialises without the time fields, a timed one as before.
        let json = serde_json::to_string(&step("requests = 7\n").unwrap().phases[0]).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"route_load","routes":["changes"],"in_flight":[1],"requests":7}"#
        );
        assert_eq!(
            builtin("small")
                .unwrap()
                .phases
                .last()
                .unwrap()
                .route_bound(),
            Some(RouteBound::Requests(500))
        );
    }

    #[test]
    fn long_polling_steps_parse_with_defaults_and_are_bounded() {
        let s = builtin("fanout-small").unwrap();
        assert_eq!(
            s.phases,
            [
                Phase::LongPollFanout {
                    waiters: 200,
                    pushers: 2,
                    posts: 5,
                    interval_ms: 200,
                    wait_s: 30,
                    settle_ms: 1000,
                },
                Phase::ConcurrentPush {
                    pushers: vec![1, 4, 16],
                    waiters: 20,
                    files: Some(48),
                    wait_s: 30,
                    settle_ms: 500,
                },
            ]
        );
        assert!(s.phases.iter().all(Phase::is_fanout));
        assert_eq!(push_level_scope(16), "push_d16");
        let step = |body: &str| {
            parse(
                &format!("name='x'\ndoc='d'\nprofile='small'\n[[phase]]\n{body}"),
                "f.toml",
            )
        };
        let s = step("kind='long_poll_fanout'\nwaiters=3\n").unwrap();
        assert_eq!(
            s.phases[0],
            Phase::LongPollFanout {
                waiters: 3,
                pushers: 1,
                posts: 5,
                interval_ms: 200,
                wait_s: 30,
                settle_ms: 1000
            }
        );
        let back = parse(&toml::to_string(&s).unwrap(), "w").unwrap();
        assert_eq!(back, s);
        for (body, says) in [
            ("kind='long_poll_fanout'\n", "missing field `waiters`"),
            (
                "kind='long_poll_fanout'\nwaiters=100001\n",
                "waiters 100001",
            ),
            (
                "kind='long_poll_fanout'\nwaiters=5\npushers=0\n",
                "pushers 0",
            ),
            ("kind='long_poll_fanout'\nwaiters=5\nposts=0\n", "posts 0"),
            (
                "kind='long_poll_fanout'\nwaiters=5\nwait_s=56\n",
                "wait_s 56",
            ),
            ("kind='long_poll_fanout'\nwaiters=5\nwait_s=0\n", "wait_s 0"),
            ("kind='long_poll_fanout'\nwaiters=5\nbogus=1\n", "bogus"),
            (
                "kind='concurrent_push'\npushers=[]\n",
                "at least one pushers level",
            ),
            ("kind='concurrent_push'\npushers=[1,4,1]\n", "twice"),
            ("kind='concurrent_push'\npushers=[1001]\n", "pushers 1001"),
            (
                "kind='concurrent_push'\npushers=[2]\nfiles=0\n",
                "files must be",
            ),
            (
                "kind='concurrent_push'\npushers=[2]\n[[phase]]\nkind='concurrent_push'\npushers=[4]\n",
                "one such step",
            ),
        ] {
            let e = step(body).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("f.toml"), "{body}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn assets_differs_from_small_only_in_profile() {
        let (mut a, s) = (builtin("assets").unwrap(), builtin("small").unwrap());
        assert_eq!(a.profile, "assets");
        a.profile = s.profile.clone();
        a.name = s.name.clone();
        a.doc = s.doc.clone();
        assert_eq!(a, s);
    }

    #[test]
    fn s3_encryption_is_the_plugins_openssl_format_or_an_error() {
        let s3 = |table: &str| {
            parse(
                &format!(
                    "name='x'\ndoc='d'\nprofile='small'\nprotocol='s3'\n[s3]\n{table}\n[[phase]]\nkind='cold_start'\n"
                ),
                "f.toml",
            )
        };
        let s = s3("encryption='openssl-base64'\npassword='pw'").unwrap();
        let o = s.s3.unwrap();
        assert_eq!(o.encryption.as_deref(), Some("openssl-base64"));
        assert_eq!(o.password.as_deref(), Some("pw"));
        let e = s3("encryption='rclone-base64'").unwrap_err().to_string();
        assert!(e.contains("f.toml") && e.contains("not reproduced"), "{e}");
        let e = s3("encryption='rot13'").unwrap_err().to_string();
        assert!(e.contains("openssl-base64"), "{e}");
        let e = s3("password='pw'").unwrap_err().to_string();
        assert!(e.contains("no encryption"), "{e}");
        // An unencrypted scenario serialises as before.
        let plain = builtin("small-s3").unwrap();
        let json = serde_json::to_string(&plain).unwrap();
        assert!(
            !json.contains("encryption") && !json.contains("password"),
            "{json}"
        );
    }

    #[test]
    fn unknown_keys_and_names_are_errors() {
        let e = parse(
            "name='x'\ndoc='d'\nprofile='small'\nbogus=1\n[[phase]]\nkind='cold_start'\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("f.toml") && e.to_string().contains("bogus"),
            "{e}"
        );
        let e = builtin("nope").unwrap_err();
        assert!(e.to_string().contains("small"), "{e}");
        let e = parse(
            "name='x'\ndoc='d'\nprofile='small'\n[[phase]]\nkind='cold_pull'\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("cold_push"), "{e}");
    }

    #[test]
    fn profile_file_is_relative_to_the_scenario_and_exclusive_with_profile() {
        let body = "doc='d'\n[[phase]]\nkind='cold_start'\n";
        let s = parse(
            &format!("name='x'\nprofile_file='shape.toml'\n{body}"),
            "f.toml",
        )
        .unwrap();
        assert_eq!(
            s.profile_file_in(std::path::Path::new("/a/b/x.toml")),
            Some(std::path::PathBuf::from("/a/b/shape.toml"))
        );
        let back = parse(&toml::to_string(&s).unwrap(), "w").unwrap();
        assert_eq!(back, s);
        for (head, says) in [
            ("profile='small'\nprofile_file='s.toml'\n", "exclusive"),
            ("", "needs a profile"),
            ("profile_file=''\n", "profile_file is empty"),
        ] {
            let e = parse(&format!("name='x'\n{head}{body}"), "f.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains("f.toml") && e.contains(says), "{e}");
        }
        assert_eq!(
            builtin("small")
                .unwrap()
                .profile_file_in(std::path::Path::new("x")),
            None
        );
    }

    #[test]
    fn names_must_be_plain_file_names() {
        for bad in [
            "../escaped/pwned",
            "/abs",
            "",
            "..",
            ".hidden",
            "a/b",
            "a\0b",
            "a b",
            "é",
        ] {
            // A TOML basic string: NUL as `\u0000` (TOML has no `\0`).
            let quoted = format!("\"{}\"", bad.replace('\0', "\\u0000"));
            let text =
                format!("name={quoted}\ndoc='d'\nprofile='small'\n[[phase]]\nkind='cold_start'\n");
            let e = parse(&text, "x.toml").expect_err(bad).to_string();
            assert!(
                e.contains("x.toml") && e.contains(&format!("{bad:?}")),
                "{e}"
            );
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert!(check_file_name(&long).is_err());
        for good in [
            "small",
            "small-webdav",
            "push_only.v2",
            &"a".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(check_file_name(good), Ok(()), "{good}");
        }
    }
}

//! Preparing a run before any sample: the scenario, the cached vault on disk, the work dir,
//! the gate thresholds, the calibration reference and the machine fingerprint.

pub mod git;
pub mod stale;
pub mod user_vault;
pub mod vault;

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::time::Duration;

use scenarios::scenario::{Protocol, Scenario};

use crate::sample::plan::SamplePlan;
use crate::sample::protocols::{self, ProtocolImpl, Support};
use crate::sample::target::{TargetOpts, TargetSpec};

/// Options shared by `record` and `ab`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunOpts {
    /// A scenario TOML file instead of a built-in.
    #[arg(help_heading = "Scenario", long, value_name = "FILE")]
    pub scenario_file: Option<PathBuf>,
    /// Vault seed (decimal or 0x hex); the scenario's seed when absent.
    #[arg(help_heading = "Scenario", long, value_parser = contract::parse::seed)]
    pub seed: Option<u64>,
    /// Your own vault: this directory (read, never written) replaces the scenario profile's
    /// generated vault. The recording keeps its manifest digest, file count and bytes, never
    /// its names or content; what the protocol cannot carry is listed once and skipped.
    #[arg(help_heading = "Scenario", long, value_name = "DIR")]
    pub vault: Option<PathBuf>,
    /// Gate thresholds file (TOML); the built-in defaults when absent.
    #[arg(help_heading = "Gate", long, value_name = "FILE")]
    pub gate_config: Option<PathBuf>,
    /// Calibration reference file (default under the user's data dir).
    #[arg(help_heading = "Gate", long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Fail at once (exit 5) instead of waiting when another recording holds the machine lock.
    #[arg(help_heading = "Machine", long)]
    pub no_wait: bool,
    /// Where generated vaults and `git:REV` builds are cached (default: $VAULTBENCH_CACHE,
    /// else $XDG_CACHE_HOME/vaultbench, else ~/.cache/vaultbench).
    #[arg(help_heading = "Machine", long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where servers' data dirs live during samples; the io channel measures this filesystem.
    #[arg(help_heading = "Machine", long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Upper bound on one sample's run time: `30m`, `90s` (a bare number of seconds is
    /// deprecated).
    #[arg(help_heading = "Bounds", long, value_name = "DURATION", default_value = "30m", value_parser = contract::parse::seconds_or_duration)]
    pub sample_timeout: contract::parse::SecondsOrDuration,
    /// Watch the machine this long before the first sample and refuse at once (exit 3) when
    /// something outside vaultbench already uses more CPU or storage than the gate's foreign
    /// bounds allow, or steal is above its bound; `0s` skips the look. The in-sample channels
    /// still judge every sample.
    #[arg(help_heading = "Gate", long, value_name = "DURATION", default_value = "2s", value_parser = contract::parse::duration_or_zero)]
    pub pre_check: Duration,
    /// When the pre-check finds the machine busy, keep watching it (one look after another)
    /// and start once it is quiet; refuse (exit 3) if it is still busy after this long, e.g.
    /// `5m`. Without it a busy machine is refused at once.
    #[arg(help_heading = "Gate", long, value_name = "DURATION", value_parser = contract::parse::duration)]
    pub wait_quiet: Option<Duration>,
    /// Do not pin (the default already: pinning is off unless `--pin`). Hidden: accepted so
    /// that old scripts keep working, and does nothing.
    #[arg(help_heading = "Machine", long, conflicts_with = "pin", hide = true)]
    pub no_pin: bool,
    /// Pin the server's process tree and the generator to disjoint CPU sets, on a machine with
    /// at least 2 CPUs (the sets are in the sidecar).
    #[arg(help_heading = "Machine", long)]
    pub pin: bool,
    /// Also run a cost sample per build (per arm and round in `ab`): the scenario under
    /// Valgrind's callgrind (instructions per phase, class cost) and under strace (syscalls by
    /// name per phase); needs the Debian packages valgrind and strace.
    #[arg(help_heading = "Cost channel", long)]
    pub cost: bool,
    /// With `--cost`: keep each cost sample's raw profiles (`callgrind.out.<pid>`,
    /// `strace.log`) in DIR, one folder per cost sample (`cost-<index>`); the recording keeps
    /// only the top functions of each phase.
    #[arg(
        help_heading = "Cost channel",
        long,
        value_name = "DIR",
        requires = "cost"
    )]
    pub keep_profiles: Option<PathBuf>,
    /// The protocol the run speaks, one of the registered protocols (listed below; `vaultbench
    /// scenarios` groups the built-in scenarios by them). The scenario's `protocol =` selects
    /// it; the flag asserts it: a scenario, a target or a flag that disagree fail before any
    /// sample (exit 2), naming both.
    #[arg(help_heading = "Target", long, value_name = "NAME", value_parser = protocol_value_parser())]
    pub protocol: Option<Protocol>,
    /// The path a command-line target serves the vault under (default `/`): a WebDAV
    /// collection, an S3 bucket (`/NAME/`), a CouchDB database (`/NAME/`), a tus server's
    /// collection URL, where uploads are created (`--tus-path`, default `/files/`).
    /// `--webdav-root` is its former spelling.
    #[arg(
        help_heading = "Target",
        long,
        value_name = "PATH",
        alias = "webdav-root",
        visible_alias = "tus-path"
    )]
    pub root: Option<String>,
    /// HTTP Basic credentials a command-line target demands, as USER:PASS (default: none;
    /// the presets have their own).
    #[arg(help_heading = "Target", long, value_name = "USER:PASS")]
    pub auth: Option<String>,
    /// A file whose first line is USER:PASS, for --auth (keeps the password out of the
    /// process list).
    #[arg(
        help_heading = "Target",
        long,
        value_name = "FILE",
        conflicts_with = "auth"
    )]
    pub auth_file: Option<PathBuf>,
    /// How to tell a started target is ready: `tcp` (a connect succeeds) or
    /// `METHOD PATH STATUS` (`GET /readyz 200`, `OPTIONS / 2xx`).
    #[arg(help_heading = "Target", long, value_name = "CHECK", long_help = ready_help())]
    pub ready: Option<String>,
    /// WebDAV: most PROPFIND requests one walk of the vault may make (default 16384).
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub webdav_max_requests: Option<u64>,
    /// WebDAV: most entries (files and folders) one walk may keep (default 250000).
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub webdav_max_entries: Option<u64>,
    /// WebDAV: most folder levels below the root a listed path may have (default 32).
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub webdav_max_depth: Option<u64>,
    /// WebDAV: longest listed vault path, in bytes (default 4096).
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub webdav_max_path_bytes: Option<u64>,
    /// Most entries one walk of the changes feed (a pull's, a resync's) may list.
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
        long_help = feed_help("Most entries one walk of the changes feed (a pull's, a resync's) may list", |b| b.max_entries))]
    pub feed_max_entries: Option<u64>,
    /// Most pages one walk of the changes feed may ask for.
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
        long_help = feed_help("Most pages one walk of the changes feed may ask for", |b| b.max_pages))]
    pub feed_max_pages: Option<u64>,
    /// CouchDB: most bytes of documents a pull (and each later replication pass) may hold at
    /// once: chunks until their file is written, files waiting for chunks, what is kept of
    /// each file (default 64 MiB). Also caps each answer at what is left of it.
    #[arg(help_heading = "Bounds", long, value_name = "BYTES", value_parser = parse_bytes)]
    pub feed_max_bytes: Option<u64>,
    /// Upper bound on each phase of a sample (a cold push, a cold pull, a resync, …), named
    /// in the error when a phase passes it: `1h`, `90s` (default 1h, sized from `vault100k`).
    #[arg(help_heading = "Bounds", long, value_name = "DURATION", default_value = "1h", value_parser = contract::parse::duration)]
    pub phase_timeout: Duration,
    /// Count the target's log lines that match REGEX in each phase, as `PHASE.log.NAME` (and
    /// per file, per request): NAME=REGEX, repeatable; added to the scenario's `[[count]]`.
    /// Lines are read from the target's stdout and stderr as they come.
    #[arg(
        help_heading = "Server's own numbers",
        long = "count",
        value_name = "NAME=REGEX"
    )]
    pub count: Vec<String>,
    /// Sum the named capture `value` of the target's log lines that match, per phase:
    /// NAME=REGEX with `(?P<value>...)`, e.g. `sql_ms=duration=(?P<value>[0-9.]+)ms`.
    #[arg(
        help_heading = "Server's own numbers",
        long = "sum",
        value_name = "NAME=REGEX"
    )]
    pub sum: Vec<String>,
    /// Your own sync client as the devices (client mode): the command device A runs to
    /// upload and device B to download, with `{url}`, `{dir}` (the device's folder),
    /// `{device}` (0 or 1), `{state}` (a folder for the client's own state, also its working
    /// directory), `{shared}` (a folder both devices see), `{data}` (the server's data dir),
    /// `{auth_user}` and `{auth_pass}` filled in. Sets the scenario's `[client] command`.
    #[arg(help_heading = "Client", long, value_name = "CMD")]
    pub client: Option<String>,
    /// Client mode: the upload command of a one-way tool (`[client] push`).
    #[arg(help_heading = "Client", long, value_name = "CMD")]
    pub client_push: Option<String>,
    /// Client mode: the download command of a one-way tool (`[client] pull`); without one
    /// (and without --client) the phases that need B to download are skipped, and named.
    #[arg(help_heading = "Client", long, value_name = "CMD")]
    pub client_pull: Option<String>,
    /// Client mode: run once per device before anything is timed (`[client] setup`).
    #[arg(help_heading = "Client", long, value_name = "CMD")]
    pub client_setup: Option<String>,
    /// Client mode: the client's start-up alone, e.g. `rclone version`, timed once per phase
    /// to give each phase's start-up share (`[client] startup`).
    #[arg(help_heading = "Client", long, value_name = "CMD")]
    pub client_startup: Option<String>,
    /// Client mode: the deadline of each client run (`[client] timeout`, default 10m).
    #[arg(help_heading = "Client", long, value_name = "DURATION", value_parser = duration_text)]
    pub client_timeout: Option<String>,
    /// Client mode: connect the client straight to the server, without the recording proxy
    /// (`[client] proxy = false`); no `PHASE.proxy.*` keys are written.
    #[arg(help_heading = "Client", long)]
    pub no_proxy: bool,
    /// Client mode: name a route of the proxy's counts, NAME='METHOD REGEX' (the regex over
    /// the path without its query, method `*` for any), repeatable; tried before the route
    /// templates (`[client] route_patterns`).
    #[arg(help_heading = "Client", long, value_name = "NAME='METHOD REGEX'")]
    pub route_pattern: Vec<String>,
    /// Client mode: run the push command once per checkpoint slice of the cold push (the
    /// next `checkpoint_every` files copied into A's folder before each run), so the server's
    /// costs are fitted against n (`[client] checkpoints = true`). For a client that uploads
    /// only what the server lacks.
    #[arg(help_heading = "Client", long)]
    pub client_checkpoints: bool,
    #[command(flatten, next_help_heading = "Git builds")]
    pub git: git::GitArgs,
}

/// A duration flag kept as the text given (checked by the one duration parser), for a
/// scenario field that holds its text.
fn duration_text(s: &str) -> Result<String, String> {
    contract::parse::duration(s).map(|_| s.trim().to_owned())
}

impl RunOpts {
    /// The `--client*` flags into the scenario's `[client]` table (a flag replaces the
    /// table's field), then the client-mode checks: the table's own, each command line
    /// splits, and the scenario asks only what a client can run. Called right after the
    /// scenario is loaded, so a mistake is one line before any lock or sample.
    pub fn client_into(&self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let flags = [
            &self.client,
            &self.client_push,
            &self.client_pull,
            &self.client_setup,
            &self.client_startup,
            &self.client_timeout,
        ];
        if flags.iter().any(|f| f.is_some()) {
            if scenario.client.is_none() {
                // A scenario written for a built-in protocol, driven by the flags' client:
                // the phases only the harness's own client can run are left out, and named.
                crate::sample::client::keep_client_phases(scenario);
            }
            let c = scenario.client.get_or_insert_with(Default::default);
            let set = |field: &mut Option<String>, flag: &Option<String>| {
                if let Some(v) = flag {
                    *field = Some(v.clone());
                }
            };
            set(&mut c.command, &self.client);
            set(&mut c.push, &self.client_push);
            set(&mut c.pull, &self.client_pull);
            set(&mut c.setup, &self.client_setup);
            set(&mut c.startup, &self.client_startup);
            set(&mut c.timeout, &self.client_timeout);
        }
        if self.no_proxy || self.client_checkpoints || !self.route_pattern.is_empty() {
            let Some(c) = scenario.client.as_mut() else {
                anyhow::bail!(
                    "{} is for client mode: give --client (or --client-push) or a scenario with a [client] table",
                    if self.no_proxy {
                        "--no-proxy"
                    } else if self.client_checkpoints {
                        "--client-checkpoints"
                    } else {
                        "--route-pattern"
                    }
                );
            };
            if self.no_proxy {
                c.proxy = Some(false);
            }
            if self.client_checkpoints {
                c.checkpoints = Some(true);
            }
            c.route_patterns.extend(self.route_pattern.iter().cloned());
        }
        crate::sample::client::check_scenario(scenario)
    }
}

/// A byte count on the command line: a number, with an optional `KiB`, `MiB` or `GiB`
/// (`64MiB`, `67108864`), at least 1.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (a number, with KiB, MiB or GiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "k" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        u => return Err(format!("{s:?}: unknown unit {u:?} (use KiB, MiB or GiB)")),
    };
    match n.checked_mul(mult) {
        Some(0) => Err(format!("{s:?}: must be at least 1 byte")),
        Some(v) => Ok(v),
        None => Err(format!("{s:?}: too large")),
    }
}

/// The credentials in `path` (`--auth-file`): USER:PASS on its first line.
pub fn auth_from_file(path: &Path) -> anyhow::Result<loadgen::http::BasicAuth> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--auth-file {}", path.display()))?;
    let line = text.lines().next().unwrap_or("");
    loadgen::launch::parse_auth(line)
        .map_err(|e| anyhow::anyhow!("--auth-file {}: {e}", path.display()))
}

/// `--protocol` values: the registry's names and aliases, each read as its canonical name.
pub fn protocol_value_parser() -> impl clap::builder::TypedValueParser<Value = Protocol> {
    use clap::builder::TypedValueParser as _;
    let mut values: Vec<clap::builder::PossibleValue> = Vec::new();
    for imp in protocols::REGISTRY {
        let spec = imp.spec();
        values.push(
            clap::builder::PossibleValue::new(spec.name)
                .help(spec.about)
                .aliases(spec.aliases.iter().copied()),
        );
    }
    clap::builder::PossibleValuesParser::new(values).map(|s| {
        protocols::lookup(&s).map_or_else(
            |_| Protocol::named("?"),
            |imp| Protocol::named(imp.spec().name),
        )
    })
}

/// The protocol a target says it speaks (a preset, a target file, `ref`, or a command line
/// given `--protocol`), resolved in the registry; `None`: a command line that speaks the
/// scenario's.
pub fn target_protocol(t: &TargetSpec) -> anyhow::Result<Option<&'static dyn ProtocolImpl>> {
    match &t.def.protocol {
        None => Ok(None),
        Some(p) => protocols::resolve(p)
            .map(|(imp, _)| Some(imp))
            .map_err(|e| anyhow::anyhow!("target {}: {e}", t.given)),
    }
}

/// The presets that speak `name`, for hints.
fn presets_of(name: &str) -> Vec<&'static str> {
    protocols::lookup(name)
        .map(|imp| imp.spec().presets.iter().map(|p| p.name).collect())
        .unwrap_or_default()
}

/// The built-in scenarios that speak `name`, for hints.
fn scenarios_of(name: &str) -> Vec<&'static str> {
    scenarios::scenario::builtin_names()
        .into_iter()
        .filter(|n| {
            scenarios::scenario::builtin(n).is_ok_and(|s| {
                protocols::lookup(s.protocol.name()).is_ok_and(|imp| imp.spec().name == name)
            })
        })
        .collect()
}

impl RunOpts {
    /// The machine lock taken now when `early` (a `git:REV` target is built under it, before
    /// any sample), waiting for another recording unless `--no-wait`; `None` otherwise.
    pub fn lock_now_if(&self, early: bool) -> anyhow::Result<Option<calibration::MachineLock>> {
        Ok(if early {
            Some(calibration::MachineLock::acquire(None, !self.no_wait)?)
        } else {
            None
        })
    }
}

impl RunOpts {
    /// Notes for the deprecated spellings among these flags.
    pub fn deprecations(&self) -> Vec<String> {
        self.sample_timeout
            .deprecation("--sample-timeout")
            .into_iter()
            .collect()
    }

    /// The target options these flags give (`--protocol`, `--root`, `--auth` or
    /// `--auth-file`, `--ready`), checked.
    pub fn target_opts(&self) -> anyhow::Result<TargetOpts> {
        Ok(TargetOpts {
            protocol: self.protocol.clone(),
            root: self
                .root
                .as_deref()
                .map(loadgen::launch::normalize_root)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--root: {e}"))?,
            auth: match (&self.auth, &self.auth_file) {
                (Some(s), _) => Some(
                    loadgen::launch::parse_auth(s).map_err(|e| anyhow::anyhow!("--auth: {e}"))?,
                ),
                (None, Some(p)) => Some(auth_from_file(p)?),
                (None, None) => None,
            },
            ready: self
                .ready
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e: loadgen::launch::LaunchError| anyhow::anyhow!("--ready: {e}"))?,
            walk: self.walk_bounds(),
        })
    }

    /// The WebDAV walk bounds the `--webdav-max-*` flags give; `None` when none is given.
    fn walk_bounds(&self) -> Option<loadgen::protocols::webdav::WalkBounds> {
        let d = loadgen::protocols::webdav::WalkBounds::DEFAULT;
        let given = [
            self.webdav_max_requests,
            self.webdav_max_entries,
            self.webdav_max_depth,
            self.webdav_max_path_bytes,
        ];
        given
            .iter()
            .any(Option::is_some)
            .then(|| loadgen::protocols::webdav::WalkBounds {
                max_requests: self.webdav_max_requests.unwrap_or(d.max_requests),
                max_entries: self.webdav_max_entries.unwrap_or(d.max_entries),
                max_depth: self.webdav_max_depth.unwrap_or(d.max_depth),
                max_path_bytes: self.webdav_max_path_bytes.unwrap_or(d.max_path_bytes),
            })
    }

    /// The changes feed walk bounds the `--feed-max-*` flags set; `None` when none is given
    /// (the protocol's defaults apply).
    pub fn feed_bounds(&self) -> Option<loadgen::FeedOverrides> {
        (self.feed_max_entries.is_some()
            || self.feed_max_pages.is_some()
            || self.feed_max_bytes.is_some())
        .then_some(loadgen::FeedOverrides {
            max_entries: self.feed_max_entries,
            max_pages: self.feed_max_pages,
            max_bytes: self.feed_max_bytes,
        })
    }

    /// Gives `spec` the feed bounds the `--feed-max-*` flags set (its own when none is given).
    pub fn bound_feed(&self, spec: &mut TargetSpec) {
        if let Some(b) = self.feed_bounds() {
            spec.def.feed = Some(b);
        }
    }
}

/// Checks, before anything is prepared, that `--protocol` (when given), the scenario and every
/// target (`(flag, given)` pairs such as `("--target", "ref")`) speak one protocol, each name
/// resolved in the registry (an unknown one is refused, naming the known ones); the error
/// names both sides and what to choose instead. Settles each target's protocol (and so its
/// readiness default) to the scenario's.
pub fn check_protocol(
    scenario: &Scenario,
    flag: Option<&Protocol>,
    targets: &mut [(&str, &mut TargetSpec)],
) -> anyhow::Result<()> {
    let (imp, want) = protocols::resolve(&scenario.protocol)
        .map_err(|e| anyhow::anyhow!("scenario {}: {e}", scenario.name))?;
    if let Some(f) = flag {
        let (_, f) = protocols::resolve(f).map_err(|e| anyhow::anyhow!("--protocol: {e}"))?;
        if f != want {
            bail!(
                "--protocol {f} disagrees with scenario {}, which speaks {want}",
                scenario.name
            );
        }
    }
    for (flag, t) in targets.iter_mut() {
        if let Some(has) = target_protocol(t)?
            && has.spec().name != want.name()
        {
            let has = has.spec().name;
            let mut choices: Vec<String> = presets_of(want.name())
                .into_iter()
                .map(String::from)
                .collect();
            if want.is_default() {
                // The embedded reference server speaks the default protocol.
                choices.insert(0, "ref".into());
            }
            choices.push(format!("a command line with --protocol {want}"));
            let others = scenarios_of(has);
            bail!(
                "protocol mismatch: scenario {} speaks {want} but {flag} {} speaks {has}: choose a target that speaks {want} ({}) or a {has} scenario ({})",
                scenario.name,
                t.given,
                choices.join(", "),
                if others.is_empty() {
                    "a --scenario-file".to_owned()
                } else {
                    others.join(", ")
                }
            );
        }
        t.speak(imp.spec());
    }
    Ok(())
}

/// Loads the scenario named on the command line or from `--scenario-file`, and checks its
/// route loads name routes the load generator knows (a usage error here, not a failed sample).
pub fn load_scenario(name: Option<&str>, file: Option<&Path>) -> anyhow::Result<Scenario> {
    let s = read_scenario(name, file)?;
    let origin = file.map_or_else(
        || format!("built-in {}", s.name),
        |f| f.display().to_string(),
    );
    let mut s = s;
    protocols::check_scenario(&mut s, &origin)?;
    let known: Vec<&str> = (protocols::lookup(s.protocol.name())?.spec().routes)();
    let hop_routes = loadgen::faulthop::route_labels();
    if let Some(bad) = s
        .faults
        .iter()
        .find(|f| f.route != "*" && !hop_routes.contains(&f.route.as_str()))
    {
        bail!(
            "scenario {origin}: fault route {:?} is unknown (known: *, {})",
            bad.route,
            hop_routes.join(", ")
        );
    }
    for p in &s.phases {
        if let scenarios::scenario::Phase::RouteLoad { routes, .. } = p
            && let Some(bad) = routes.iter().find(|r| !known.contains(&r.as_str()))
        {
            bail!(
                "scenario {origin}: route_load route {bad:?} is unknown for protocol {} (known: {})",
                s.protocol.name(),
                known.join(", ")
            );
        }
    }
    Ok(s)
}

fn read_scenario(name: Option<&str>, file: Option<&Path>) -> anyhow::Result<Scenario> {
    match (name, file) {
        (named, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("scenario file {}", f.display()))?;
            let mut s = scenarios::scenario::parse(&text, &f.display().to_string())?;
            // A `profile_file` is read beside the scenario file: resolved here, where the
            // file is known, so `prepare` reads it from wherever the run started.
            if let Some(p) = s.profile_file_in(f) {
                s.profile_file = Some(p.display().to_string());
            }
            // Both given: they must agree, or the recording would be filed under a name the
            // user did not ask for.
            if let Some(n) = named
                && n != s.name
            {
                bail!(
                    "scenario {n:?} was named but --scenario-file {} holds scenario {:?}: pass one or the other",
                    f.display(),
                    s.name
                );
            }
            Ok(s)
        }
        (Some(n), None) => match scenarios::scenario::builtin(n) {
            Err(scenarios::scenario::ScenarioError::Unknown { .. }) => {
                bail!("{}", crate::hint::unknown_scenario(n))
            }
            other => Ok(other?),
        },
        (None, None) => bail!("name a scenario or pass --scenario-file"),
    }
}

/// Everything a run of samples needs, resolved once.
pub struct Prepared {
    pub scenario: Scenario,
    pub seed: u64,
    pub vault_dir: PathBuf,
    pub vault_digest: String,
    /// `--vault DIR`: the user's vault as carried (then `vault_dir` is its copy in `work`).
    pub user_vault: Option<contract::schema::UserVault>,
    pub work: tempfile::TempDir,
    pub gate_cfg: calibration::GateConfig,
    pub reference: Option<calibration::Reference>,
    /// Where this machine's reference lives (or would), for the refusal message.
    pub reference_file: Option<PathBuf>,
    pub fingerprint: calibration::Fingerprint,
    pub timeout: Duration,
    /// `--phase-timeout`: the bound on each phase of a sample.
    pub phase_timeout: Duration,
    /// `--no-pin`.
    pub no_pin: bool,
    /// `--cost`: the tools found (a cost sample runs per build).
    pub cost: Option<crate::sample::cost::CostTools>,
    /// `--keep-profiles DIR` (absolute).
    pub keep_profiles: Option<PathBuf>,
    /// How long the loops wait before a sample's attempt `k` (k ≥ 2): `k - 1` times this
    /// ([`RETRY_PAUSE`]; zero in unit tests).
    pub retry_pause: Duration,
    /// `--pre-check`: how long the machine is watched before the first sample (zero: not).
    pub pre_check: Duration,
    /// `--wait-quiet`: how long a busy pre-check keeps watching for a quiet machine.
    pub wait_quiet: Option<Duration>,
}

/// The wait before a sample's second attempt (twice it before a third): on this project's 2-CPU
/// VM a kernel reading ran at half speed for 15 s or more now and then with nothing else
/// running, long enough to refuse three attempts made back to back.
pub const RETRY_PAUSE: Duration = Duration::from_secs(5);

impl Prepared {
    /// The profile the recording names: the scenario's, or `user-vault` for `--vault DIR`
    /// (whose shape is the user's, not a profile's).
    pub fn profile_name(&self) -> String {
        if self.user_vault.is_some() {
            "user-vault".to_owned()
        } else {
            self.scenario.profile.clone()
        }
    }

    /// Waits before attempt `attempt` of a sample (nothing before the first), returning early
    /// with [`crate::interrupt::Interrupted`] on Ctrl-C.
    pub fn pause_before(&self, attempt: u32) -> anyhow::Result<()> {
        let until = std::time::Instant::now() + self.retry_pause * attempt.saturating_sub(1);
        while std::time::Instant::now() < until {
            if crate::interrupt::requested() {
                return Err(crate::interrupt::Interrupted.into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// Whether samples pin the server and the generator to disjoint CPU sets when neither `--pin`
/// nor `--no-pin` is given. Off: on the 2-CPU VMs this was measured on, pinning made the route
/// keys less steady, not more (A/A CV of the route p50s over 10 interleaved runs each, 18.2 %
/// pinned against 13.7 % unpinned; server CPU per request 22.4 % against 17.2 %;
/// docs/src/decisions/pinning-off.md).
pub const PIN_BY_DEFAULT: bool = false;

impl RunOpts {
    /// Whether this run pins: `--pin`, `--no-pin`, else [`PIN_BY_DEFAULT`].
    pub fn pins(&self) -> bool {
        self.pin || (PIN_BY_DEFAULT && !self.no_pin)
    }
}

/// Resolves the scenario's profile and seed, the cached vault, a fresh work dir, the gate
/// thresholds, this machine's fingerprint and its calibration reference.
pub fn prepare(mut scenario: Scenario, opts: &RunOpts) -> anyhow::Result<Prepared> {
    crate::sample::logtap::merge(&mut scenario, &opts.count, &opts.sum)?;
    // Checked first: a missing tool is one line, before any vault is written.
    if opts.cost
        && let Support::No(why) = protocols::lookup(scenario.protocol.name())?.cost()
    {
        bail!("--cost does not run {} scenarios: {why}", scenario.protocol);
    }
    if !scenario.sizes.is_empty() && opts.vault.is_some() {
        bail!(
            "--vault does not run {}: its sizes take the first n notes of the scenario's generated vault",
            scenario.name
        );
    }
    let cost = if opts.cost {
        Some(crate::sample::cost::check_tools()?)
    } else {
        None
    };
    let profile = match &scenario.profile_file {
        // The synthetic twin of a measured shape (`vault measure`), resolved at load.
        Some(f) => vault::profile_from_file(Path::new(f))?,
        None => scenarios::profile(&scenario.profile)
            .with_context(|| format!("unknown profile {:?}", scenario.profile))?,
    };
    let seed = opts.seed.or(scenario.seed).unwrap_or(profile.default_seed);
    let gate_cfg =
        <calibration::GateConfig as calibration::GateFile>::load(opts.gate_config.as_deref())?;
    let cache = opts.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let work_parent = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&work_parent)
        .with_context(|| format!("work dir {}", work_parent.display()))?;
    for d in stale::sweep(&work_parent) {
        progress(&format!(
            "removed {}, left by a run that was killed",
            d.display()
        ));
    }
    let work = tempfile::Builder::new()
        .prefix("vaultbench-run-")
        .tempdir_in(&work_parent)
        .with_context(|| format!("creating a temp dir in {}", work_parent.display()))?;
    stale::claim(work.path())
        .with_context(|| format!("writing the owner of {}", work.path().display()))?;
    let (vault_dir, digest, user_vault) = match &opts.vault {
        Some(dir) => {
            let snap = user_vault::snapshot(dir, &work.path().join("user-vault"))?;
            user_vault::report_skipped(&snap.skipped);
            progress(&format!(
                "vault: {} ({} files, {} bytes, {} skipped; digest {})",
                dir.display(),
                snap.info.files,
                snap.info.bytes,
                snap.info.skipped,
                &snap.info.manifest_digest[..snap.info.manifest_digest.len().min(12)]
            ));
            if snap.info.files == 0 {
                bail!(
                    "--vault {} has no file the protocol can carry",
                    dir.display()
                );
            }
            let digest = snap.info.manifest_digest.clone();
            (snap.dir, digest, Some(snap.info))
        }
        None => {
            progress(&format!(
                "vault: {} seed {seed:#x} (cache {})",
                profile.name,
                cache.display()
            ));
            let (dir, summary) = vault::ensure_cached_vault(&profile, seed, &cache.join("vaults"))?;
            (dir, summary.digest, None)
        }
    };
    let fingerprint = calibration::fingerprint(work.path());
    let reference = calibration::load_reference(opts.reference.as_deref(), &fingerprint)?;
    Ok(Prepared {
        scenario,
        seed,
        vault_dir,
        vault_digest: digest,
        user_vault,
        work,
        gate_cfg,
        reference,
        reference_file: calibration::reference_path(opts.reference.as_deref()).ok(),
        fingerprint,
        timeout: opts.sample_timeout.duration,
        phase_timeout: opts.phase_timeout,
        no_pin: !opts.pins(),
        cost,
        keep_profiles: match &opts.keep_profiles {
            Some(d) => Some(
                std::path::absolute(d)
                    .with_context(|| format!("--keep-profiles {}", d.display()))?,
            ),
            None => None,
        },
        retry_pause: RETRY_PAUSE,
        pre_check: opts.pre_check,
        wait_quiet: opts.wait_quiet,
    })
}

impl RunOpts {
    /// Every check of these options that needs no run: `--vault` is a directory and
    /// `--gate-config` (or `$VAULTBENCH_GATE_CONFIG`) parses. Called before the machine lock
    /// and before anything is printed or written, so a typo costs no wait and leaves nothing.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(v) = &self.vault {
            match std::fs::metadata(v) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => bail!(
                    "--vault {}: not a directory (give the vault's folder)",
                    v.display()
                ),
                Err(e) => bail!("--vault {}: {e}", v.display()),
            }
        }
        <calibration::GateConfig as calibration::GateFile>::load(self.gate_config.as_deref())?;
        Ok(())
    }

    /// The cache directory: `--cache-dir`, else `$VAULTBENCH_CACHE`, `$XDG_CACHE_HOME/vaultbench`
    /// or `~/.cache/vaultbench` (vaults under `vaults/`, `git:` builds under `builds/`).
    pub fn cache(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }

    /// `target` resolved: a `git:REV` built (or found in the cache), anything else parsed.
    /// Called after the machine lock is taken, so a build never runs beside another run's
    /// samples.
    pub fn resolve_target(
        &self,
        target: &str,
        opts: &TargetOpts,
    ) -> anyhow::Result<(TargetSpec, Option<contract::schema::GitBuild>)> {
        let (mut spec, git) = git::resolve(target, &self.git, opts, &self.cache())?;
        self.bound_feed(&mut spec);
        Ok((spec, git))
    }
}

fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VAULTBENCH_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("vaultbench");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache").join("vaultbench"),
        None => std::env::temp_dir().join("vaultbench-cache"),
    }
}

impl Prepared {
    /// The plan of one sample of `target` in this run.
    pub fn plan(&self, target: &TargetSpec, index: u32, warmup: bool) -> SamplePlan {
        SamplePlan {
            scenario: self.scenario.clone(),
            seed: self.seed,
            target: target.clone(),
            vault_dir: self.vault_dir.clone(),
            vault_digest: self.vault_digest.clone(),
            work_dir: self.work.path().to_path_buf(),
            index,
            warmup,
            no_pin: self.no_pin,
            cost: false,
            paired_with: None,
            a_first: true,
            keep_profiles: None,
            phase_timeout: self.phase_timeout,
        }
    }

    /// A paired sample's plan (`ab --paired`): A and B up at once in one sample process.
    pub fn paired_plan(
        &self,
        a: &TargetSpec,
        b: &TargetSpec,
        index: u32,
        warmup: bool,
        a_first: bool,
    ) -> SamplePlan {
        SamplePlan {
            paired_with: Some(b.clone()),
            a_first,
            ..self.plan(a, index, warmup)
        }
    }

    /// The cost sample's plan (`--cost`): the scenario under callgrind and under strace, side by side.
    pub fn cost_plan(&self, target: &TargetSpec, index: u32) -> SamplePlan {
        SamplePlan {
            cost: true,
            keep_profiles: self.keep_profiles.clone(),
            ..self.plan(target, index, false)
        }
    }
}

/// A progress line on stderr (progress bars only on a TTY; plain lines otherwise).
pub fn progress(msg: &str) {
    eprintln!("{msg}");
}

/// `--ready`'s long help: the syntax, then each protocol's default check (from its spec).
fn ready_help() -> String {
    let mut out = String::from(
        "How to tell a started target is ready: `tcp` (a connect succeeds) or `METHOD PATH STATUS` \
         (`GET /readyz 200`, `OPTIONS / 2xx`). Default, by protocol:",
    );
    if let Ok(def) = loadgen::launch::TargetDef::command(vec!["server".into()], "server") {
        for spec in loadgen::protocols::SPECS {
            out.push_str(&format!("\n  {}: {}", spec.name, spec.ready_of(&def)));
        }
    }
    out
}

/// A feed bound's long help: `what`, then each protocol's default (from its spec).
fn feed_help(what: &str, bound: fn(&loadgen::FeedBounds) -> u64) -> String {
    let mut out = format!("{what}. Default, by protocol:");
    for spec in loadgen::protocols::SPECS {
        if let Some(b) = &spec.feed {
            out.push_str(&format!("\n  {}: {}", spec.name, bound(b)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_file_gives_the_credentials_of_its_first_line_as_auth_does() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("auth");
        std::fs::write(&f, "bench user:s3cret pass\nignored\n").unwrap();
        assert_eq!(
            auth_from_file(&f).unwrap(),
            loadgen::launch::parse_auth("bench user:s3cret pass").unwrap()
        );
        std::fs::write(&f, "no colon\n").unwrap();
        let e = format!("{:#}", auth_from_file(&f).unwrap_err());
        assert!(
            e.starts_with("--auth-file ") && e.contains("USER:PASS"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            auth_from_file(&dir.path().join("none")).unwrap_err()
        );
        assert!(e.starts_with("--auth-file ") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_protocol_mismatch_names_both_sides() {
        const DEFAULT: &str = contract::protocol::DEFAULT_NAME;
        let small = scenarios::scenario::builtin("small").unwrap();
        let dav = scenarios::scenario::builtin("small-webdav").unwrap();
        let mut r = TargetSpec::parse("ref").unwrap();
        let mut nginx = TargetSpec::parse("nginx-webdav").unwrap();
        let webdav = Protocol::named("webdav");
        check_protocol(&small, None, &mut [("--target", &mut r.clone())]).unwrap();
        check_protocol(&dav, Some(&webdav), &mut [("--a", &mut nginx.clone())]).unwrap();
        let e = check_protocol(&small, None, &mut [("--target", &mut nginx)]).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains(&format!("scenario small speaks {DEFAULT}"))
                && e.contains("--target nginx-webdav speaks webdav")
                && e.contains("or a webdav scenario (small-webdav"),
            "{e}"
        );
        let e = check_protocol(&dav, None, &mut [("--a", &mut nginx), ("--b", &mut r)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("--b ref speaks {DEFAULT}"))
                && e.contains("choose a target that speaks webdav (apache-webdav"),
            "{e}"
        );
        let e = check_protocol(&small, Some(&webdav), &mut [("--target", &mut r)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("--protocol webdav disagrees with scenario small, which speaks {DEFAULT}")
        );
        let e = check_protocol(&small, Some(&Protocol::named("ftp")), &mut [])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown protocol \"ftp\"") && e.contains("couchdb"),
            "{e}"
        );
    }
}

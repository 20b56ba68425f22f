//! Client mode: the user's own sync client as the devices. [`CommandClient`] implements the
//! phase seam (`sync_client::SyncClient`) by running the scenario's `[client]` command lines
//! for device A and device B, so the one phase flow (`phases::drive`) runs through it: cold
//! push (A's folder holds the vault, A's client runs), cold pull (B's folder starts empty, B's
//! client runs, the driver checks B's tree against the vault digest), idle resync (A's client
//! again, nothing changed), edit propagation (A's note edited, A's client, then B's, B's copy
//! checked each round) and folder rename (on A, A's client, B's client, then the driver's
//! check). The server, its readiness and its credentials still come from the target and the
//! scenario's protocol.
//!
//! Each client run ([`run`]) is timed apart from the server: per phase its runs, wall time,
//! CPU and peak RSS (`PHASE.client.*`), and where a start-up command is given, its cost and
//! its share of the phase. The client cannot say what it sent: unless the table turns it off,
//! its `{url}` is the recording proxy's (`loadgen::proxy`), which counts every request per
//! route template (`PHASE.proxy.*`, `proxy_keys`). The vault's file and folder names are
//! the template's `{path}`. Every connection through the proxy is closed when a run ends, so
//! nothing of a run goes on into the next.
//!
//! The devices' folders live side by side in one folder of the sample: `a/`, `b/` (the
//! devices' vault copies), `a.state/`, `b.state/` (their `{state}`, each run's working
//! directory) and `shared/` (`{shared}`, one folder both devices' clients see, for a client
//! whose second device is enrolled through its first, as obsync's is). `{data}` is the
//! server's data dir, for a client that reads what the server writes there (the reference
//! server's setup token). After every run nothing else may have appeared there and neither vault folder
//! may be gone: a client that writes next to its folder (`{dir}/../x`) or deletes it fails the
//! phase. Writes anywhere else on the machine are not looked for.

pub mod paired;
pub mod run;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use contract::key::PhaseKey;
use loadgen::TransferReport;
use reports::schema::Better;
use scenarios::client::{CLIENT_PHASES, ClientOptions};
use scenarios::scenario::Scenario;

use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::protocols::Run;
use crate::sample::sync_client::{EditJob, EditReport, PushJob, RouteStep, StepReport, SyncClient};
use crate::sample::target::Server;

/// The client-mode checks of a scenario (its `[client]` table merged with the flags): the
/// table's own checks, every command line splits, only phases a client can run, no fault
/// rules. Prints the phases a one-way client skips. Nothing to check without a table.
pub fn check_scenario(s: &Scenario) -> anyhow::Result<()> {
    let Some(c) = &s.client else { return Ok(()) };
    c.check()
        .map_err(|e| anyhow::anyhow!("scenario {}: {e}", s.name))?;
    for (field, line) in c.commands() {
        loadgen::launch::split_command(line)
            .map_err(|e| anyhow::anyhow!("scenario {}: [client] {field}: {e}", s.name))?;
    }
    for p in &c.route_patterns {
        loadgen::proxy::RoutePattern::parse(p)
            .map_err(|e| anyhow::anyhow!("scenario {}: [client] route_patterns: {e}", s.name))?;
    }
    if let Some(name) = &c.log_requests {
        if !c.proxied() {
            bail!(
                "scenario {}: [client] log_requests checks the proxy's counts; without the proxy (--no-proxy) there are none",
                s.name
            );
        }
        // A rule from `--count` is merged later; the sample checks it is there.
        if s.counts
            .iter()
            .any(|r| &r.name == name && r.kind != scenarios::scenario::CountKind::Count)
        {
            bail!(
                "scenario {}: [client] log_requests names {}, a [[count]] rule of kind sum; it needs one line per request",
                s.name,
                contract::quote::quote(name)
            );
        }
    }
    if !c.route_patterns.is_empty() && !c.proxied() {
        bail!(
            "scenario {}: [client] route_patterns name the proxy's routes; without the proxy (--no-proxy) nothing counts them",
            s.name
        );
    }
    if !s.faults.is_empty() {
        bail!(
            "scenario {}: fault rules need the harness's own protocol client; a client-mode scenario cannot have them",
            s.name
        );
    }
    for p in &s.phases {
        if !CLIENT_PHASES.contains(&p.name()) {
            bail!(
                "scenario {}: a client-mode scenario runs only {} phases; {} needs the harness's own protocol client",
                s.name,
                CLIENT_PHASES.join(", "),
                p.name()
            );
        }
    }
    let skipped = skipped(s);
    if let Some((_, why)) = skipped.first() {
        let names: Vec<&str> = skipped.iter().map(|(p, _)| *p).collect();
        eprintln!("client: {} skipped ({why})", names.join(", "));
    }
    Ok(())
}

/// Drops the phases of `s` that only the harness's own protocol client can run (route load,
/// crash, long polls) and its fault rules, naming on stderr what was dropped: `--client`
/// given to a scenario written for a built-in protocol runs the rest.
pub fn keep_client_phases(s: &mut Scenario) {
    let mut dropped: Vec<&'static str> = Vec::new();
    s.phases.retain(|p| {
        let keep = CLIENT_PHASES.contains(&p.name());
        if !keep && !dropped.contains(&p.name()) {
            dropped.push(p.name());
        }
        keep
    });
    if !s.faults.is_empty() {
        s.faults.clear();
        dropped.push("its fault rules");
    }
    if !dropped.is_empty() {
        eprintln!(
            "client: scenario {}: {} left out (they need the harness's own protocol client)",
            s.name,
            dropped.join(", ")
        );
    }
}

/// The scenario's phases its client cannot run, with why.
pub fn skipped(s: &Scenario) -> Vec<(&'static str, &'static str)> {
    let Some(c) = &s.client else {
        return Vec::new();
    };
    s.phases
        .iter()
        .filter_map(|p| c.skips(p.name()).map(|why| (p.name(), why)))
        .collect()
}

/// Drives the plan's phases through the scenario's own client (the plan has a `[client]`
/// table): the phases it cannot run are left out.
pub async fn drive(run: Run<'_>) -> anyhow::Result<()> {
    let mut plan = run.plan.clone();
    let opts = plan
        .scenario
        .client
        .clone()
        .context("client mode without a [client] table")?;
    plan.scenario
        .phases
        .retain(|p| opts.skips(p.name()).is_none());
    let mut client = CommandClient::start(&plan, run.server, run.dir)?;
    crate::sample::phases::drive(&plan, run.server, &mut client, run.dir, run.m, run.bounds).await
}

/// The name of the folder both devices' clients see (`{shared}`), beside theirs.
const SHARED: &str = "shared";

/// One device: its index, its vault folder and its state folder.
struct Device {
    index: usize,
    dir: PathBuf,
    state: PathBuf,
}

impl Device {
    fn name(&self) -> &'static str {
        if self.index == 0 { "A" } else { "B" }
    }
}

/// What one phase's client runs cost, summed.
#[derive(Default)]
struct Tally {
    runs: u64,
    wall: Duration,
    cpu: Duration,
    peak_rss_kib: u64,
    /// The start-up command's run before the phase, when one is given.
    startup: Option<run::Usage>,
}

/// The scenario's own client as devices A and B (see the module's doc).
pub struct CommandClient {
    spec: &'static loadgen::protocols::Spec,
    opts: ClientOptions,
    url: String,
    auth: Option<loadgen::http::BasicAuth>,
    /// The folder holding the devices' folders.
    area: PathBuf,
    devices: [Device; 2],
    /// `{shared}`: one folder both devices' clients see.
    shared: PathBuf,
    /// `{data}`: the server's data dir.
    data: PathBuf,
    deadline: Duration,
    /// Files, folders and bytes of the vault, for the push's and pull's reports.
    vault_size: (u64, u64, u64),
    /// With `[client] checkpoints`: the vault's files (relative, byte-sorted) the cold push
    /// has yet to copy into A's folder, a slice before each client run.
    pending: Vec<String>,
    tally: Tally,
    /// The recording proxy the clients' `{url}` points at, unless turned off.
    proxy: Option<loadgen::proxy::Proxy>,
}

impl CommandClient {
    /// The devices' folders under `sample_dir/client`, A's holding a copy of the vault and
    /// B's empty, then each device's `setup` run, all before anything is timed.
    pub fn start(
        plan: &SamplePlan,
        server: &Server,
        sample_dir: &Path,
    ) -> anyhow::Result<CommandClient> {
        let opts = plan
            .scenario
            .client
            .clone()
            .context("client mode without a [client] table")?;
        let spec = crate::sample::protocols::lookup(plan.scenario.protocol.name())?.spec();
        let area = sample_dir.join("client");
        let device = |index: usize, name: &str| Device {
            index,
            dir: area.join(name),
            state: area.join(format!("{name}.state")),
        };
        let devices = [device(0, "a"), device(1, "b")];
        let shared = area.join(SHARED);
        for p in devices
            .iter()
            .flat_map(|d| [&d.dir, &d.state])
            .chain([&shared])
        {
            std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
        }
        if let Some(name) = &opts.log_requests
            && !plan.scenario.counts.iter().any(|r| &r.name == name)
        {
            bail!(
                "[client] log_requests names {}, but no [[count]] rule (or --count) has that name",
                contract::quote::quote(name)
            );
        }
        let mut names = std::collections::BTreeSet::new();
        let (vault_size, pending) = if opts.pushes_in_slices() {
            // The cold push copies the files in, slice by slice; the folders are there now.
            let (size, files) = skeleton(&plan.vault_dir, &devices[0].dir, &mut names)
                .context("making the vault's folders in device A's folder")?;
            (size, files)
        } else {
            let size = copy_tree(&plan.vault_dir, &devices[0].dir, &mut names)
                .context("copying the vault into device A's folder")?;
            (size, Vec::new())
        };
        let def = &plan.target.def;
        let proxy = if opts.proxied() {
            let patterns = opts
                .route_patterns
                .iter()
                .map(|p| loadgen::proxy::RoutePattern::parse(p).map_err(anyhow::Error::msg))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let cfg = loadgen::proxy::ProxyConfig {
                upstream: server.addr,
                // A long poll is held as long as the client waits: the client's own deadline.
                read_timeout: opts.deadline(),
                classifier: loadgen::proxy::Classifier { patterns, names },
            };
            Some(loadgen::proxy::Proxy::start(cfg).context("starting the recording proxy")?)
        } else {
            None
        };
        let base = proxy.as_ref().map_or_else(|| server.url(), |p| p.url());
        let client = CommandClient {
            spec,
            deadline: opts.deadline(),
            opts,
            url: format!("{base}{}", def.root()),
            auth: def.auth.clone(),
            area,
            devices,
            shared,
            data: server.data_dir.clone(),
            vault_size,
            pending,
            tally: Tally::default(),
            proxy,
        };
        if let Some(setup) = client.opts.setup.clone() {
            for i in 0..2 {
                client.run_line(&setup, i, "setup")?;
            }
        }
        Ok(client)
    }

    /// `line` split into words, each with this device's placeholders filled in.
    fn argv(&self, line: &str, device: usize) -> anyhow::Result<Vec<String>> {
        let d = &self.devices[device];
        let (user, pass) = self
            .auth
            .as_ref()
            .map_or((String::new(), String::new()), |a| {
                (a.user.clone(), a.password.clone())
            });
        let words =
            loadgen::launch::split_command(line).map_err(|e| anyhow::anyhow!("[client]: {e}"))?;
        Ok(words
            .iter()
            .map(|w| {
                w.replace("{url}", &self.url)
                    .replace("{dir}", &d.dir.to_string_lossy())
                    .replace("{state}", &d.state.to_string_lossy())
                    .replace("{shared}", &self.shared.to_string_lossy())
                    .replace("{data}", &self.data.to_string_lossy())
                    .replace("{device}", &d.index.to_string())
                    .replace("{auth_user}", &user)
                    .replace("{auth_pass}", &pass)
            })
            .collect())
    }

    /// Runs `line` for `device` under the client's deadline, then checks the devices' folder
    /// (`what`: the phase, for errors).
    fn run_line(&self, line: &str, device: usize, what: &str) -> anyhow::Result<run::Usage> {
        let d = &self.devices[device];
        let who = format!("{what}: device {}'s client", d.name());
        let argv = self.argv(line, device)?;
        let usage = run::run(&argv, &d.state, self.deadline, &who);
        // The run is over: whatever it left open through the proxy is closed and counted.
        if let Some(p) = &self.proxy {
            p.close_connections();
        }
        let usage = match usage {
            Ok(u) => u,
            Err(e) => match self.proxy.as_ref().map(|p| p.faults()) {
                Some(f) if !f.is_empty() => {
                    let seen: Vec<String> = f.iter().map(|(w, n)| format!("{w} ({n})")).collect();
                    bail!("{e:#}; the proxy saw from the server: {}", seen.join(", "))
                }
                _ => return Err(e),
            },
        };
        self.check_area(&who)?;
        Ok(usage)
    }

    /// A timed run of the phase: `line` for `device`, added to the phase's tally.
    fn timed(&mut self, line: &str, device: usize, phase: &str) -> anyhow::Result<run::Usage> {
        let u = self.run_line(line, device, phase)?;
        let t = &mut self.tally;
        t.runs += 1;
        t.wall += u.wall;
        t.cpu += u.cpu;
        t.peak_rss_kib = t.peak_rss_kib.max(u.peak_rss_kib);
        Ok(u)
    }

    /// The cold push with `[client] checkpoints`: before each client run the next
    /// `checkpoint_every` files are copied into A's folder, and after it a checkpoint is
    /// taken (files in the folder, ms since the push began), so the growth sampler cuts the
    /// server's costs into windows. A window's files/s counts the slice's local copy too
    /// (milliseconds, against the client's run).
    fn push_in_slices(&mut self, line: &str, job: PushJob<'_>) -> anyhow::Result<TransferReport> {
        let every = job.checkpoint_every.max(1);
        let files = std::mem::take(&mut self.pending);
        let a = self.devices[0].dir.clone();
        let t0 = std::time::Instant::now();
        let (mut wall, mut done) = (Duration::ZERO, 0u64);
        let mut last = (0u64, Duration::ZERO);
        let mut checkpoints = Vec::with_capacity(files.len().div_ceil(every));
        for slice in files.chunks(every) {
            for rel in slice {
                let (from, to) = (job.vault.join(rel), a.join(rel));
                std::fs::copy(&from, &to)
                    .with_context(|| format!("cold_push: copying {rel} into device A's folder"))?;
            }
            wall += self.timed(line, 0, "cold_push")?.wall;
            done += slice.len() as u64;
            let now = t0.elapsed();
            checkpoints.push(loadgen::Checkpoint {
                files: done,
                elapsed_ms: now.as_millis() as u64,
                files_per_s: (done - last.0) as f64 / (now - last.1).as_secs_f64().max(1e-9),
                p50_ms: None,
            });
            last = (done, now);
        }
        let mut r = self.report(wall, self.vault_size);
        r.checkpoints = checkpoints;
        Ok(r)
    }

    /// The note `rel` in A's folder as it is before the first edit round.
    pub(crate) fn edit_start(&self, rel: &str) -> anyhow::Result<Vec<u8>> {
        let a = self.devices[0].dir.join(rel);
        std::fs::read(&a).with_context(|| format!("edit: reading A's copy of {rel}"))
    }

    /// One edit round: a line appended to `body` (A's copy of the note `rel`) and written,
    /// A's client, B's client, and B's copy compared with A's. Returns the round's delay in
    /// ms, from the edit to B's client's exit.
    pub(crate) fn edit_round(
        &mut self,
        rel: &str,
        round: usize,
        body: &mut Vec<u8>,
    ) -> anyhow::Result<f64> {
        let (push, pull) = (self.push_line()?, self.pull_line()?);
        let a = self.devices[0].dir.join(rel);
        let b = self.devices[1].dir.join(rel);
        body.extend_from_slice(
            format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
        );
        let t0 = std::time::Instant::now();
        std::fs::write(&a, body.as_slice())
            .with_context(|| format!("edit: writing A's copy of {rel}"))?;
        self.timed(&push, 0, "edit")?;
        self.timed(&pull, 1, "edit")?;
        let took = ms(t0.elapsed());
        let got = std::fs::read(&b).with_context(|| {
            format!("edit: B's copy of {rel} after round {round} cannot be read")
        })?;
        if got != *body {
            bail!("edit: B's copy of {rel} differs from A's after round {round}");
        }
        Ok(took)
    }

    fn push_line(&self) -> anyhow::Result<String> {
        self.opts
            .push_command()
            .map(str::to_owned)
            .context("the client has no push command")
    }

    fn pull_line(&self) -> anyhow::Result<String> {
        self.opts
            .pull_command()
            .map(str::to_owned)
            .context("the client has no pull command")
    }

    /// Nothing but the devices' four folders and the shared one in their folder, and both
    /// vault folders there.
    fn check_area(&self, who: &str) -> anyhow::Result<()> {
        let known: Vec<std::ffi::OsString> = self
            .devices
            .iter()
            .flat_map(|d| [&d.dir, &d.state])
            .chain([&self.shared])
            .filter_map(|p| p.file_name().map(ToOwned::to_owned))
            .collect();
        let entries = std::fs::read_dir(&self.area)
            .with_context(|| format!("{who}: listing {}", self.area.display()))?;
        for e in entries {
            let name = e
                .with_context(|| format!("{who}: listing the devices' folder"))?
                .file_name();
            if !known.contains(&name) {
                bail!(
                    "{who} wrote outside its folders: {} appeared beside the devices' folders",
                    contract::quote::quote(&name.to_string_lossy())
                );
            }
        }
        for d in &self.devices {
            if !d.dir.is_dir() {
                bail!(
                    "{who}: device {}'s folder is gone (a client must keep the folder it syncs)",
                    d.name()
                );
            }
        }
        Ok(())
    }

    /// A push or pull's report: the client's wall time and what the folder holds.
    fn report(&self, wall: Duration, size: (u64, u64, u64)) -> TransferReport {
        // The client's requests are its own: nothing recorded here but the wall time.
        TransferReport {
            files: size.0,
            dirs: size.1,
            bytes: size.2,
            ..TransferReport::new(loadgen::Recorder::counting().snapshot(), wall)
        }
    }
}

impl SyncClient for CommandClient {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        self.spec
    }

    fn protocol(&self) -> &'static str {
        "the scenario's own client"
    }

    fn counts_requests(&self) -> bool {
        false
    }

    fn pull_dir(&self, _sample_dir: &Path) -> PathBuf {
        self.devices[1].dir.clone()
    }

    /// A phase starts: its tally from zero, and the start-up command timed once.
    async fn phase_started(&mut self) -> anyhow::Result<()> {
        self.tally = Tally::default();
        if let Some(line) = self.opts.startup.clone() {
            self.tally.startup = Some(self.run_line(&line, 0, "start-up probe")?);
        }
        // The proxy's counts from here on are the phase's (not the setup's or the probe's).
        if let Some(p) = &self.proxy {
            p.take();
        }
        Ok(())
    }

    /// The phase's client keys: runs, wall time, CPU, peak RSS, and the start-up share.
    async fn phase_ended(
        &mut self,
        phase: &str,
        _files: Option<u64>,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        let t = std::mem::take(&mut self.tally);
        let seen = self.proxy.as_ref().map(|p| p.take());
        if t.runs == 0 {
            return Ok(());
        }
        client_keys(phase, &t, m);
        if let Some(seen) = seen {
            proxy_keys(phase, &seen, self.vault_size.0, m);
            if let Some(name) = &self.opts.log_requests {
                cross_check(phase, seen.requests(), name, m)?;
            }
        }
        Ok(())
    }

    async fn push(&mut self, job: PushJob<'_>, _m: &mut Metrics) -> anyhow::Result<TransferReport> {
        let line = self.push_line()?;
        if self.pending.is_empty() {
            let u = self.timed(&line, 0, "cold_push")?;
            return Ok(self.report(u.wall, self.vault_size));
        }
        self.push_in_slices(&line, job)
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        let line = self.pull_line()?;
        let u = self.timed(&line, 1, "cold_pull")?;
        let size = tree_size(dir).context("cold_pull: measuring B's folder")?;
        Ok(self.report(u.wall, size))
    }

    /// A's client once more with nothing changed; A's folder must be as it was.
    async fn resync(&mut self, _dir: &Path) -> anyhow::Result<TransferReport> {
        let line = self.push_line()?;
        let a = self.devices[0].dir.clone();
        let before = crate::tree::tree_digest(&a).context("idle_resync: hashing A's folder")?;
        let u = self.timed(&line, 0, "idle_resync")?;
        let after = crate::tree::tree_digest(&a).context("idle_resync: hashing A's folder")?;
        if after != before {
            bail!(
                "idle_resync: A's folder changed when its client ran with nothing to do (digest {after}, before the run {before})"
            );
        }
        let size = tree_size(&a).context("idle_resync: measuring A's folder")?;
        Ok(self.report(u.wall, size))
    }

    /// Each round: a line appended to the note in A's folder, A's client, B's client, and
    /// B's copy compared with A's. The round's delay is from the edit to B's client's exit.
    async fn edit_propagation(
        &mut self,
        job: &EditJob<'_>,
        _m: &mut Metrics,
    ) -> anyhow::Result<EditReport> {
        let mut body = self.edit_start(job.rel)?;
        let mut lat = Vec::with_capacity(job.rounds);
        for round in 0..job.rounds {
            lat.push(self.edit_round(job.rel, round, &mut body)?);
        }
        Ok(EditReport {
            latencies_ms: lat,
            requests: 0,
        })
    }

    async fn rename(&mut self, from: &str, to: &str, _m: &mut Metrics) -> anyhow::Result<u64> {
        let a = &self.devices[0].dir;
        std::fs::rename(a.join(from), a.join(to))
            .with_context(|| format!("folder_rename: renaming A's {from}"))?;
        // The folder's new name is part of a `{path}` from now on.
        if let Some(p) = &self.proxy {
            p.add_names(
                std::path::Path::new(to)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned()),
            );
        }
        let line = self.push_line()?;
        self.timed(&line, 0, "folder_rename")?;
        Ok(0)
    }

    async fn propagate_rename(
        &mut self,
        _from: &str,
        _to: &str,
        _pull_dir: &Path,
    ) -> anyhow::Result<u64> {
        let line = self.pull_line()?;
        self.timed(&line, 1, "folder_rename")?;
        Ok(0)
    }

    async fn route_step(&mut self, _step: RouteStep<'_>) -> anyhow::Result<StepReport> {
        bail!(
            "route load needs the harness's own protocol client; a client-mode scenario cannot run it"
        )
    }
}

/// The client keys of one phase's tally (pure).
fn client_keys(phase: &str, t: &Tally, m: &mut Metrics) {
    let key = |stat: &str| PhaseKey::new(phase, &format!("client.{stat}"));
    let wall_ms = ms(t.wall);
    m.exact(key("runs"), t.runs as f64, "count");
    m.timing(key("wall_ms"), round3(wall_ms), "ms", Better::Lower);
    m.resource(key("cpu_ms"), round3(ms(t.cpu)), "ms");
    m.resource(
        key("peak_rss_mib"),
        round3(t.peak_rss_kib as f64 / 1024.0),
        "MiB",
    );
    if let Some(s) = &t.startup {
        let startup_ms = ms(s.wall);
        m.timing(key("startup_ms"), round3(startup_ms), "ms", Better::Lower);
        // Every run of the phase pays the start-up once: the share of the phase's client
        // time that is start-up, at most all of it (hyperfine subtracts its shell's spawn
        // the same way).
        let share = if wall_ms > 0.0 {
            (startup_ms * t.runs as f64 / wall_ms).min(1.0)
        } else {
            0.0
        };
        m.timing(key("startup_share"), round3(share), "ratio", Better::Lower);
    }
}

/// The server's own count of the phase's requests (the `[[count]]` rule `name` over its
/// access log, read before the phase ended) against the proxy's: a difference fails the sample.
fn cross_check(phase: &str, proxied: u64, name: &str, m: &Metrics) -> anyhow::Result<()> {
    let key = PhaseKey::new(phase, &format!("log.{name}")).to_string();
    let logged = m.map.get(&key).map_or(0.0, |v| v.value);
    if logged != proxied as f64 {
        bail!(
            "{phase}: the proxy relayed {proxied} requests but the server's log counted {logged} ([client] log_requests = {})",
            contract::quote::quote(name)
        );
    }
    Ok(())
}

/// The proxy's keys of one phase (pure): per route `PHASE.proxy.ROUTE.*` (requests, per file
/// of the vault, bytes each way, answers by status class, failed exchanges, the most in flight,
/// latency at the proxy; WebSocket frames where there were any) and its HdrHistogram, and
/// over all routes `PHASE.proxy.requests`, `.requests_per_file` and `.max_in_flight`.
fn proxy_keys(phase: &str, t: &loadgen::proxy::Tally, vault_files: u64, m: &mut Metrics) {
    let per_file = |n: u64| {
        if vault_files == 0 {
            0.0
        } else {
            round3(n as f64 / vault_files as f64)
        }
    };
    let key = |stat: &str| PhaseKey::new(phase, &format!("proxy.{stat}"));
    let all = t.requests();
    m.exact(key("requests"), all as f64, "count");
    m.exact(key("requests_per_file"), per_file(all), "requests/file");
    m.resource(key("max_in_flight"), t.max_in_flight as f64, "count");
    for (route, r) in t.routes.iter().filter(|(_, r)| r.requests > 0) {
        let k = |stat: &str| key(&format!("{route}.{stat}"));
        m.exact(k("requests"), r.requests as f64, "count");
        m.exact(
            k("requests_per_file"),
            per_file(r.requests),
            "requests/file",
        );
        // Header lengths vary with dates and tags: bytes are resources, not exact.
        m.resource(k("bytes_up"), r.bytes_up as f64, "bytes");
        m.resource(k("bytes_down"), r.bytes_down as f64, "bytes");
        for (i, n) in r.status.iter().enumerate() {
            m.exact(k(&format!("status_{}xx", i + 1)), *n as f64, "count");
        }
        m.exact(k("failed"), r.failed as f64, "count");
        m.resource(k("max_in_flight"), r.max_in_flight as f64, "count");
        if r.ws_frames_up + r.ws_frames_down > 0 {
            m.resource(k("ws_frames_up"), r.ws_frames_up as f64, "count");
            m.resource(k("ws_frames_down"), r.ws_frames_down as f64, "count");
        }
        if !r.latency.is_empty() {
            let q = |x: f64| r.latency.value_at_quantile(x) as f64;
            m.timing(k("p50_us"), q(0.50), "us", Better::Lower);
            m.timing(k("p99_us"), q(0.99), "us", Better::Lower);
            if let Some(h) = crate::sample::sync_client::encode_histogram(&r.latency) {
                m.histograms.insert(format!("{phase}.proxy.{route}"), h);
            }
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// Copies the tree under `from` into `to` (existing, empty): files, folders and bytes copied;
/// every file and folder name into `names`.
fn copy_tree(
    from: &Path,
    to: &Path,
    names: &mut std::collections::BTreeSet<String>,
) -> anyhow::Result<(u64, u64, u64)> {
    let (mut files, mut dirs, mut bytes) = (0, 0, 0);
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        for e in std::fs::read_dir(&src).with_context(|| format!("listing {}", src.display()))? {
            let e = e.with_context(|| format!("listing {}", src.display()))?;
            let (s, d) = (e.path(), dst.join(e.file_name()));
            names.insert(e.file_name().to_string_lossy().into_owned());
            let ft = e.file_type()?;
            if ft.is_dir() {
                std::fs::create_dir(&d).with_context(|| format!("creating {}", d.display()))?;
                dirs += 1;
                stack.push((s, d));
            } else if ft.is_file() {
                bytes += std::fs::copy(&s, &d)
                    .with_context(|| format!("copying {} to {}", s.display(), d.display()))?;
                files += 1;
            }
        }
    }
    Ok((files, dirs, bytes))
}

/// The folders of the tree under `from` made under `to` (existing, empty), and its files
/// listed (relative, byte-sorted) but not copied: the vault's files, folders and bytes, and
/// that list. Every file and folder name goes into `names`.
fn skeleton(
    from: &Path,
    to: &Path,
    names: &mut std::collections::BTreeSet<String>,
) -> anyhow::Result<((u64, u64, u64), Vec<String>)> {
    let (mut dirs, mut bytes) = (0, 0);
    let mut files = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let src = from.join(&rel);
        for e in std::fs::read_dir(&src).with_context(|| format!("listing {}", src.display()))? {
            let e = e.with_context(|| format!("listing {}", src.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            names.insert(name);
            let ft = e.file_type()?;
            if ft.is_dir() {
                let d = to.join(&child);
                std::fs::create_dir(&d).with_context(|| format!("creating {}", d.display()))?;
                dirs += 1;
                stack.push(child);
            } else if ft.is_file() {
                bytes += e.metadata()?.len();
                files.push(child);
            }
        }
    }
    files.sort();
    Ok(((files.len() as u64, dirs, bytes), files))
}

/// Files, folders and file bytes under `dir`.
fn tree_size(dir: &Path) -> anyhow::Result<(u64, u64, u64)> {
    let (mut files, mut dirs, mut bytes) = (0, 0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let e = e.with_context(|| format!("listing {}", d.display()))?;
            let ft = e.file_type()?;
            if ft.is_dir() {
                dirs += 1;
                stack.push(e.path());
            } else if ft.is_file() {
                files += 1;
                bytes += e.metadata()?.len();
            }
        }
    }
    Ok((files, dirs, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skeleton_makes_the_folders_and_lists_the_files_byte_sorted() {
        let t = tempfile::tempdir().unwrap();
        let (from, to) = (t.path().join("v"), t.path().join("a"));
        for (rel, body) in [
            ("b/z.md", "zz"),
            ("a.md", "a"),
            ("b/c/d.md", "ddd"),
            ("B.md", ""),
        ] {
            let p = from.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        std::fs::create_dir_all(from.join("empty")).unwrap();
        std::fs::create_dir(&to).unwrap();
        let mut names = std::collections::BTreeSet::new();
        let (size, files) = skeleton(&from, &to, &mut names).unwrap();
        assert_eq!(files, ["B.md", "a.md", "b/c/d.md", "b/z.md"]);
        assert_eq!(size, (4, 3, 6));
        // The folders are made, empty ones included; no file is copied yet.
        assert!(to.join("b/c").is_dir() && to.join("empty").is_dir());
        assert!(!to.join("a.md").exists());
        assert!(names.contains("z.md") && names.contains("c") && names.contains("empty"));
    }

    #[test]
    fn a_built_in_scenario_keeps_the_phases_a_client_can_run() {
        let mut s = scenarios::scenario::builtin("small").unwrap();
        keep_client_phases(&mut s);
        let names: Vec<&str> = s.phases.iter().map(|p| p.name()).collect();
        assert_eq!(names, CLIENT_PHASES);
        s.client = Some(ClientOptions {
            command: Some("sync {dir}".into()),
            ..ClientOptions::default()
        });
        check_scenario(&s).unwrap();
        let mut faults = scenarios::scenario::builtin("faults-small").unwrap();
        assert!(!faults.faults.is_empty());
        keep_client_phases(&mut faults);
        assert!(faults.faults.is_empty());
        assert!(
            faults
                .phases
                .iter()
                .all(|p| CLIENT_PHASES.contains(&p.name()))
        );
    }

    #[test]
    fn a_phase_states_its_client_cost_and_start_up_share() {
        let mut m = Metrics::default();
        let t = Tally {
            runs: 4,
            wall: Duration::from_millis(400),
            cpu: Duration::from_millis(120),
            peak_rss_kib: 2048,
            startup: Some(run::Usage {
                wall: Duration::from_millis(25),
                ..run::Usage::default()
            }),
        };
        client_keys("edit", &t, &mut m);
        let v = |k: &str| m.map[k].value;
        assert_eq!(v("edit.client.runs"), 4.0);
        assert_eq!(v("edit.client.wall_ms"), 400.0);
        assert_eq!(v("edit.client.cpu_ms"), 120.0);
        assert_eq!(v("edit.client.peak_rss_mib"), 2.0);
        assert_eq!(v("edit.client.startup_ms"), 25.0);
        assert_eq!(v("edit.client.startup_share"), 0.25);
        for k in m.map.keys() {
            assert_eq!(
                k.parse::<contract::key::MetricKey>().unwrap().to_string(),
                *k
            );
        }
        let mut m = Metrics::default();
        client_keys(
            "cold_push",
            &Tally {
                runs: 1,
                ..Tally::default()
            },
            &mut m,
        );
        assert!(!m.map.contains_key("cold_push.client.startup_share"));
    }

    #[test]
    fn the_proxys_counts_become_keys_per_route() {
        let mut t = loadgen::proxy::Tally::default();
        let ended = |status: Option<u16>, us: Option<u64>| loadgen::proxy::tally::Ended {
            bytes_up: 100,
            bytes_down: 40,
            status,
            latency: us.map(Duration::from_micros),
            ws_frames: (0, 0),
        };
        for _ in 0..3 {
            t.record("PUT_{path}", ended(Some(201), Some(800)));
        }
        t.record("PUT_{path}", ended(None, None));
        t.record("PROPFIND_", ended(Some(207), Some(300)));
        t.max_in_flight = 4;
        let mut m = Metrics::default();
        proxy_keys("cold_push", &t, 2, &mut m);
        let v = |k: &str| m.map[k].value;
        assert_eq!(v("cold_push.proxy.requests"), 5.0);
        assert_eq!(v("cold_push.proxy.requests_per_file"), 2.5);
        assert_eq!(v("cold_push.proxy.max_in_flight"), 4.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.requests"), 4.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.requests_per_file"), 2.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.status_2xx"), 3.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.status_4xx"), 0.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.failed"), 1.0);
        assert_eq!(v("cold_push.proxy.PUT_{path}.bytes_up"), 400.0);
        let p50 = v("cold_push.proxy.PUT_{path}.p50_us");
        assert!((799.0..=801.0).contains(&p50), "{p50}");
        assert!(m.histograms.contains_key("cold_push.proxy.PUT_{path}"));
        assert!(m.histograms.contains_key("cold_push.proxy.PROPFIND_"));
        assert!(
            !m.map
                .contains_key("cold_push.proxy.PUT_{path}.ws_frames_up")
        );
        // Every key reads back as a phase key of its phase.
        for k in m.map.keys() {
            let parsed = k.parse::<contract::key::MetricKey>().unwrap();
            assert_eq!(parsed.to_string(), *k);
            assert_eq!(parsed.phase_name(), Some("cold_push"), "{k}");
        }
    }

    #[test]
    fn the_servers_log_must_count_what_the_proxy_relayed() {
        let mut m = Metrics::default();
        m.exact("edit.log.access", 12.0, "lines");
        cross_check("edit", 12, "access", &m).unwrap();
        let e = cross_check("edit", 13, "access", &m)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "edit: the proxy relayed 13 requests but the server's log counted 12 ([client] log_requests = \"access\")"
        );
        // A phase in which the log has no line at all has no key: zero.
        assert!(cross_check("cold_pull", 1, "access", &m).is_err());
        cross_check("cold_pull", 0, "access", &m).unwrap();
    }

    #[test]
    fn client_mode_refuses_what_a_client_cannot_run() {
        let parse = |t: &str| scenarios::scenario::parse(t, "f.toml").unwrap();
        let base = "name='x'\ndoc='d'\nprofile='small'\n";
        let ok = parse(&format!(
            "{base}[client]\npush='up {{dir}}'\n[[phase]]\nkind='cold_push'\n[[phase]]\nkind='cold_pull'\n[[phase]]\nkind='idle_resync'\n"
        ));
        check_scenario(&ok).unwrap();
        assert_eq!(
            skipped(&ok),
            vec![("cold_pull", "the client has no pull command")]
        );
        let route = parse(&format!(
            "{base}[client]\ncommand='sync'\n[[phase]]\nkind='route_load'\nroutes=['get-file']\nin_flight=[1]\nrequests=5\n"
        ));
        let e = check_scenario(&route).unwrap_err().to_string();
        assert!(
            e.contains("runs only cold_start") && e.contains("route"),
            "{e}"
        );
        let quote = parse(&format!(
            "{base}[client]\ncommand=\"sync '{{dir}}\"\n[[phase]]\nkind='cold_push'\n"
        ));
        let e = check_scenario(&quote).unwrap_err().to_string();
        assert!(
            e.contains("[client] command") && e.contains("unbalanced"),
            "{e}"
        );
        let pattern = parse(&format!(
            "{base}[client]\ncommand='sync'\nroute_patterns=['up=PUT ^/(']\n[[phase]]\nkind='cold_push'\n"
        ));
        let e = check_scenario(&pattern).unwrap_err().to_string();
        assert!(e.contains("[client] route_patterns: route pattern"), "{e}");
        let unproxied = parse(&format!(
            "{base}[client]\ncommand='sync'\nproxy=false\nroute_patterns=['up=PUT ^/']\n[[phase]]\nkind='cold_push'\n"
        ));
        let e = check_scenario(&unproxied).unwrap_err().to_string();
        assert!(e.contains("without the proxy"), "{e}");
        let sum = parse(&format!(
            "{base}[client]\ncommand='sync'\nlog_requests='access'\n[[count]]\nname='access'\nregex='(?P<value>1)'\nkind='sum'\n[[phase]]\nkind='cold_push'\n"
        ));
        let e = check_scenario(&sum).unwrap_err().to_string();
        assert!(
            e.contains("log_requests names \"access\", a [[count]] rule of kind sum"),
            "{e}"
        );
        let ruled = parse(&format!(
            "{base}[client]\ncommand='sync'\nlog_requests='access'\n[[count]]\nname='access'\nregex='^'\n[[phase]]\nkind='cold_push'\n"
        ));
        check_scenario(&ruled).unwrap();
    }
}

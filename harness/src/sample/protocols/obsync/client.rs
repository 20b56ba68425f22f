//! The obsync-v1 side of the protocol seam: signed devices enrolled on the target (through
//! `loadgen::faulthop` when the scenario has fault rules). Cold push with the uploader's own
//! long poll counting its echo; edit propagation answered by B's waiting long poll; the
//! server's durability counters (fsyncs by kind, journal flushes, ...) read from `/metrics`
//! before and after each phase; the crash phase; the fault hop's counts at the end.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::key::{PhaseKey, Scope, ServerKey};
use loadgen::{Device, PushOpts, Target, TransferReport};
use reports::schema::Better;
use scenarios::scenario::Phase;

use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::sync_client::{
    EditJob, EditReport, PushJob, RouteStep, StepReport, SyncClient, edit_dir,
};
use crate::sample::target::Server;

/// Signed devices on an obsync-v1 target.
pub struct ObsyncClient {
    target: Target,
    devices: Vec<Device>,
    has_metrics: bool,
    hop: Option<loadgen::faulthop::FaultHop>,
    /// Whether every request happens in an order the scenario fixes (fault counts exact).
    deterministic: bool,
    /// The change-feed position B has applied.
    b_seq: u64,
    /// The scenario's seed (nonce streams of devices paired later).
    seed: u64,
    /// Devices paired for long-polling steps, beyond the scenario's.
    extra: Vec<Device>,
    before: BTreeMap<String, f64>,
}

impl ObsyncClient {
    /// Enrols the scenario's devices on `server` (through a fault hop when the scenario has
    /// fault rules). `scrapes` false: never read `/metrics` (an instruction-count run would
    /// count the reads); a target without `/metrics` (a 404 or any failed first read) gets no
    /// server counter keys either.
    pub async fn connect(
        plan: &SamplePlan,
        server: &Server,
        scrapes: bool,
    ) -> anyhow::Result<ObsyncClient> {
        // Every device carries the feed bounds of its target (`--feed-max-*`).
        let feed = loadgen::FeedBounds::DEFAULT.with(plan.target.def.feed.unwrap_or_default());
        let target = Target::parse(&server.url(), false)?.with_feed_bounds(feed);
        let token = read_setup_token(&server.data_dir)?;
        let has_metrics = scrapes && loadgen::scrape_metrics(&target).await.is_ok();
        // With fault rules the devices talk to the target through the hop; `/metrics` is read
        // directly.
        let hop = match plan.scenario.faults.as_slice() {
            [] => None,
            rules => Some(
                loadgen::faulthop::FaultHop::start(server.addr, hop_rules(rules), plan.seed)
                    .await
                    .context("starting the fault hop")?,
            ),
        };
        let device_target = match &hop {
            Some(h) => Target::parse(&h.url(), false)?.with_feed_bounds(feed),
            None => target.clone(),
        };
        let devices = loadgen::enroll(&device_target, &token, plan.scenario.devices, plan.seed)
            .await
            .context("enrolling devices")?;
        if devices.len() < 2 {
            bail!(
                "scenario {} enrols {} device(s): its phases need two (A and B)",
                plan.scenario.name,
                devices.len()
            );
        }
        Ok(ObsyncClient {
            target,
            devices,
            has_metrics,
            hop,
            deterministic: deterministic(&plan.scenario.phases),
            b_seq: 0,
            seed: plan.seed,
            extra: Vec::new(),
            before: BTreeMap::new(),
        })
    }

    /// The enrolled devices (the paired sample drives them directly).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    fn a(&self) -> &Device {
        &self.devices[0]
    }

    fn b(&self) -> &Device {
        &self.devices[1]
    }

    async fn scrape(&self) -> anyhow::Result<BTreeMap<String, f64>> {
        if !self.has_metrics {
            return Ok(BTreeMap::new());
        }
        loadgen::scrape_metrics(&self.target)
            .await
            .context("reading the server's /metrics")
    }
}

impl SyncClient for ObsyncClient {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::obsync::SPEC
    }

    async fn phase_started(&mut self) -> anyhow::Result<()> {
        self.before = self.scrape().await?;
        Ok(())
    }

    async fn phase_ended(
        &mut self,
        name: &str,
        files: Option<u64>,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        if !self.has_metrics {
            return Ok(());
        }
        let after = self.scrape().await?;
        let delta = counter_delta(&self.before, &after);
        let key = |stat: &str| ServerKey::new(Scope::phase(name), stat);
        if let Some(files) = files.filter(|f| *f > 0) {
            let fsyncs: f64 = delta
                .iter()
                .filter(|(k, _)| k.starts_with("fsyncs."))
                .map(|(_, v)| v)
                .sum();
            let data: f64 = delta
                .iter()
                .filter(|(k, _)| k.starts_with("fsyncs.") && !k.ends_with("nonce_log"))
                .map(|(_, v)| v)
                .sum();
            // Data fsyncs (chunk file, chunk dir, journal) per file are a property of the
            // build; all fsyncs also count the nonce log, which the echo long poll feeds.
            m.exact(
                key("data_fsyncs_per_file"),
                round6(data / files as f64),
                "fsyncs/file",
            );
            m.resource(
                key("fsyncs_per_file"),
                round6(fsyncs / files as f64),
                "fsyncs/file",
            );
        }
        for (k, v) in delta {
            let key = key(&k);
            let unit = if k.contains("bytes") {
                "bytes"
            } else {
                "count"
            };
            // Nonce records and long-poll wake-ups include the long polls held during the phase,
            // whose number depends on timing: load-dependent, so not exact.
            if k.starts_with("nonce") || k.ends_with("nonce_log") || k.starts_with("longpoll") {
                m.resource(key, v, unit);
            } else {
                m.exact(key, v, unit);
            }
        }
        Ok(())
    }

    async fn push(&mut self, job: PushJob<'_>, m: &mut Metrics) -> anyhow::Result<TransferReport> {
        let opts = PushOpts {
            in_flight: job.in_flight,
            checkpoint_every: job.checkpoint_every,
        };
        let (r, echo) = push_with_echo(self.a(), job.vault, &opts).await?;
        m.timing(
            "cold_push.own_echo.answers",
            echo.answers as f64,
            "count",
            Better::Lower,
        );
        m.exact("cold_push.own_echo.changes", echo.changes as f64, "count");
        Ok(r)
    }

    fn transfer_keys(&self, p: &str, r: &TransferReport, m: &mut Metrics) {
        m.exact(
            PhaseKey::new(p, "chunks_transferred"),
            r.chunks_transferred as f64,
            "count",
        );
        if p == "cold_push" {
            m.exact(
                PhaseKey::new(p, "chunks_present"),
                r.chunks_present as f64,
                "count",
            );
        }
    }

    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        let r = loadgen::pull_vault(self.b(), dir, self.b_seq)
            .await
            .context("cold pull")?;
        self.b_seq = r.last_seq;
        Ok(r)
    }

    async fn resync(&mut self, dir: &Path) -> anyhow::Result<TransferReport> {
        let r = loadgen::resync(self.b(), dir, self.b_seq)
            .await
            .context("idle resync")?;
        self.b_seq = self.b_seq.max(r.last_seq);
        Ok(r)
    }

    async fn edit_propagation(
        &mut self,
        job: &EditJob<'_>,
        m: &mut Metrics,
    ) -> anyhow::Result<EditReport> {
        let (seq, r) = edit_propagation(self.a(), self.b(), job, self.b_seq).await?;
        self.b_seq = seq;
        m.exact("edit.push_requests", r.requests as f64, "count");
        Ok(r)
    }

    async fn rename(&mut self, from: &str, to: &str, m: &mut Metrics) -> anyhow::Result<u64> {
        let v = loadgen::rename_path(self.a(), from, to)
            .await
            .context("folder rename")?;
        m.exact("folder_rename.versions", v.len() as f64, "count");
        Ok(v.iter().map(|p| p.requests).sum())
    }

    async fn propagate_rename(
        &mut self,
        _from: &str,
        _to: &str,
        pull_dir: &Path,
    ) -> anyhow::Result<u64> {
        let r = loadgen::pull_vault(self.b(), pull_dir, self.b_seq)
            .await
            .context("folder rename: pull on B")?;
        self.b_seq = r.last_seq;
        Ok(r.requests)
    }

    async fn crash(
        &mut self,
        plan: &SamplePlan,
        server: &mut Server,
        how: crate::sample::crash::How,
        sample_dir: &Path,
        m: &mut Metrics,
    ) -> anyhow::Result<()> {
        let (a, b) = (&self.devices[0], &self.devices[1]);
        crate::sample::crash::run(plan, server, a, b, how, sample_dir, m).await
    }

    async fn long_poll_devices(&mut self, n: usize) -> anyhow::Result<Vec<Device>> {
        // Pairing is sequential (each device's approval is the first device's signed request).
        while self.extra.len() < n {
            let index = self.devices.len() + self.extra.len();
            let d = loadgen::pair(&self.devices[0], index, self.seed, 0)
                .await
                .with_context(|| format!("pairing long-polling device {index}"))?
                .with_fresh_client();
            // The paired device's own connection (it fetched its envelope) closes here, so
            // pairing many does not fill a server's connection cap before they poll.
            self.extra.push(d);
        }
        Ok(self.extra[..n].to_vec())
    }

    async fn route_step(&mut self, step: RouteStep<'_>) -> anyhow::Result<StepReport> {
        let cfg = step.config(&loadgen::Route::ALL, "route")?;
        let rep = loadgen::run_route_load(&self.devices, &cfg).await?;
        Ok(StepReport {
            requests: rep.requests,
            throughput_per_s: rep.throughput_per_s,
            stats: rep.stats,
        })
    }

    fn finish(&mut self, m: &mut Metrics) {
        if let Some(h) = &self.hop {
            hop_metrics(&h.counts(), self.deterministic, m);
        }
    }
}

fn hop_rules(rules: &[scenarios::scenario::FaultRule]) -> Vec<loadgen::faulthop::FaultRule> {
    rules
        .iter()
        .map(|r| loadgen::faulthop::FaultRule {
            route: r.route.clone(),
            kind: r.kind,
            rate: r.rate,
            ms: r.ms,
        })
        .collect()
}

/// True when every request happens in an order fixed by the scenario: one file in flight and
/// no timed or concurrent phase, so the hop's seeded schedule picks the same requests on every
/// run and its counts are exact.
fn deterministic(phases: &[Phase]) -> bool {
    phases.iter().all(|p| match p {
        Phase::ColdStart | Phase::ColdPull | Phase::IdleResync | Phase::FolderRename => true,
        Phase::ColdPush { in_flight, .. } => *in_flight == 1,
        Phase::EditPropagation { .. }
        | Phase::Crash { .. }
        | Phase::RouteLoad { .. }
        | Phase::LongPollFanout { .. }
        | Phase::ConcurrentPush { .. }
        | Phase::McpListWarm { .. }
        | Phase::McpCalls { .. }
        | Phase::TusResume { .. } => false,
    })
}

/// The hop's counts as keys: faults injected, requests seen, and what the target did twice
/// under the client's retries (a version created twice, a chunk stored twice).
fn hop_metrics(c: &loadgen::faulthop::HopCounts, exact: bool, m: &mut Metrics) {
    let put = |m: &mut Metrics, key: String, v: f64| {
        if exact {
            m.exact(key, v, "count");
        } else {
            m.resource(key, v, "count");
        }
    };
    for (k, v) in &c.injected {
        put(m, format!("faults.injected.{k}"), *v as f64);
    }
    for (k, v) in &c.requests {
        let key = format!("faults.requests.{k}");
        if k == "changes" {
            // The uploader's own long poll: how often it is answered depends on timing.
            m.resource(key, *v as f64, "count");
        } else {
            put(m, key, *v as f64);
        }
    }
    let twice = |route: &str| c.created_twice.get(route).copied().unwrap_or(0) as f64;
    put(m, "faults.duplicate_versions".into(), twice("post-version"));
    put(m, "faults.chunks_stored_twice".into(), twice("put-chunk"));
    let files = m.map.get("cold_push.files").map(|x| x.value);
    let reqs = m.map.get("cold_push.requests").map(|x| x.value);
    if let (Some(f), Some(r)) = (files, reqs)
        && f > 0.0
    {
        let per = round6(r / f);
        if exact {
            m.exact("faults.push_requests_per_file", per, "requests/file");
        } else {
            m.resource("faults.push_requests_per_file", per, "requests/file");
        }
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The setup token the server wrote into its data dir at first start.
fn read_setup_token(data_dir: &Path) -> anyhow::Result<String> {
    let p = data_dir.join("setup-token");
    let t = std::fs::read_to_string(&p)
        .with_context(|| format!("reading the server's setup token {}", p.display()))?;
    Ok(t.trim().to_owned())
}

/// Deltas of the server's durability counters, named without the `obsync_` prefix:
/// `fsyncs.journal`, `journal_flushes`, `journal_records`, ...
fn counter_delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (k, v) in after {
        let Some(rest) = k.strip_prefix("obsync_") else {
            continue;
        };
        if rest.starts_with("requests_total") || !rest.contains("_total") {
            continue; // per-request counts are measured client-side; gauges are not deltas
        }
        let (name, labels) = match rest.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (rest, ""),
        };
        let mut key = name.trim_end_matches("_total").to_owned();
        for l in labels.split(',').filter(|l| !l.is_empty()) {
            if let Some((_, val)) = l.split_once('=') {
                key.push('.');
                key.push_str(val.trim_matches('"'));
            }
        }
        out.insert(key, v - before.get(k).copied().unwrap_or(0.0));
    }
    out
}

#[derive(Default)]
struct Echo {
    answers: u64,
    changes: u64,
}

/// Pushes the vault while the same device holds its long poll, as the real plugin does, and
/// counts the answers it gets for its own posts (obsync's speed report: a quarter of the
/// uploading device's requests were its own echo).
async fn push_with_echo(
    a: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> anyhow::Result<(TransferReport, Echo)> {
    let (tx, mut rx) = tokio::sync::watch::channel(None::<u64>);
    let poller = a.clone();
    let me = a.device_id().to_owned();
    let echo = tokio::spawn(async move {
        let mut e = Echo::default();
        let mut since = 0u64;
        let mut deadline: Option<Instant> = None;
        loop {
            if let Some(last) = *rx.borrow_and_update() {
                if since >= last {
                    break;
                }
                let d = *deadline.get_or_insert_with(|| Instant::now() + Duration::from_secs(30));
                if Instant::now() > d {
                    break;
                }
            }
            let r = tokio::select! {
                r = loadgen::wait_changes(&poller, since, 1) => r,
                _ = rx.changed() => continue,
            };
            let Ok(r) = r else { break };
            let own = r.changes.iter().filter(|c| c.device_id == me).count() as u64;
            if own > 0 {
                e.answers += 1;
                e.changes += own;
            }
            since = since.max(r.seq);
        }
        e
    });
    let pushed = loadgen::push_vault(a, dir, opts).await;
    let last = pushed.as_ref().map(|r| r.last_seq).unwrap_or(0);
    let _ = tx.send(Some(last));
    let echo = echo.await.unwrap_or_default();
    Ok((pushed.context("cold push")?, echo))
}

/// A edits one note while B holds a long poll; the time from the edit until B has the new bytes
/// on disk, `rounds` times (obsync's speed report: 20 rounds, p50/p95). The phase's requests are
/// A's pushes.
async fn edit_propagation(
    a: &Device,
    b: &Device,
    job: &EditJob<'_>,
    mut b_seq: u64,
) -> anyhow::Result<(u64, EditReport)> {
    let edit = EditFile::prepare(job.plan, job.rel, &edit_dir(job.sample_dir))?;
    let mut lat = Vec::with_capacity(job.rounds);
    let mut requests = 0u64;
    for round in 0..job.rounds {
        let r = edit_round(a, b, &edit, job.pull_dir, round, b_seq).await?;
        lat.push(r.latency_ms);
        requests += r.requests;
        b_seq = r.b_seq;
    }
    Ok((
        b_seq,
        EditReport {
            latencies_ms: lat,
            requests,
        },
    ))
}

/// The note an edit-propagation phase edits: A's copy of it, outside the vault.
pub(crate) struct EditFile {
    rel: String,
    dir: PathBuf,
    src: PathBuf,
    file_id: String,
}

impl EditFile {
    /// Copies the vault's `rel` into `dir` (A's editable copy).
    pub(crate) fn prepare(plan: &SamplePlan, rel: &str, dir: &Path) -> anyhow::Result<EditFile> {
        let src = dir.join(rel);
        std::fs::create_dir_all(src.parent().unwrap_or(dir))?;
        std::fs::copy(plan.vault_dir.join(rel), &src)
            .with_context(|| format!("copying {rel} for editing"))?;
        Ok(EditFile {
            rel: rel.to_owned(),
            dir: dir.to_owned(),
            src,
            file_id: loadgen::file_id_for(rel),
        })
    }
}

/// One round of edit propagation.
pub(crate) struct EditRound {
    /// From A's edit until B has the new bytes on disk.
    pub latency_ms: f64,
    /// B's feed position after the round.
    pub b_seq: u64,
    /// A's push requests.
    pub requests: u64,
}

/// One round: B parks a long poll, A appends a line to the note and pushes it, and the round
/// ends when B has fetched the new version into `pull_dir`, checked equal to A's copy.
pub(crate) async fn edit_round(
    a: &Device,
    b: &Device,
    edit: &EditFile,
    pull_dir: &Path,
    round: usize,
    b_seq: u64,
) -> anyhow::Result<EditRound> {
    let rel = edit.rel.as_str();
    let (bd, dir, fid) = (b.clone(), pull_dir.to_path_buf(), edit.file_id.clone());
    let waiter = tokio::spawn(async move {
        let mut since = b_seq;
        let give_up = Instant::now() + Duration::from_secs(30);
        while Instant::now() < give_up {
            let r = loadgen::wait_changes(&bd, since, 10).await?;
            for c in &r.changes {
                if c.file_id == fid {
                    loadgen::fetch_and_write(&bd, &dir, c).await?;
                    return Ok::<_, loadgen::LoadError>(Some((Instant::now(), r.seq)));
                }
            }
            since = since.max(r.seq);
        }
        Ok(None)
    });
    // Let B's poll be parked on the server before A writes.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t0 = Instant::now();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&edit.src)?;
        writeln!(f, "\nedit round {round}: vaultbench edit propagation")?;
    }
    let pushed = loadgen::push_file(a, &edit.dir, rel)
        .await
        .context("edit propagation: push on A")?;
    let got = waiter.await.context("edit propagation: B's waiter")??;
    let Some((done, seq)) = got else {
        bail!("edit propagation: B never saw round {round}'s edit within 30 s")
    };
    if std::fs::read(pull_dir.join(rel))? != std::fs::read(&edit.src)? {
        bail!("edit propagation: B's copy of {rel} differs from A's after round {round}");
    }
    Ok(EditRound {
        latency_ms: ms(done - t0),
        b_seq: seq.max(pushed.seq),
        requests: pushed.requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names() {
        let before: BTreeMap<String, f64> =
            [("obsync_fsyncs_total{kind=\"journal\"}".to_owned(), 2.0)]
                .into_iter()
                .collect();
        let after: BTreeMap<String, f64> = [
            ("obsync_fsyncs_total{kind=\"journal\"}".to_owned(), 7.0),
            ("obsync_journal_flushes_total".to_owned(), 3.0),
            (
                "obsync_requests_total{route=\"x\",status=\"200\"}".to_owned(),
                9.0,
            ),
            ("obsync_head_seq".to_owned(), 4.0),
        ]
        .into_iter()
        .collect();
        let d = counter_delta(&before, &after);
        assert_eq!(d.get("fsyncs.journal"), Some(&5.0));
        assert_eq!(d.get("journal_flushes"), Some(&3.0));
        assert_eq!(d.len(), 2);
    }
}

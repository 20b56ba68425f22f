//! The protocol seam: what the scenario's phases ask of a sync client, whatever protocol it
//! speaks. `phases::drive` runs the phase flow once over a [`SyncClient`]; each protocol's
//! client (in its folder under `sample::protocols`) implements it. Keys the flow writes keep
//! one name across
//! protocols where the meaning carries over (`cold_push.wall_ms`, `edit.p50_ms`); a client
//! adds the keys only its protocol has (`cold_push.own_echo.answers`, `edit.polls`).
//!
//! Also the small vault helpers both clients and the driver use (the note edited, the folder
//! renamed), so every protocol picks the same ones.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use loadgen::routeload::{RouteKey, RouteLoadConfig, RouteLoadReport};
use loadgen::{RouteStats, TransferReport};

use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::Server;

/// What the edit-propagation phase hands the client.
pub struct EditJob<'a> {
    pub plan: &'a SamplePlan,
    /// The note edited (the vault's first note, [`first_note`]).
    pub rel: &'a str,
    pub sample_dir: &'a Path,
    /// B's copy of the vault (the cold pull's target).
    pub pull_dir: &'a Path,
    pub rounds: usize,
}

/// What the edit-propagation phase measured.
pub struct EditReport {
    /// Per round, from A's edit until B has the new bytes on disk, in ms.
    pub latencies_ms: Vec<f64>,
    /// Requests of the phase that its server cost is divided by.
    pub requests: u64,
}

/// How long B waits for one edit before the sample fails.
pub const EDIT_DEADLINE: Duration = Duration::from_secs(30);

/// The server-cost window a client opens and closes around the measured part of a phase it
/// runs in steps of its own (the phase flow supplies it over its boundary).
pub trait CostWindow {
    /// The measured part starts.
    fn begin(&mut self) -> anyhow::Result<()>;
    /// It ended after `requests` requests moving `files` files; its keys go under `scope`.
    fn end(
        &mut self,
        scope: &str,
        requests: u64,
        files: u64,
        m: &mut Metrics,
    ) -> anyhow::Result<()>;
}

/// What a `tus_resume` phase is given: the plan, the running server, the uploads to cut and
/// the sample's scratch folder.
pub struct TusResumeJob<'a> {
    pub plan: &'a SamplePlan,
    pub server: &'a Server,
    pub cuts: usize,
    pub sample_dir: &'a Path,
}

/// What the cold push hands the client: the vault, the files in flight and how often a
/// throughput checkpoint is taken.
pub struct PushJob<'a> {
    pub vault: &'a Path,
    pub in_flight: usize,
    pub checkpoint_every: usize,
}

/// One closed-loop route-load step: `route` at `in_flight` for at most `duration` or
/// `max_requests`.
pub struct RouteStep<'a> {
    pub route: &'a str,
    pub in_flight: usize,
    pub duration: Duration,
    pub max_requests: u64,
    pub seed: u64,
}

impl RouteStep<'_> {
    /// The step's config for its route, found by name among `all` (`what` names the kind of
    /// route in the error: `S3 route`).
    pub fn config<R: RouteKey>(&self, all: &[R], what: &str) -> anyhow::Result<RouteLoadConfig<R>> {
        let route = all
            .iter()
            .copied()
            .find(|r| r.key() == self.route)
            .with_context(|| format!("route load: unknown {what} {:?}", self.route))?;
        Ok(RouteLoadConfig {
            route,
            mode: loadgen::Mode::Closed {
                in_flight: self.in_flight,
            },
            duration: self.duration,
            max_requests: self.max_requests,
            seed: self.seed,
        })
    }
}

/// One route-load step's result, whatever the protocol.
pub struct StepReport {
    pub requests: u64,
    pub throughput_per_s: f64,
    pub stats: RouteStats,
}

impl StepReport {
    /// The figures of a route load's report.
    pub fn of<R, C>(r: RouteLoadReport<R, C>) -> StepReport {
        StepReport {
            requests: r.requests,
            throughput_per_s: r.throughput_per_s,
            stats: r.stats,
        }
    }
}

/// A sync client the phase flow drives: device A writes, device B reads (two enrolled
/// devices for the signed protocol, two clients of the same server otherwise). Methods write their
/// protocol's own keys into `m`; the driver writes the shared ones from what they return.
// Driven through a generic on one runtime thread (`block_on`), never boxed or sent between
// threads, so the futures need no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait SyncClient {
    /// The protocol's generator-side facts: its name and its routes.
    fn spec(&self) -> &'static loadgen::protocols::Spec;

    /// The protocol's name, for messages (its spec's name).
    fn protocol(&self) -> &'static str {
        self.spec().name
    }

    /// Route names the route load knows for this protocol.
    fn routes(&self) -> Vec<&'static str> {
        (self.spec().routes)()
    }

    /// Whether the client counts the requests it sends (a client the harness only runs,
    /// such as the scenario's own, cannot): without, the keys counting requests are not
    /// written.
    fn counts_requests(&self) -> bool {
        true
    }

    /// Device B's copy of the vault: what the cold pull fills and the driver checks.
    fn pull_dir(&self, sample_dir: &Path) -> PathBuf {
        sample_dir.join("pull-b")
    }

    /// A phase starts: read the server's own counters, where the protocol has them.
    async fn phase_started(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    /// The phase begun last ended (after its cost window closed): its server-counter keys
    /// under `phase`; `files` is what a push moved (counters per file).
    async fn phase_ended(
        &mut self,
        _phase: &str,
        _files: Option<u64>,
        _m: &mut Metrics,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// Cold push: A uploads the whole vault under `job.vault` with `job.in_flight` files at
    /// once.
    async fn push(&mut self, job: PushJob<'_>, m: &mut Metrics) -> anyhow::Result<TransferReport>;

    /// Keys of a push or pull report that only this protocol has (`chunks_transferred`).
    fn transfer_keys(&self, _phase: &str, _r: &TransferReport, _m: &mut Metrics) {}

    /// Cold pull: B downloads everything into `dir` (the driver checks the digest).
    async fn pull(&mut self, dir: &Path) -> anyhow::Result<TransferReport>;

    /// Idle resync: B looks for changes against its copy under `dir` and should find none.
    async fn resync(&mut self, dir: &Path) -> anyhow::Result<TransferReport>;

    /// Edit propagation: A edits `job.rel` `job.rounds` times, B picks each edit up.
    async fn edit_propagation(
        &mut self,
        job: &EditJob<'_>,
        m: &mut Metrics,
    ) -> anyhow::Result<EditReport>;

    /// A renames folder `from` to `to`; returns the requests it sent.
    async fn rename(&mut self, from: &str, to: &str, m: &mut Metrics) -> anyhow::Result<u64>;

    /// B picks the rename up into its copy under `pull_dir`; returns the requests it sent.
    /// The driver then checks B's copy shows the new folder and no file in the old one.
    async fn propagate_rename(
        &mut self,
        from: &str,
        to: &str,
        pull_dir: &Path,
    ) -> anyhow::Result<u64>;

    /// The `tus_resume` phase (uploads cut part-way by a seeded hop, resumed, read back past
    /// it), for a protocol whose client builds it; the others refuse here. The client opens
    /// and closes `window` around the cut uploads (not around its set-up or the read-back).
    async fn tus_resume(
        &mut self,
        _job: TusResumeJob<'_>,
        _window: &mut dyn CostWindow,
        _m: &mut Metrics,
    ) -> anyhow::Result<()> {
        anyhow::bail!(
            "tus_resume: not built for {} targets (it checks tus's resume after a cut)",
            self.protocol()
        )
    }

    /// The crash phase (kill the target mid-push, restart, check), for a protocol whose client
    /// builds it; the others refuse here.
    #[allow(clippy::too_many_arguments)]
    async fn crash(
        &mut self,
        _plan: &SamplePlan,
        _server: &mut Server,
        _how: crate::sample::crash::How,
        _sample_dir: &Path,
        _m: &mut Metrics,
    ) -> anyhow::Result<()> {
        anyhow::bail!(
            "crash phases are not built for {} targets (its client has no crash flow)",
            self.protocol()
        )
    }

    /// `n` signed devices for a long-polling step (`long_poll_fanout`, `concurrent_push`),
    /// beyond the scenario's own: paired on first need and kept for the next step, for a
    /// protocol with a long-poll feed and signed devices; the others refuse here.
    async fn long_poll_devices(&mut self, _n: usize) -> anyhow::Result<Vec<loadgen::Device>> {
        anyhow::bail!(
            "long-polling steps are not built for {} targets (no long-poll feed of signed devices)",
            self.protocol()
        )
    }

    /// One closed-loop route-load step. The driver has checked its route is one of
    /// [`SyncClient::routes`].
    async fn route_step(&mut self, step: RouteStep<'_>) -> anyhow::Result<StepReport>;

    /// After the last phase: keys of the whole run (the fault hop's counts).
    fn finish(&mut self, _m: &mut Metrics) {}
}

/// What B's poll for an edit saw: the listings it made, the requests they took, and the
/// note's size as listed, where the listing gives one.
pub struct Polled {
    pub polls: u64,
    pub requests: u64,
    pub size: Option<u64>,
}

/// A protocol whose B learns of an edit only by polling a listing at the scenario's interval
/// (it has no change feed): the requests [`polled_edit`] makes through it.
#[allow(async_fn_in_trait)]
pub trait PolledEdit {
    /// The note's entry as listed, which the poll compares each listing with.
    type Listed: Send + 'static;

    /// B's listing of the note before an edit.
    async fn listed(&self, rec: &loadgen::Recorder, rel: &str) -> anyhow::Result<Self::Listed>;

    /// B's poller, started before A writes: it lists the note's folder every `interval` until
    /// the note differs from `before` and lists `want` bytes, giving up at `deadline`.
    fn poll(
        &self,
        rel: &str,
        before: Self::Listed,
        want: u64,
        interval: Duration,
        deadline: std::time::Instant,
    ) -> tokio::task::JoinHandle<anyhow::Result<Polled>>;

    /// A writes the note.
    async fn write(
        &self,
        rec: &loadgen::Recorder,
        rel: &str,
        body: bytes::Bytes,
    ) -> anyhow::Result<()>;

    /// B reads the note (`size` as the poll listed it).
    async fn read(
        &self,
        rec: &loadgen::Recorder,
        rel: &str,
        size: Option<u64>,
    ) -> anyhow::Result<bytes::Bytes>;
}

/// The end of a walked protocol's rename propagation: B's walk must show the folder under
/// its new name and not its old one (`seen`), then B moves its own copy.
pub fn move_walked_copy(seen: bool, from: &str, to: &str, pull_dir: &Path) -> anyhow::Result<()> {
    if !seen {
        anyhow::bail!("folder rename: B's walk does not show {from:?} renamed to {to:?}");
    }
    std::fs::rename(pull_dir.join(from), pull_dir.join(to))
        .with_context(|| format!("folder rename: moving B's copy of {from}"))
}

/// [`polled_edit`], and the keys every polled protocol states: the poll interval that bounds
/// the delay (it cannot resolve below it) and the polls made.
pub async fn polled_edit_phase<P: PolledEdit>(
    p: &P,
    job: &EditJob<'_>,
    poll_ms: u64,
    m: &mut Metrics,
) -> anyhow::Result<EditReport> {
    let (r, polls) = polled_edit(p, job, poll_ms).await?;
    m.exact("edit.poll_interval_ms", poll_ms as f64, "ms");
    m.timing(
        "edit.polls",
        polls as f64,
        "count",
        reports::schema::Better::Lower,
    );
    Ok(r)
}

/// Edit propagation by polling: A edits the note (appending a line, so its size changes: not
/// every server sends an ETag, and last-modified has one-second resolution); B polls the
/// note's folder every `poll_ms` until the listing shows the change, then reads the note. The
/// delay is from A's write to B's copy on disk. Returns the report (its requests: every
/// listing, write, read and poll) and the polls.
pub async fn polled_edit<P: PolledEdit>(
    p: &P,
    job: &EditJob<'_>,
    poll_ms: u64,
) -> anyhow::Result<(EditReport, u64)> {
    let rel = job.rel;
    let mut body = std::fs::read(job.plan.vault_dir.join(rel))
        .with_context(|| format!("reading {rel} for editing"))?;
    let interval = Duration::from_millis(poll_ms);
    let rec = loadgen::Recorder::new(false);
    let (mut lat, mut polls, mut poll_requests) = (Vec::with_capacity(job.rounds), 0u64, 0u64);
    for round in 0..job.rounds {
        let before = p.listed(&rec, rel).await?;
        body.extend_from_slice(
            format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
        );
        let start = std::time::Instant::now();
        let waiter = p.poll(
            rel,
            before,
            body.len() as u64,
            interval,
            start + EDIT_DEADLINE,
        );
        let t0 = std::time::Instant::now();
        p.write(&rec, rel, body.clone().into()).await?;
        let seen = waiter
            .await
            .context("edit propagation: B's poller")?
            .with_context(|| format!("edit propagation: round {round}"))?;
        polls += seen.polls;
        poll_requests += seen.requests;
        let got = p.read(&rec, rel, seen.size).await?;
        std::fs::write(job.pull_dir.join(rel), &got)
            .with_context(|| format!("edit propagation: writing B's copy of {rel}"))?;
        lat.push(crate::sample::plan::ms(t0.elapsed()));
        if got.as_ref() != body.as_slice() {
            anyhow::bail!(
                "edit propagation: B's copy of {rel} differs from A's after round {round}"
            );
        }
    }
    let report = EditReport {
        latencies_ms: lat,
        requests: rec.snapshot().requests() + poll_requests,
    };
    Ok((report, polls))
}

/// A route load's failed requests by status (`3 x 503, 1 x io`), `None` when none failed.
pub fn failures(stats: &RouteStats) -> Option<String> {
    if stats.errors() == 0 {
        return None;
    }
    let bad: Vec<String> = stats
        .status
        .iter()
        .filter(|(k, _)| !k.starts_with('2'))
        .map(|(k, v)| format!("{v} x {k}"))
        .collect();
    Some(bad.join(", "))
}

/// Persists a histogram through the contract's codec (base64 of V2 + DEFLATE).
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<String> {
    contract::histogram::encode(h)
}

/// Nearest-rank percentile of sorted values (p95 of 20 is the 19th).
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// The first non-empty Markdown note in sorted order, dot-folders skipped (deterministic for
/// a vault).
pub fn first_note(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut stack = vec![dir.to_path_buf()];
    let mut best: Option<String> = None;
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)?.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
            if rel.starts_with('.') {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if rel.ends_with(".md")
                && std::fs::metadata(&p)?.len() > 0
                && best.as_ref().is_none_or(|b| rel < *b)
            {
                best = Some(rel);
            }
        }
    }
    Ok(best)
}

/// The top-level folder with the most files under it (ties: the first by name), dot-folders
/// skipped.
pub fn largest_folder(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut best: Option<(u64, String)> = None;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type()?.is_dir() || name.starts_with('.') {
            continue;
        }
        let n = count_files(&e.path())?;
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, name));
        }
    }
    Ok(best.map(|(_, n)| n))
}

/// Files under `d`, recursively.
pub fn count_files(d: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(d)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            n += count_files(&e.path())?;
        } else {
            n += 1;
        }
    }
    Ok(n)
}

/// The edited copy of a note lives here on A's side.
pub fn edit_dir(sample_dir: &Path) -> PathBuf {
    sample_dir.join("edit-a")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_the_report() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.95), 19.0); // "p95: the 19th of 20"
        assert_eq!(nearest_rank(&v, 0.50), 10.0);
    }

    #[test]
    fn the_note_and_the_folder_are_the_same_for_every_protocol() {
        let d = tempfile::tempdir().unwrap();
        for (p, body) in [
            ("b/one.md", "x"),
            ("b/two.md", "y"),
            ("a/z.md", "z"),
            ("a/empty.md", ""),
            (".obsidian/a.md", "cfg"),
            (".obsidian/b.md", "cfg"),
            (".obsidian/c.md", "cfg"),
        ] {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, body).unwrap();
        }
        assert_eq!(first_note(d.path()).unwrap().as_deref(), Some("a/z.md"));
        // Ties go to the first name; dot-folders never count.
        assert_eq!(largest_folder(d.path()).unwrap().as_deref(), Some("a"));
        assert_eq!(count_files(&d.path().join(".obsidian")).unwrap(), 3);
    }
}

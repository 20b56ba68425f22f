//! The persisted formats of a recording, owned here once: a sample's result, a baseline, its
//! provenance sidecar, and the binding digest. Every document carries `kind` and
//! `format_version`, checked by [`crate::format::decode`].
//!
//! A baseline is a recording, not a config file: the sidecar keeps every raw series and a
//! snapshot of every exact-class key, and a digest binds both files. `verify` recomputes the
//! medians and the digest, so a hand-edited value fails with its key named. The digest is a
//! coherence check, not a signature: it stops quiet edits, not a forger who re-runs the tool.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub use crate::format::FORMAT_VERSION;

pub const KIND_SAMPLE: &str = "vaultbench.sample";
pub const KIND_BASELINE: &str = "vaultbench.baseline";
pub const KIND_PROVENANCE: &str = "vaultbench.provenance";
pub const KIND_AB: &str = "vaultbench.ab";

/// How a metric behaves under load: it decides how two recordings of it are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricClass {
    /// Deterministic counts for a build + seed: requests, bytes, files, fsyncs. Load-independent.
    Exact,
    /// Latencies, phase wall times, throughput.
    Timing,
    /// Server CPU, RSS, syscalls, I/O bytes.
    Resource,
    /// Instructions retired by the target, per phase and per request, counted under an
    /// instruction counter (callgrind or a hardware counter) in a separate cost sample, never
    /// in a timed one: the counter slows the target by an order of magnitude. Nearly
    /// noise-free, but not exact (allocator and scheduler paths move it by a little), so
    /// `compare` and `ab` treat it as they treat `resource`: a median with a threshold.
    Cost,
}

impl MetricClass {
    /// Every class, in declaration order.
    pub const ALL: [MetricClass; 4] = [
        MetricClass::Exact,
        MetricClass::Timing,
        MetricClass::Resource,
        MetricClass::Cost,
    ];

    /// The persisted spelling (`exact`, `timing`, `resource`, `cost`).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricClass::Exact => "exact",
            MetricClass::Timing => "timing",
            MetricClass::Resource => "resource",
            MetricClass::Cost => "cost",
        }
    }
}

impl std::fmt::Display for MetricClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which direction is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// One metric's value with its meaning attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub value: f64,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
}

impl Metric {
    pub fn new(value: f64, unit: &str, class: MetricClass, better: Better) -> Metric {
        Metric {
            value,
            unit: unit.to_owned(),
            class,
            better,
        }
    }
    pub fn exact(value: f64, unit: &str) -> Metric {
        Metric::new(value, unit, MetricClass::Exact, Better::Lower)
    }
    pub fn timing(value: f64, unit: &str, better: Better) -> Metric {
        Metric::new(value, unit, MetricClass::Timing, better)
    }
    pub fn resource(value: f64, unit: &str) -> Metric {
        Metric::new(value, unit, MetricClass::Resource, Better::Lower)
    }
    /// An instruction count of the target (unit `instructions`); lower is better.
    pub fn cost(value: f64, unit: &str) -> Metric {
        Metric::new(value, unit, MetricClass::Cost, Better::Lower)
    }
}

/// One calibration reading (every channel, milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChannelReading {
    pub cpu_ms: f64,
    pub io_ms: f64,
    /// The round-trip channel (absent from sidecars recorded before it existed; left out when
    /// absent, so their binding digest still verifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
}

/// In-sample contention over one sample's measured window, read from `/proc` (per-task
/// schedstat, PSI, `/proc/stat`): what the calibration kernels beside the sample cannot see.
/// Every figure is a share; `None` when this kernel does not offer the counter (the gate then
/// says so and judges the kernels alone).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Contention {
    /// Length of the measured window (first phase start to last phase end), ms.
    pub window_ms: f64,
    /// CPU time of the server's whole process tree in the window, ms.
    pub server_cpu_ms: f64,
    /// CPU time of the generator's threads (the sample process) in the window, ms.
    pub generator_cpu_ms: f64,
    /// Run-queue delay of the server's threads / their CPU time.
    pub server_run_delay: Option<f64>,
    /// Run-queue delay of the generator's threads / their CPU time.
    pub generator_run_delay: Option<f64>,
    /// PSI cpu `some` stall / window.
    pub psi_cpu_some: Option<f64>,
    /// PSI io `some` stall / window.
    pub psi_io_some: Option<f64>,
    /// Steal / all CPU time of the system.
    pub steal: Option<f64>,
    /// CPU time of every process outside the measured trees (the machine's busy time minus
    /// the server's and the generator's) / all CPU time of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_cpu: Option<f64>,
    /// Storage bytes read and written by every process outside the measured trees, MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_io_mib_s: Option<f64>,
    /// Processes outside the trees whose I/O could not be read (another user's, without
    /// privilege): the foreign I/O figure leaves them out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub foreign_unreadable: u64,
    /// The counters this kernel did not offer, each named with why.
    #[serde(default)]
    pub unavailable: Vec<String>,
    /// CPUs the server's process tree was pinned to (empty: not pinned).
    #[serde(default)]
    pub server_cpus: Vec<usize>,
    /// CPUs the generator was pinned to (empty: not pinned).
    #[serde(default)]
    pub generator_cpus: Vec<usize>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Contention {
    /// The target's parallelism: how many CPUs its process tree used on average over the
    /// window (its own demand, reported beside the gate, never judged).
    pub fn server_parallelism(&self) -> Option<f64> {
        (self.window_ms > 0.0).then(|| self.server_cpu_ms / self.window_ms)
    }
}

/// One figure the gate judged: a value against its bound, and the value as a share of the
/// allowance (the gate refuses above 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateFigure {
    /// Channel name (`cpu_ms`, `server_run_delay`, ...).
    pub channel: String,
    /// What was measured (`share`, `over_pooled_median`, ...).
    pub figure: String,
    pub value: f64,
    pub bound: f64,
    /// value / bound (for ratios >= 1: (value - 1) / (bound - 1)).
    pub share: f64,
}

/// The per-sample gate's judgement of one A/B sample: its in-sample channels, and each of its
/// kernel readings against the run's pooled readings and this machine's reference.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SampleVerdict {
    pub accepted: bool,
    pub figures: Vec<GateFigure>,
    /// Each bound a figure broke, e.g. `psi_cpu_some 0.62 > 0.40`.
    pub failures: Vec<String>,
    /// What could not be judged and why (no PSI, no pool yet, no reference).
    pub notes: Vec<String>,
}

/// What one sample subprocess prints: one JSON document on stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleResult {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub index: u32,
    pub warmup: bool,
    /// The sample subprocess's own pid (each sample is a fresh process).
    pub pid: u32,
    /// The server process's pid (each sample starts a fresh server).
    pub server_pid: u32,
    pub vault_digest: String,
    pub metrics: BTreeMap<String, Metric>,
    /// Readings before and after the measurement, in this process.
    pub calibration: Vec<ChannelReading>,
    /// In-sample contention over the measured window (absent from older samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
    /// Empty when the sample succeeded; otherwise each cause, named.
    pub errors: Vec<String>,
    /// Latency histograms per key, HdrHistogram V2 deflate + base64, for reports.
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    /// A paired sample (`ab --paired`): A's keys are `metrics`, B's are here with the pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<PairedSample>,
    /// A cost sample's callgrind profiles per part (the head of each, not the whole).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: crate::profile::Profiles,
    /// A cost sample's blocked time per syscall per part, from its traced run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked: crate::profile::Blocked,
}

impl SampleResult {
    /// Sample `index` of `scenario` (process `pid`, server `server_pid`, the vault
    /// `vault_digest`) before anything is measured: no metrics, readings, errors or profiles.
    pub fn started(
        scenario: String,
        index: u32,
        warmup: bool,
        (pid, server_pid): (u32, u32),
        vault_digest: String,
    ) -> SampleResult {
        SampleResult {
            kind: KIND_SAMPLE.into(),
            format_version: FORMAT_VERSION,
            scenario,
            index,
            warmup,
            pid,
            server_pid,
            vault_digest,
            metrics: BTreeMap::new(),
            calibration: Vec::new(),
            contention: None,
            errors: Vec::new(),
            histograms: BTreeMap::new(),
            paired: None,
            profiles: BTreeMap::new(),
            blocked: BTreeMap::new(),
        }
    }
}

/// The second arm of a paired sample: B's server, B's keys, and the pairs of every key that
/// was measured pair by pair (both servers up at once, the generator alternating between them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedSample {
    pub b_server_pid: u32,
    /// Whether A's server was started (and A's half of the first pair ran) first.
    pub a_first: bool,
    pub b_metrics: BTreeMap<String, Metric>,
    /// Per key, its pairs in time order.
    pub pairs: BTreeMap<String, PairSeries>,
    /// Phases of the scenario that the paired mode does not run (their keys are absent).
    #[serde(default)]
    pub skipped_phases: Vec<String>,
}

/// One key's pairs: A's and B's value of each pair, in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairSeries {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    /// How a block of consecutive pairs gives one estimate.
    pub aggregate: PairAggregate,
    /// Requests per connection and arm in one pair (1: request by request; a file for pushes).
    pub slice: u64,
}

/// How a block of pairs aggregates into one log ratio B/A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairAggregate {
    /// ln(median B / median A): for a latency median (`…p50_us`).
    Median,
    /// ln(sum B / sum A): for a wall time made of the pairs.
    Sum,
    /// The median of the pairs' own log ratios ln(B / A): for a wall time made of pairs of
    /// one item each (a file of a paired push or pull), where one flush stalled by the disk
    /// lands on one arm's file and would dominate a sum of ten. Estimates the change of a
    /// typical item.
    PairMedian,
}

/// `baselines/<class>/<scenario>.json`: the medians.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub seed: u64,
    pub samples: u32,
    pub metrics: BTreeMap<String, Metric>,
}

/// Who and what built the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetIdentity {
    /// The command line template as given (`{addr}`, `{data}` placeholders).
    pub command: String,
    pub executable: String,
    pub sha256: String,
    pub version: String,
    /// SHA-256 of every existing file among the target's arguments (`srv.py` in
    /// `python3 srv.py`) and of every file template it writes into its data dir
    /// (`{data}/httpd.conf`); empty for a bare executable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// Why the identity has no version: the version probe could not run, hung or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A `git:REV` target: the revision the harness built, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitBuild>,
}

/// How a `git:REV` target was built: the commit, its tree, the build command, the toolchain
/// and the build log's digest. A build is cached under the digest of tree, command and
/// toolchain, so two results with the same three ran the same build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitBuild {
    /// The revision as given (`v1.1.4`, `HEAD`, `WORKTREE`).
    pub rev: String,
    /// The commit it named (for `WORKTREE`: `HEAD`'s).
    pub commit: String,
    /// The commit's subject line.
    pub subject: String,
    /// The commit's tree hash.
    pub tree: String,
    /// The build command, run with `sh -c` in the revision's worktree (empty: none).
    pub build_command: String,
    /// `rustc -vV` where the worktree has a `Cargo.toml`, else the build command's own text.
    pub toolchain: String,
    /// SHA-256 of the build's log (stdout and stderr together).
    pub build_log_sha256: String,
    /// The build cache's key (SHA-256 of tree, command and toolchain).
    pub cache_key: String,
    /// `git:WORKTREE` with uncommitted changes: measured as it is on disk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dirty: bool,
    /// For a dirty worktree: SHA-256 of `git diff HEAD` and the untracked files' names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_sha256: Option<String>,
}

/// The harness that made the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HarnessIdentity {
    pub version: String,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub toolchain: Option<String>,
}

/// One sample as the sidecar remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleMeta {
    pub index: u32,
    pub warmup: bool,
    pub pid: u32,
    pub server_pid: u32,
    pub ok: bool,
    pub errors: Vec<String>,
    pub calibration: Vec<ChannelReading>,
    /// In-sample contention over the measured window (absent from older sidecars; left out
    /// when absent, so an older sidecar's binding digest still verifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
    /// Why earlier attempts at this sample were refused by the per-sample gate and run again
    /// (absent when the first attempt was kept, and from older sidecars).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_because: Vec<String>,
}

/// Recording attempts, including refused ones, since the previous accepted recording here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempts {
    pub attempted: u32,
    pub refused: u32,
    pub failed: u32,
}

/// `baselines/<class>/<scenario>.provenance.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub kind: String,
    pub format_version: u32,
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    pub vault_digest: String,
    /// Wall-clock time of the recording (RFC 3339, UTC): metadata only.
    pub recorded_at: String,
    pub harness: HarnessIdentity,
    pub target: TargetIdentity,
    /// Machine fingerprint (filled by `calibration`).
    pub machine: crate::machine::Fingerprint,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    /// Gate thresholds and the verdict with each channel's statistics.
    pub gate: Option<crate::gate::Gate>,
    pub attempts: Attempts,
    pub samples: Vec<SampleMeta>,
    /// Every counted sample's value per key, in sample order.
    pub raw: BTreeMap<String, Vec<f64>>,
    /// Every exact-class key at record time.
    pub exact_snapshot: BTreeMap<String, f64>,
    /// Per-key latency histograms of the median-nearest sample (base64 HdrHistogram V2 deflate).
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    /// A `--cost` recording's cost sample (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostProvenance>,
    /// A `--vault DIR` recording: the user's vault as carried (no names, no content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_vault: Option<UserVault>,
    /// SHA-256 binding the baseline's canonical JSON and this sidecar (without this field).
    pub digest: String,
}

/// A user's own vault (`--vault DIR`) as a run carried it: the manifest digest of the files
/// it pushed, their count and bytes, and how many entries the protocol could not carry. Never
/// a name or content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserVault {
    pub manifest_digest: String,
    pub files: u64,
    pub bytes: u64,
    pub skipped: u64,
}

/// The cost sample behind a recording's `cost` keys and syscall counts: which tools counted
/// (e.g. `valgrind-callgrind 3.19.0`, `strace 6.1`) and every value the sample gave, its
/// strace run's own `/metrics` fsync counters included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostProvenance {
    pub instructions_source: String,
    pub syscalls_source: String,
    pub metrics: BTreeMap<String, f64>,
    /// The top functions per part, by self and inclusive instructions (absent from sidecars
    /// recorded before it existed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub functions: crate::profile::Profiles,
    /// Blocked time per syscall and per-thread scheduler figures per part, from the traced
    /// run (never timing keys: the tracer slows every call it sees).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked: crate::profile::Blocked,
}

/// Median of a series (mean of the middle two for an even count). `None` when empty or NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Canonical bytes of a document: serde_json with sorted keys (no `preserve_order`), compact.
pub fn canonical_json<T: Serialize>(doc: &T) -> Vec<u8> {
    // Round-trip through Value so every map is a sorted BTreeMap.
    let v = serde_json::to_value(doc).expect("schema types always serialise");
    serde_json::to_vec(&v).expect("a Value always serialises")
}

/// The digest binding baseline and sidecar (the sidecar's own `digest` field excluded).
pub fn binding_digest(baseline: &Baseline, provenance: &Provenance) -> String {
    let mut p = provenance.clone();
    p.digest = String::new();
    let mut h = Sha256::new();
    h.update(b"vaultbench/binding/v1\n");
    h.update(canonical_json(baseline));
    h.update(b"\n");
    h.update(canonical_json(&p));
    hex::encode(h.finalize())
}

/// One reason a baseline does not verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The metric key, or a field name such as `digest`.
    pub key: String,
    pub detail: String,
}

/// Checks a baseline against its sidecar: kinds and versions, every timing/resource value is the
/// median of its raw series, every exact key equals its snapshot (and its series), the key sets
/// agree, and the binding digest. Returns every mismatch, keys named.
pub fn verify_pair(baseline: &Baseline, provenance: &Provenance) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut miss = |key: &str, detail: String| {
        out.push(Mismatch {
            key: key.to_owned(),
            detail,
        })
    };
    if baseline.kind != KIND_BASELINE {
        miss(
            "kind",
            format!(
                "baseline kind is {:?}, expected {KIND_BASELINE:?}",
                baseline.kind
            ),
        );
    }
    if provenance.kind != KIND_PROVENANCE {
        miss(
            "kind",
            format!(
                "sidecar kind is {:?}, expected {KIND_PROVENANCE:?}",
                provenance.kind
            ),
        );
    }
    for (what, v) in [
        ("baseline", baseline.format_version),
        ("sidecar", provenance.format_version),
    ] {
        if let Err(e) = crate::format::check_version(v.into()) {
            miss("format_version", format!("{what} {e}"));
        }
    }
    if baseline.scenario != provenance.scenario || baseline.seed != provenance.seed {
        miss(
            "scenario",
            "baseline and sidecar name different scenarios or seeds".to_owned(),
        );
    }
    for (key, m) in &baseline.metrics {
        let Some(series) = provenance.raw.get(key) else {
            miss(key, "no raw series in the sidecar".to_owned());
            continue;
        };
        match median(series) {
            Some(med) if close(med, m.value) => {}
            Some(med) => miss(
                key,
                format!(
                    "value {} is not the median {} of its raw series",
                    m.value, med
                ),
            ),
            None => miss(key, "raw series is empty".to_owned()),
        }
        if m.class == MetricClass::Exact {
            match provenance.exact_snapshot.get(key) {
                Some(s) if close(*s, m.value) => {}
                Some(s) => miss(
                    key,
                    format!("exact value {} differs from its snapshot {}", m.value, s),
                ),
                None => miss(key, "exact key missing from the snapshot".to_owned()),
            }
        }
    }
    for key in provenance.raw.keys() {
        if !baseline.metrics.contains_key(key) {
            miss(key, "raw series has no value in the baseline".to_owned());
        }
    }
    for key in provenance.exact_snapshot.keys() {
        match baseline.metrics.get(key) {
            Some(m) if m.class == MetricClass::Exact => {}
            Some(_) => miss(
                key,
                "snapshot key is not exact-class in the baseline".to_owned(),
            ),
            None => miss(key, "snapshot key missing from the baseline".to_owned()),
        }
    }
    let digest = binding_digest(baseline, provenance);
    if digest != provenance.digest {
        miss(
            "digest",
            format!(
                "binding digest {} does not match the recomputed {}",
                provenance.digest, digest
            ),
        );
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Baseline, Provenance) {
        let mut metrics = BTreeMap::new();
        metrics.insert(
            "a.wall_ms".to_owned(),
            Metric::timing(2.0, "ms", Better::Lower),
        );
        metrics.insert("a.fsyncs".to_owned(), Metric::exact(5.0, "count"));
        let baseline = Baseline {
            kind: KIND_BASELINE.into(),
            format_version: FORMAT_VERSION,
            scenario: "s".into(),
            seed: 1,
            samples: 3,
            metrics,
        };
        let mut raw = BTreeMap::new();
        raw.insert("a.wall_ms".to_owned(), vec![3.0, 1.0, 2.0]);
        raw.insert("a.fsyncs".to_owned(), vec![5.0, 5.0, 5.0]);
        let mut provenance = Provenance {
            kind: KIND_PROVENANCE.into(),
            format_version: FORMAT_VERSION,
            scenario: "s".into(),
            profile: "small".into(),
            seed: 1,
            vault_digest: "d".into(),
            recorded_at: "2026-11-30T00:00:00Z".into(),
            harness: HarnessIdentity {
                version: "0".into(),
                git_commit: None,
                git_dirty: None,
                toolchain: None,
            },
            target: TargetIdentity {
                command: "c".into(),
                executable: "e".into(),
                sha256: "h".into(),
                version: "v".into(),
                inputs: Default::default(),
                note: None,
                git: None,
            },
            machine: crate::machine::Fingerprint::default(),
            loadavg_before: None,
            loadavg_after: None,
            gate: Some(crate::gate::Gate::default()),
            attempts: Attempts::default(),
            samples: vec![],
            raw,
            exact_snapshot: [("a.fsyncs".to_owned(), 5.0)].into_iter().collect(),
            histograms: BTreeMap::new(),
            cost: None,
            user_vault: None,
            digest: String::new(),
        };
        provenance.digest = binding_digest(&baseline, &provenance);
        (baseline, provenance)
    }

    #[test]
    fn a_coherent_pair_verifies() {
        let (b, p) = pair();
        assert_eq!(verify_pair(&b, &p), vec![]);
    }

    #[test]
    fn an_edited_timing_value_is_named() {
        let (mut b, p) = pair();
        b.metrics.get_mut("a.wall_ms").unwrap().value = 1.5;
        let m = verify_pair(&b, &p);
        assert_eq!(m[0].key, "a.wall_ms");
        assert!(m.iter().any(|m| m.key == "digest"));
    }

    #[test]
    fn an_edited_exact_value_is_named() {
        let (mut b, mut p) = pair();
        // Even with the raw series edited to match, the snapshot disagrees.
        b.metrics.get_mut("a.fsyncs").unwrap().value = 4.0;
        p.raw.insert("a.fsyncs".into(), vec![4.0, 4.0, 4.0]);
        let m = verify_pair(&b, &p);
        assert_eq!(m[0].key, "a.fsyncs");
        assert!(m[0].detail.contains("snapshot"));
    }

    #[test]
    fn an_edited_sidecar_fails_the_digest() {
        let (b, mut p) = pair();
        p.raw.insert("a.wall_ms".into(), vec![3.0, 0.5, 2.0]); // same median
        let m = verify_pair(&b, &p);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].key, "digest");
    }

    #[test]
    fn a_newer_format_is_refused() {
        let (mut b, p) = pair();
        b.format_version = FORMAT_VERSION + 1;
        assert!(
            verify_pair(&b, &p)
                .iter()
                .any(|m| m.key == "format_version" && m.detail.contains("upgrade"))
        );
    }

    #[test]
    fn class_spellings_match_serde() {
        for c in MetricClass::ALL {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        }
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}

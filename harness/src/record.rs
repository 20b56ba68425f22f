//! `vaultbench record`: warm-up + N fresh-subprocess samples, the calibration gate, and a
//! baseline with its provenance sidecar written atomically — or a refusal that writes nothing.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reports::schema::{
    Attempts, Baseline, FORMAT_VERSION, HarnessIdentity, KIND_BASELINE, KIND_PROVENANCE, Metric,
    MetricClass, Provenance, SampleMeta, SampleResult, binding_digest, median,
};
use scenarios::scenario::Scenario;

use crate::atomic::write_atomic;
use crate::sample::SamplePlan;
use crate::target::TargetSpec;

/// Record a scenario: warm-up + N samples, each a fresh subprocess with a fresh server,
/// gated by the calibration channels; writes `<out>/<scenario>.json` and its sidecar.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// A built-in scenario: small, assets, personal, vault1k, fixture, large, vault100k, hazards.
    #[arg(required_unless_present = "scenario_file")]
    pub scenario: Option<String>,
    /// Server to measure: `ref` (default, the reference server), `ref FLAGS`, or a command line
    /// with `{addr}` and `{data}` placeholders (a bare executable path gets
    /// `--listen {addr} --data {data}`).
    #[arg(long, default_value = "ref")]
    pub target: String,
    #[command(flatten)]
    pub common: RunOpts,
    /// Directory for the baseline and its sidecar.
    #[arg(long, default_value = "baselines")]
    pub out: PathBuf,
    /// Print the recording (baseline + provenance) as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by `record` and `ab`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunOpts {
    /// A scenario TOML file instead of a built-in.
    #[arg(long, value_name = "FILE")]
    pub scenario_file: Option<PathBuf>,
    /// Counted samples (the scenario's default when absent); one warm-up runs first.
    #[arg(long)]
    pub samples: Option<u32>,
    /// Vault seed (decimal or 0x hex); the scenario's seed when absent.
    #[arg(long, value_parser = parse_seed)]
    pub seed: Option<u64>,
    /// Gate thresholds file (TOML); the built-in defaults when absent.
    #[arg(long, value_name = "FILE")]
    pub gate_config: Option<PathBuf>,
    /// Calibration reference file (default under the user's data dir).
    #[arg(long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Fail at once (exit 5) instead of waiting when another recording holds the machine lock.
    #[arg(long)]
    pub no_wait: bool,
    /// Where generated vaults are cached (default: $XDG_CACHE_HOME/vaultbench or ~/.cache/vaultbench).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where servers' data dirs live during samples; the io channel measures this filesystem.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Upper bound on one sample's run time, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub sample_timeout: u64,
}

/// Seeds in decimal or `0x` hex, for clap (the one parser is `vault::parse_seed`).
pub fn parse_seed(s: &str) -> Result<u64, String> {
    crate::vault::parse_seed(s).map_err(|e| e.to_string())
}

/// Loads the scenario named on the command line or from `--scenario-file`.
pub fn load_scenario(name: Option<&str>, file: Option<&Path>) -> anyhow::Result<Scenario> {
    match (name, file) {
        (_, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("scenario file {}", f.display()))?;
            Ok(scenarios::scenario::parse(&text, &f.display().to_string())?)
        }
        (Some(n), None) => Ok(scenarios::scenario::builtin(n)?),
        (None, None) => bail!("name a scenario or pass --scenario-file"),
    }
}

/// Everything a run of samples needs, resolved once.
pub struct Prepared {
    pub scenario: Scenario,
    pub seed: u64,
    pub vault_dir: PathBuf,
    pub vault_digest: String,
    pub work: tempfile::TempDir,
    pub gate_cfg: calibration::GateConfig,
    pub reference: Option<calibration::Reference>,
    pub fingerprint: calibration::Fingerprint,
    pub timeout: Duration,
}

pub fn prepare(scenario: Scenario, opts: &RunOpts) -> anyhow::Result<Prepared> {
    let profile = scenarios::profile(&scenario.profile)
        .with_context(|| format!("unknown profile {:?}", scenario.profile))?;
    let seed = opts.seed.or(scenario.seed).unwrap_or(profile.default_seed);
    let gate_cfg = calibration::GateConfig::load(opts.gate_config.as_deref())?;
    let cache = opts.cache_dir.clone().unwrap_or_else(default_cache_dir);
    progress(&format!(
        "vault: {} seed {seed:#x} (cache {})",
        profile.name,
        cache.display()
    ));
    let (vault_dir, summary) =
        crate::vault::ensure_cached_vault(&profile, seed, &cache.join("vaults"))?;
    let work_parent = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&work_parent)
        .with_context(|| format!("work dir {}", work_parent.display()))?;
    let work = tempfile::Builder::new()
        .prefix("vaultbench-run-")
        .tempdir_in(&work_parent)
        .with_context(|| format!("creating a temp dir in {}", work_parent.display()))?;
    let fingerprint = calibration::fingerprint(work.path());
    let reference = calibration::load_reference(opts.reference.as_deref(), &fingerprint)?;
    Ok(Prepared {
        scenario,
        seed,
        vault_dir,
        vault_digest: summary.digest,
        work,
        gate_cfg,
        reference,
        fingerprint,
        timeout: Duration::from_secs(opts.sample_timeout.max(1)),
    })
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
        }
    }

    /// Runs one sample subprocess.
    pub fn sample(
        &self,
        target: &TargetSpec,
        index: u32,
        warmup: bool,
    ) -> anyhow::Result<SampleResult> {
        crate::subprocess::run_sample(
            &self.plan(target, index, warmup),
            self.work.path(),
            self.timeout,
        )
    }

    /// Judges the readings of these samples.
    pub fn judge(&self, samples: &[&SampleResult]) -> calibration::GateVerdict {
        let cpu: Vec<f64> = samples
            .iter()
            .flat_map(|s| s.calibration.iter().map(|r| r.cpu_ms))
            .collect();
        let io: Vec<f64> = samples
            .iter()
            .flat_map(|s| s.calibration.iter().map(|r| r.io_ms))
            .collect();
        calibration::judge(&cpu, &io, self.reference.as_ref(), &self.gate_cfg)
    }
}

/// A progress line on stderr (progress bars only on a TTY; plain lines otherwise).
pub fn progress(msg: &str) {
    eprintln!("{msg}");
}

pub fn run(args: RecordArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let scenario = load_scenario(
        args.scenario.as_deref(),
        args.common.scenario_file.as_deref(),
    )?;
    let target = TargetSpec::parse(&args.target)?;
    let identity = target.identity()?;
    let n = args.common.samples.unwrap_or(scenario.samples);
    if n == 0 {
        bail!("--samples must be at least 1");
    }
    let _lock = calibration::MachineLock::acquire(None, !args.common.no_wait)?;
    let prep = prepare(scenario, &args.common)?;
    let name = prep.scenario.name.clone();
    let loadavg_before = calibration::loadavg();
    let bar = progress_bar(u64::from(n) + 1);
    let mut metas = Vec::new();
    let mut counted: Vec<SampleResult> = Vec::new();
    let mut failure: Option<String> = None;
    for i in 0..=n {
        let warmup = i == 0;
        bar.set_message(if warmup {
            "warm-up sample".to_owned()
        } else {
            format!("sample {i}/{n}")
        });
        match prep.sample(&target, i, warmup) {
            Ok(r) => {
                metas.push(meta(&r, true));
                if !warmup {
                    counted.push(r);
                }
            }
            Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => return Err(e),
            Err(e) => {
                failure = Some(format!("{e:#}"));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let loadavg_after = calibration::loadavg();
    let ledger = args.out.join(format!("{name}.attempts.jsonl"));
    if let Some(cause) = failure {
        append_ledger(&ledger, &name, "failed", &cause)?;
        eprintln!("refused: a sample failed, nothing written: {cause}");
        return Ok(crate::exit::REFUSED);
    }
    let refs: Vec<&SampleResult> = counted.iter().collect();
    let verdict = prep.judge(&refs);
    for l in verdict.lines() {
        eprintln!(
            "{}",
            if l.starts_with("gate:") {
                l
            } else {
                format!("gate: {l}")
            }
        );
    }
    if !verdict.accepted {
        append_ledger(&ledger, &name, "refused", &verdict.failures.join("; "))?;
        eprintln!(
            "refused: calibration channels too noisy, nothing written: {}",
            verdict.failures.join("; ")
        );
        return Ok(crate::exit::REFUSED);
    }
    let attempts = attempts_since_last_accept(&ledger);
    let (baseline, mut prov) = build_recording(&prep, &counted, &metas, attempts)?;
    prov.harness = harness_identity();
    prov.target = identity;
    prov.machine = serde_json::to_value(&prep.fingerprint)?;
    prov.loadavg_before = loadavg_before;
    prov.loadavg_after = loadavg_after;
    prov.gate = serde_json::json!({ "config": prep.gate_cfg, "verdict": verdict });
    prov.digest = binding_digest(&baseline, &prov);
    let base_path = args.out.join(format!("{name}.json"));
    let prov_path = args.out.join(format!("{name}.provenance.json"));
    write_atomic(&prov_path, &pretty(&prov)?)?;
    write_atomic(&base_path, &pretty(&baseline)?)?;
    append_ledger(&ledger, &name, "accepted", "")?;
    eprint!("{}", summary_table(&baseline));
    eprintln!("wrote {} and {}", base_path.display(), prov_path.display());
    if args.json {
        println!(
            "{}",
            serde_json::to_string(
                &serde_json::json!({ "baseline": baseline, "provenance": prov })
            )?
        );
    }
    Ok(crate::exit::OK)
}

fn pretty<T: serde::Serialize>(v: &T) -> anyhow::Result<Vec<u8>> {
    let mut b = serde_json::to_vec_pretty(v)?;
    b.push(b'\n');
    Ok(b)
}

fn meta(r: &SampleResult, ok: bool) -> SampleMeta {
    SampleMeta {
        index: r.index,
        warmup: r.warmup,
        pid: r.pid,
        server_pid: r.server_pid,
        ok,
        errors: r.errors.clone(),
        calibration: r.calibration.clone(),
    }
}

/// Medians per key over the counted samples; keys missing from any sample are dropped (and
/// said). The harness fields of the provenance are filled by the caller.
pub fn build_recording(
    prep: &Prepared,
    counted: &[SampleResult],
    metas: &[SampleMeta],
    attempts: Attempts,
) -> anyhow::Result<(Baseline, Provenance)> {
    let first = counted.first().context("no counted samples")?;
    let mut metrics = BTreeMap::new();
    let mut raw = BTreeMap::new();
    let mut exact_snapshot = BTreeMap::new();
    for (key, m0) in &first.metrics {
        let series: Option<Vec<f64>> = counted
            .iter()
            .map(|s| s.metrics.get(key).map(|m| m.value))
            .collect();
        let Some(series) = series else {
            eprintln!("note: {key} is missing from some samples and is not recorded");
            continue;
        };
        let Some(value) = median(&series) else {
            continue;
        };
        let m = Metric {
            value,
            ..m0.clone()
        };
        if m.class == MetricClass::Exact {
            exact_snapshot.insert(key.clone(), value);
        }
        metrics.insert(key.clone(), m);
        raw.insert(key.clone(), series);
    }
    let histograms = median_histograms(counted);
    let baseline = Baseline {
        kind: KIND_BASELINE.into(),
        format_version: FORMAT_VERSION,
        scenario: prep.scenario.name.clone(),
        seed: prep.seed,
        samples: counted.len() as u32,
        metrics,
    };
    let prov = Provenance {
        kind: KIND_PROVENANCE.into(),
        format_version: FORMAT_VERSION,
        scenario: prep.scenario.name.clone(),
        profile: prep.scenario.profile.clone(),
        seed: prep.seed,
        vault_digest: prep.vault_digest.clone(),
        recorded_at: now_rfc3339(),
        harness: harness_identity(),
        target: reports::schema::TargetIdentity {
            command: String::new(),
            executable: String::new(),
            sha256: String::new(),
            version: String::new(),
        },
        machine: serde_json::Value::Null,
        loadavg_before: None,
        loadavg_after: None,
        gate: serde_json::Value::Null,
        attempts,
        samples: metas.to_vec(),
        raw,
        exact_snapshot,
        histograms,
        digest: String::new(),
    };
    Ok((baseline, prov))
}

/// For each histogram key `K`, the histogram of the sample whose `K.p50_us` is the median of
/// that key over the counted samples (for an even count, the nearer of the two middle ones;
/// ties go to the earlier sample), so a report's percentile curve and its p50 column agree.
/// (A key without a p50 metric takes the first sample that has it.)
pub(crate) fn median_histograms(counted: &[SampleResult]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let keys: std::collections::BTreeSet<&String> =
        counted.iter().flat_map(|s| s.histograms.keys()).collect();
    for key in keys {
        let p50_key = format!("{key}.p50_us");
        let with: Vec<(f64, &String)> = counted
            .iter()
            .filter_map(|s| {
                let h = s.histograms.get(key)?;
                let v = s.metrics.get(&p50_key).map_or(0.0, |m| m.value);
                Some((v, h))
            })
            .collect();
        let values: Vec<f64> = with.iter().map(|w| w.0).collect();
        let Some(mid) = median(&values) else {
            continue;
        };
        // min_by keeps the first of equal distances: the earlier sample wins a tie.
        if let Some((_, h)) = with
            .iter()
            .min_by(|a, b| (a.0 - mid).abs().total_cmp(&(b.0 - mid).abs()))
        {
            out.insert(key.clone(), (*h).clone());
        }
    }
    out
}

/// The harness's version, git commit and dirty flag (when run from a checkout), and rustc.
pub fn harness_identity() -> HarnessIdentity {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"]);
    let dirty = commit
        .as_ref()
        .and_then(|_| git(&["status", "--porcelain", "--untracked-files=no"]))
        .map(|s| !s.is_empty());
    let toolchain = std::process::Command::new("rustc")
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    HarnessIdentity {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: commit,
        git_dirty: dirty,
        toolchain,
    }
}

/// UTC wall time as RFC 3339 (metadata only; never a measurement).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = scenarios::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// One JSON line per attempt: accepted, refused, or failed.
fn append_ledger(path: &Path, scenario: &str, outcome: &str, cause: &str) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let line = serde_json::json!({ "at": now_rfc3339(), "scenario": scenario, "outcome": outcome, "cause": cause });
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("attempts ledger {}", path.display()))?;
    writeln!(f, "{line}").with_context(|| format!("attempts ledger {}", path.display()))?;
    f.sync_all().ok();
    Ok(())
}

/// Attempts since the last accepted one, counting this accepted attempt.
fn attempts_since_last_accept(path: &Path) -> Attempts {
    let mut a = Attempts {
        attempted: 1,
        refused: 0,
        failed: 0,
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return a;
    };
    for line in text.lines().rev() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match v.get("outcome").and_then(|o| o.as_str()) {
            Some("accepted") => break,
            Some("refused") => {
                a.attempted += 1;
                a.refused += 1;
            }
            Some("failed") => {
                a.attempted += 1;
                a.failed += 1;
            }
            _ => {}
        }
    }
    a
}

fn progress_bar(len: u64) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        let b = indicatif::ProgressBar::new(len);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    } else {
        indicatif::ProgressBar::hidden()
    }
}

/// The human summary: one row per key, grouped by phase.
pub fn summary_table(b: &Baseline) -> String {
    let mut s = format!(
        "\n{} (seed {:#x}, median of {} samples)\n",
        b.scenario, b.seed, b.samples
    );
    let w = b
        .metrics
        .keys()
        .map(|k| k.len())
        .max()
        .unwrap_or(10)
        .min(60);
    s.push_str(&format!(
        "  {:<w$}  {:>14}  {:<8} {:<8} better\n",
        "metric", "value", "unit", "class"
    ));
    for (k, m) in &b.metrics {
        let class = match m.class {
            MetricClass::Exact => "exact",
            MetricClass::Timing => "timing",
            MetricClass::Resource => "resource",
        };
        let better = match m.better {
            reports::schema::Better::Lower => "lower",
            reports::schema::Better::Higher => "higher",
        };
        s.push_str(&format!(
            "  {k:<w$}  {:>14}  {:<8} {class:<8} {better}\n",
            fmt_value(m.value),
            m.unit
        ));
    }
    s
}

pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse() {
        assert_eq!(parse_seed("0x5eed"), Ok(0x5eed));
        assert_eq!(parse_seed("42"), Ok(42));
        assert!(
            parse_seed("0xZZ").unwrap_err().contains("0xZZ"),
            "the message names the input"
        );
    }

    fn sample(index: u32, p50: &[(&str, f64)]) -> SampleResult {
        SampleResult {
            kind: reports::schema::KIND_SAMPLE.into(),
            format_version: FORMAT_VERSION,
            scenario: "s".into(),
            index,
            warmup: false,
            pid: 1,
            server_pid: 2,
            vault_digest: String::new(),
            metrics: p50
                .iter()
                .map(|(k, v)| {
                    (
                        format!("{k}.p50_us"),
                        reports::schema::Metric::timing(*v, "us", reports::schema::Better::Lower),
                    )
                })
                .collect(),
            calibration: vec![],
            errors: vec![],
            histograms: p50
                .iter()
                .map(|(k, _)| ((*k).to_owned(), format!("{k}@{index}")))
                .collect(),
        }
    }

    #[test]
    fn each_histogram_comes_from_the_sample_that_is_median_for_its_key() {
        // Sample 1 is the middle one in time, but the median of neither key.
        let counted = [
            sample(0, &[("a", 500.0), ("b", 90.0)]),
            sample(1, &[("a", 900.0), ("b", 10.0)]),
            sample(2, &[("a", 100.0), ("b", 50.0)]),
        ];
        let h = median_histograms(&counted);
        assert_eq!(
            h["a"], "a@0",
            "a's p50 series 500, 900, 100 has its median in sample 0"
        );
        assert_eq!(
            h["b"], "b@2",
            "b's p50 series 90, 10, 50 has its median in sample 2"
        );
        // Four samples: the median is between the middle two; the nearer one, else the earlier.
        let four = [
            sample(0, &[("a", 40.0)]),
            sample(1, &[("a", 10.0)]),
            sample(2, &[("a", 20.0)]),
            sample(3, &[("a", 30.0)]),
        ];
        assert_eq!(median_histograms(&four)["a"], "a@2");
    }

    #[test]
    fn rfc3339_shape() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }

    #[test]
    fn ledger_counts_since_last_accept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.attempts.jsonl");
        append_ledger(&p, "s", "refused", "x").unwrap();
        append_ledger(&p, "s", "accepted", "").unwrap();
        append_ledger(&p, "s", "refused", "x").unwrap();
        append_ledger(&p, "s", "failed", "y").unwrap();
        assert_eq!(
            attempts_since_last_accept(&p),
            Attempts {
                attempted: 3,
                refused: 1,
                failed: 1
            }
        );
    }
}

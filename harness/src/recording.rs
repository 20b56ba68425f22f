//! The record loop: warm-up + N counted samples through a
//! [`SampleRunner`](crate::sample::runner::SampleRunner), the calibration gate, and a baseline
//! with its provenance sidecar written atomically — or a refusal that writes nothing but a line
//! in the attempts ledger.

use anyhow::Context;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use contract::key::{MetricKey, SYSCALLS};
use reports::recording::{RecordingInput, sample_meta};
use reports::schema::{
    Attempts, Baseline, CostProvenance, HarnessIdentity, Metric, MetricClass, Provenance,
    SampleResult, TargetIdentity, binding_digest,
};
use std::collections::BTreeMap;

use crate::atomic::write_atomic;
use crate::prepare::Prepared;
use crate::sample::runner::SampleRunner;
use crate::sample::target::TargetSpec;

/// One recording to make.
pub struct RecordJob<'a> {
    pub prep: &'a Prepared,
    pub target: &'a TargetSpec,
    pub identity: TargetIdentity,
    /// Counted samples; one warm-up runs before them and is dropped.
    pub samples: u32,
    /// Attempts per counted sample: one the per-sample gate refuses is run again, up to this
    /// many times in all (at least 1).
    pub attempts: u32,
    /// Cost samples after the counted ones when the run has `--cost` (at least 1).
    pub cost_samples: u32,
    /// Directory of the baseline, its sidecar and the attempts ledger.
    pub out: &'a Path,
}

/// How a recording ended.
pub enum Recorded {
    /// Baseline and sidecar written.
    Written(Box<Written>),
    /// A sample failed or the gate refused: nothing written but the ledger line.
    Refused(String),
}

/// The written pair and where it went.
pub struct Written {
    pub baseline: Baseline,
    pub provenance: Provenance,
    pub baseline_path: PathBuf,
    pub provenance_path: PathBuf,
}

/// Runs the warm-up and `job.samples` counted samples, gates them, and writes the recording.
/// An interrupt stops at once with an error and writes nothing.
pub fn record(job: RecordJob<'_>, runner: &dyn SampleRunner) -> anyhow::Result<Recorded> {
    let (prep, n) = (job.prep, job.samples);
    let name = prep.scenario.name.clone();
    let loadavg_before = calibration::loadavg();
    // A machine already busy from outside is refused before the warm-up, not after it and
    // three attempts of the first sample.
    let pre_check = match crate::gate::pre_check(prep)? {
        Ok(figures) => figures,
        Err(r) => {
            // The ledger keeps the whole refusal (who was busy, the ways forward); the
            // terminal gets it wrapped to its width.
            let ledger = Ledger::for_out(job.out, &name);
            let message = r.message(&ledger.what_was_written());
            ledger.append(&name, "refused", &message)?;
            return Ok(Recorded::Refused(message));
        }
    };
    let bar = progress_bar(u64::from(n) + 1);
    let lines = bar.is_hidden();
    let mut metas = Vec::new();
    let mut counted: Vec<SampleResult> = Vec::new();
    let mut failure: Option<String> = None;
    // The run's kernel readings so far (the warm-up's included), which each counted sample's
    // readings are judged against, as in `ab` (`crate::gate::gated_sample`).
    let mut pool = Vec::new();
    // A counted sample the per-sample gate refused on every attempt: why, for the verdict.
    let mut exhausted: Option<String> = None;
    let mut attempt = 1;
    let mut retried_because: Vec<String> = Vec::new();
    let mut i = 0;
    while i <= n {
        let warmup = i == 0;
        bar.set_message(match (warmup, attempt) {
            (true, _) => "warm-up sample".to_owned(),
            (false, 1) => format!("sample {i}/{n}"),
            (false, a) => format!("sample {i}/{n}, attempt {a}"),
        });
        prep.pause_before(attempt)?;
        let started = std::time::Instant::now();
        let result = runner.run(&prep.plan(job.target, i, warmup));
        let r = match result {
            Ok(r) => r,
            Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => return Err(e),
            Err(e) => {
                if lines {
                    let secs = started.elapsed().as_secs_f64();
                    let why = contract::quote::line(&format!("failed: {e:#}"));
                    eprintln!("{}", sample_line(i, n, &why, secs));
                }
                failure = Some(contract::quote::line(&format!("{e:#}")));
                break;
            }
        };
        // Counted samples pass the per-sample gate (in-sample channels, readings against the
        // pool and the reference) or are run again: a kernel reading that a few seconds of
        // host noise slowed refuses one sample, not the recording.
        let verdict = (!warmup).then(|| crate::gate::judge_one(prep, &r, &pool));
        let refused = verdict.as_ref().filter(|v| !v.accepted);
        if lines {
            let outcome = refused.map_or_else(|| "ok".to_owned(), crate::gate::refusal_of);
            eprintln!(
                "{}",
                sample_line(i, n, &outcome, started.elapsed().as_secs_f64())
            );
        }
        if let Some(v) = refused {
            if attempt < job.attempts.max(1) {
                retried_because.push(crate::gate::refusal_of(v));
                attempt += 1;
                continue;
            }
            // Out of attempts: the last one is judged with the others, and refuses.
            exhausted = Some(format!(
                "sample {i} refused on all {attempt} attempts: {}",
                v.failures.join("; ")
            ));
            metas.push(sample_meta(&r, true));
            counted.push(r);
            break;
        }
        pool.extend(r.calibration.iter().copied());
        let mut meta = sample_meta(&r, true);
        meta.retried_because = std::mem::take(&mut retried_because);
        metas.push(meta);
        if !warmup {
            counted.push(r);
        }
        attempt = 1;
        i += 1;
        bar.inc(1);
    }
    bar.finish_and_clear();
    // `--cost`: one cost sample after the counted ones (not gated: instruction and syscall
    // counts do not depend on the machine's load).
    let mut cost_samples: Vec<SampleResult> = Vec::new();
    if prep.cost.is_some() {
        let runs = job.cost_samples.max(1);
        for k in 0..runs {
            if failure.is_some() {
                break;
            }
            crate::prepare::progress(&format!(
                "cost sample {}/{runs} (callgrind and strace side by side)",
                k + 1
            ));
            match runner.run(&prep.cost_plan(job.target, n + 1 + k)) {
                Ok(r) => cost_samples.push(r),
                Err(e) if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() => {
                    return Err(e);
                }
                Err(e) => failure = Some(format!("cost sample {}: {e:#}", k + 1)),
            }
        }
    }
    let loadavg_after = calibration::loadavg();
    let ledger = Ledger::for_out(job.out, &name);
    if let Some(cause) = failure {
        ledger.append(&name, "failed", &cause)?;
        return Ok(Recorded::Refused(format!(
            "a sample failed, {}: {cause}",
            ledger.what_was_written()
        )));
    }
    let refs: Vec<&SampleResult> = counted.iter().collect();
    let mut verdict = crate::gate::judge(prep, &refs);
    verdict.pre_check = pre_check;
    if let Some(why) = exhausted
        && verdict.accepted
    {
        // The recording-level figures can pass where the per-sample test did not (the pool
        // holds the warm-up): the sample's refusal stands.
        verdict.accepted = false;
        verdict.failures.push(why);
    }
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
        let cause = verdict.failures.join("; ");
        ledger.append(&name, "refused", &cause)?;
        // The gate's message says "nothing written"; in an untracked `--out` the ledger line is.
        return Ok(Recorded::Refused(
            verdict.refusal(prep.reference_file.as_deref()).replacen(
                "nothing written",
                &ledger.what_was_written(),
                1,
            ),
        ));
    }
    let attempts = attempts_since_last_accept(&ledger.path);
    let built = reports::recording::build(RecordingInput {
        scenario: &name,
        profile: &prep.profile_name(),
        seed: prep.seed,
        vault_digest: &prep.vault_digest,
        recorded_at: now_rfc3339(),
        harness: harness_identity(),
        counted: &counted,
        metas: &metas,
        attempts,
    })?;
    for key in &built.dropped {
        eprintln!("note: {key} is missing from some samples and is not recorded");
    }
    let (mut baseline, mut prov) = (built.baseline, built.provenance);
    if let (false, Some(tools)) = (cost_samples.is_empty(), &prep.cost) {
        merge_cost(&mut baseline, &mut prov, &cost_samples, tools);
    }
    prov.target = job.identity;
    prov.user_vault = prep.user_vault.clone();
    prov.machine = prep.fingerprint.clone();
    prov.loadavg_before = loadavg_before;
    prov.loadavg_after = loadavg_after;
    prov.gate = Some(contract::gate::Gate {
        config: Some(prep.gate_cfg),
        verdict: Some(verdict),
    });
    prov.digest = binding_digest(&baseline, &prov);
    let baseline_path = job.out.join(format!("{name}.json"));
    let provenance_path = job.out.join(format!("{name}.provenance.json"));
    write_atomic(&provenance_path, &pretty(&prov)?)?;
    write_atomic(&baseline_path, &pretty(&baseline)?)?;
    ledger.append(&name, "accepted", "")?;
    Ok(Recorded::Written(Box::new(Written {
        baseline,
        provenance: prov,
        baseline_path,
        provenance_path,
    })))
}

/// Whether a cost sample's key goes into the recording: instruction counts (class `cost`) and
/// syscalls by name. The rest of the cost sample stays in the sidecar only.
pub fn is_cost_key(key: &str, class: MetricClass) -> bool {
    class == MetricClass::Cost || MetricKey::is_scoped_server_member(key, SYSCALLS)
}

/// Adds the cost samples' keys to the baseline (each key the median of its runs, its raw
/// series every run in the sidecar) and every sample, with the tools that counted, to the
/// sidecar's `cost` (its `metrics`: the medians).
fn merge_cost(
    baseline: &mut Baseline,
    prov: &mut Provenance,
    runs: &[SampleResult],
    tools: &crate::sample::cost::CostTools,
) {
    let mut series: BTreeMap<String, (Metric, Vec<f64>)> = BTreeMap::new();
    for c in runs {
        for (k, m) in &c.metrics {
            series
                .entry(k.clone())
                .or_insert_with(|| (m.clone(), Vec::new()))
                .1
                .push(m.value);
        }
    }
    let mut medians = BTreeMap::new();
    for (k, (mut m, values)) in series {
        m.value = contract::schema::median(&values).unwrap_or(m.value);
        medians.insert(k.clone(), m.value);
        if !is_cost_key(&k, m.class) {
            continue;
        }
        if m.class == MetricClass::Exact {
            prov.exact_snapshot.insert(k.clone(), m.value);
        }
        prov.raw.insert(k.clone(), values);
        baseline.metrics.insert(k, m);
    }
    for c in runs {
        prov.samples.push(sample_meta(c, true));
    }
    prov.cost = Some(CostProvenance {
        instructions_source: tools.instructions.clone(),
        syscalls_source: tools.syscalls.clone(),
        metrics: medians,
        functions: median_parts(runs, |c| &c.profiles, |p| p.total_ir as f64)
            .into_iter()
            .map(|(k, p)| (k, p.capped(contract::profile::RECORDED_FUNCTIONS)))
            .collect(),
        blocked: median_parts(runs, |c| &c.blocked, |b| b.wall_ms),
    });
}

/// Per part, the cost sample's part whose `size` is the median of the runs' (the lower middle
/// for an even count): one whole profile, not a mix of several.
fn median_parts<T: Clone>(
    runs: &[SampleResult],
    parts: impl Fn(&SampleResult) -> &BTreeMap<String, T>,
    size: impl Fn(&T) -> f64,
) -> BTreeMap<String, T> {
    let mut by: BTreeMap<&String, Vec<&T>> = BTreeMap::new();
    for c in runs {
        for (k, v) in parts(c) {
            by.entry(k).or_default().push(v);
        }
    }
    by.into_iter()
        .map(|(k, mut vs)| {
            vs.sort_by(|a, b| size(a).total_cmp(&size(b)));
            (k.clone(), vs[(vs.len() - 1) / 2].clone())
        })
        .collect()
}

fn pretty<T: serde::Serialize>(v: &T) -> anyhow::Result<Vec<u8>> {
    let mut b = serde_json::to_vec_pretty(v)?;
    b.push(b'\n');
    Ok(b)
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
    contract::time::rfc3339_utc(secs)
}

/// One line of progress without a terminal: `sample 3/5: ok, 14.2 s` (`warm-up` for sample 0).
pub fn sample_line(i: u32, n: u32, outcome: &str, secs: f64) -> String {
    let what = if i == 0 {
        "warm-up".to_owned()
    } else {
        format!("sample {i}/{n}")
    };
    match outcome.split_once(": ") {
        // A failure's cause goes last, after the time, so the line still reads `..., 2.0 s`.
        Some((head, cause)) => format!("{what}: {head}, {secs:.1} s: {cause}"),
        None => format!("{what}: {outcome}, {secs:.1} s"),
    }
}

/// The attempts ledger of one recording: `<out>/<scenario>.attempts.jsonl`, beside the
/// baseline it counts attempts for. It is written only when `<out>` holds no file git tracks:
/// a committed baseline directory is the repository's record, and a refused run on someone's
/// laptop must leave the checkout as it was ("nothing written" is then literally true). An
/// untracked `--out` (a CI job's `recording/`, a new machine's `baselines/<class>/` before its
/// first commit) keeps the ledger, so the accepted recording can count the attempts before it.
pub struct Ledger {
    pub path: PathBuf,
    /// False when `<out>` is tracked by git: nothing is appended.
    pub writable: bool,
}

impl Ledger {
    pub fn for_out(out: &Path, scenario: &str) -> Ledger {
        Ledger {
            path: out.join(format!("{scenario}.attempts.jsonl")),
            writable: !tracked_by_git(out),
        }
    }

    fn append(&self, scenario: &str, outcome: &str, cause: &str) -> anyhow::Result<()> {
        if !self.writable {
            return Ok(());
        }
        append_ledger(&self.path, scenario, outcome, cause)
    }

    /// What a refused or failed run left behind, for its message: literally nothing in a
    /// tracked directory, else the ledger line alone.
    pub fn what_was_written(&self) -> String {
        if self.writable {
            format!(
                "no recording written (the attempt is counted in {})",
                self.path.display()
            )
        } else {
            "nothing written".to_owned()
        }
    }
}

/// Whether git tracks any file under `dir` (false when `dir` does not exist, is outside a
/// work tree, or git is not installed).
pub fn tracked_by_git(dir: &Path) -> bool {
    if !dir.is_dir() {
        return false;
    }
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["ls-files", "-z", "--", "."])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty())
}

/// One JSON line per attempt: accepted, refused, or failed (`contract::ledger`).
fn append_ledger(path: &Path, scenario: &str, outcome: &str, cause: &str) -> anyhow::Result<()> {
    use contract::ledger::{AttemptOutcome, LedgerLine};
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let outcome = match outcome {
        "accepted" => AttemptOutcome::Accepted,
        "refused" => AttemptOutcome::Refused,
        _ => AttemptOutcome::Failed,
    };
    let line = LedgerLine {
        at: now_rfc3339(),
        cause: cause.to_owned(),
        outcome,
        scenario: scenario.to_owned(),
    }
    .to_line();
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
    let text = std::fs::read_to_string(path).unwrap_or_default();
    contract::ledger::attempts_since_last_accept(&text)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::runner::mock::{MockRunner, Step, noisy, ok, prepared};

    fn job<'a>(prep: &'a Prepared, target: &'a TargetSpec, out: &'a Path, n: u32) -> RecordJob<'a> {
        RecordJob {
            prep,
            target,
            identity: TargetIdentity {
                command: "ref".into(),
                executable: "vaultbench".into(),
                sha256: "00".into(),
                version: "0".into(),
                inputs: Default::default(),
                note: None,
                git: None,
            },
            samples: n,
            attempts: 3,
            cost_samples: 1,
            out,
        }
    }

    fn spec() -> TargetSpec {
        TargetSpec {
            given: "ref".into(),
            def: loadgen::launch::TargetDef::command(vec!["ref".into()], "ref").unwrap(),
        }
    }

    fn ledger(out: &Path, prep: &Prepared) -> Vec<String> {
        let p = out.join(format!("{}.attempts.jsonl", prep.scenario.name));
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!(
                    "{}:{}",
                    v["outcome"].as_str().unwrap(),
                    v["cause"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn files(out: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(out)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn warm_up_is_dropped_and_the_baseline_holds_the_medians_of_the_counted_samples() {
        let (prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        let runner = MockRunner::new([ok(999.0), ok(30.0), ok(10.0), ok(20.0)]);
        let Recorded::Written(w) = record(job(&prep, &t, out.path(), 3), &runner).unwrap() else {
            panic!("refused")
        };
        assert_eq!(
            *runner.calls.borrow(),
            vec![
                (0, true, "ref".to_owned()),
                (1, false, "ref".to_owned()),
                (2, false, "ref".to_owned()),
                (3, false, "ref".to_owned())
            ]
        );
        assert_eq!(w.baseline.samples, 3);
        assert_eq!(w.baseline.metrics["t.ms"].value, 20.0);
        assert_eq!(w.baseline.metrics["n.count"].value, 3.0);
        assert_eq!(w.provenance.raw["t.ms"], vec![30.0, 10.0, 20.0]);
        let warm: Vec<(u32, bool)> = w
            .provenance
            .samples
            .iter()
            .map(|m| (m.index, m.warmup))
            .collect();
        assert_eq!(warm, vec![(0, true), (1, false), (2, false), (3, false)]);
        assert_eq!(
            w.provenance.attempts,
            Attempts {
                attempted: 1,
                refused: 0,
                failed: 0
            }
        );
        assert_eq!(w.provenance.target.command, "ref");
        assert_eq!(
            w.provenance.digest,
            binding_digest(&w.baseline, &w.provenance)
        );
        let on_disk: Baseline =
            serde_json::from_slice(&std::fs::read(&w.baseline_path).unwrap()).unwrap();
        assert_eq!(on_disk, w.baseline);
        let name = &prep.scenario.name;
        assert_eq!(
            files(out.path()),
            vec![
                format!("{name}.attempts.jsonl"),
                format!("{name}.json"),
                format!("{name}.provenance.json")
            ]
        );
        assert_eq!(ledger(out.path(), &prep), vec!["accepted:".to_owned()]);
    }

    #[test]
    fn a_failed_sample_stops_the_loop_writes_nothing_and_is_ledgered() {
        let (prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        let runner = MockRunner::new([ok(1.0), ok(2.0), Step::Fail("server died"), ok(3.0)]);
        let r = record(job(&prep, &t, out.path(), 3), &runner).unwrap();
        let ledger_path = out
            .path()
            .join(format!("{}.attempts.jsonl", prep.scenario.name));
        let want = format!(
            "a sample failed, no recording written (the attempt is counted in {}): server died",
            ledger_path.display()
        );
        assert!(matches!(&r, Recorded::Refused(c) if *c == want), "{want}");
        assert_eq!(runner.left(), 1, "no sample runs after a failure");
        let name = &prep.scenario.name;
        assert_eq!(files(out.path()), vec![format!("{name}.attempts.jsonl")]);
        assert_eq!(
            ledger(out.path(), &prep),
            vec!["failed:server died".to_owned()]
        );
    }

    #[test]
    fn a_gate_refusal_writes_nothing_and_the_next_accept_counts_the_attempts() {
        let (prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        // The warm-up's readings are not judged: only a counted sample's bad reading refuses.
        // A counted sample refused on all three attempts refuses the recording.
        let refused = MockRunner::new([noisy(1.0), ok(2.0), noisy(3.0), noisy(3.0), noisy(3.0)]);
        let r = record(job(&prep, &t, out.path(), 2), &refused).unwrap();
        assert_eq!(refused.left(), 0);
        let Recorded::Refused(cause) = r else {
            panic!("accepted a bad reading")
        };
        // The refusal names the failing channel, says the reference was not found (and
        // where it would live), and says what to do next: retry quiet, calibrate, or loosen.
        let ledger_path = out
            .path()
            .join(format!("{}.attempts.jsonl", prep.scenario.name));
        assert!(
            cause.starts_with(&format!(
                "calibration gate refused, no recording written (the attempt is counted in {}): \
                 cpu_ms has a reading that is not a positive number. \
                 no reference for this machine in /nonexistent-reference.json",
                ledger_path.display()
            )),
            "{cause}"
        );
        for next in [
            "retry when the machine is quiet",
            "run `vaultbench calibrate` on a quiet machine",
            "--gate-config",
        ] {
            assert!(cause.contains(next), "{next} missing from {cause}");
        }
        let name = &prep.scenario.name;
        assert_eq!(files(out.path()), vec![format!("{name}.attempts.jsonl")]);

        let failed = MockRunner::new([Step::Fail("timeout")]);
        assert!(matches!(
            record(job(&prep, &t, out.path(), 2), &failed).unwrap(),
            Recorded::Refused(_)
        ));
        let fine = MockRunner::new([noisy(1.0), ok(2.0), ok(2.0)]);
        let Recorded::Written(w) = record(job(&prep, &t, out.path(), 2), &fine).unwrap() else {
            panic!("refused")
        };
        assert_eq!(
            w.provenance.attempts,
            Attempts {
                attempted: 3,
                refused: 1,
                failed: 1
            }
        );
        assert_eq!(
            ledger(out.path(), &prep),
            vec![
                "refused:cpu_ms has a reading that is not a positive number".to_owned(),
                "failed:timeout".to_owned(),
                "accepted:".to_owned()
            ]
        );
    }

    #[test]
    fn a_busy_pre_check_refuses_before_any_sample_and_a_quiet_one_is_kept_in_the_verdict() {
        let (mut prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        prep.pre_check = Duration::from_millis(100);
        // A bound below zero: whatever this machine is doing, the look exceeds it.
        prep.gate_cfg.foreign_io = Some(calibration::gate::ShareBound { max_share: -1.0 });
        let never = MockRunner::new([]);
        let r = record(job(&prep, &t, out.path(), 2), &never).unwrap();
        let Recorded::Refused(cause) = r else {
            panic!("accepted past a failed pre-check")
        };
        assert!(
            cause.contains("foreign_io")
                && cause.contains("before the first sample (a 0.1 s pre-check)"),
            "{cause}"
        );
        assert!(
            cause.contains("no recording written (the attempt is counted in"),
            "{cause}"
        );
        assert!(
            never.calls.borrow().is_empty(),
            "a sample ran after the pre-check refused"
        );
        assert_eq!(ledger(out.path(), &prep).len(), 1);
        // (foreign_cpu may fail too on a busy test machine: the ledger names every failure.)
        let line = &ledger(out.path(), &prep)[0];
        assert!(
            line.starts_with("refused:") && line.contains("foreign_io "),
            "{line}"
        );
        // Unbounded, the look passes and its figures are in the recording's verdict.
        prep.gate_cfg.foreign_io = None;
        prep.gate_cfg.foreign_cpu = None;
        prep.gate_cfg.steal = None;
        let fine = MockRunner::new([ok(1.0), ok(2.0), ok(2.0)]);
        let Recorded::Written(w) = record(job(&prep, &t, out.path(), 2), &fine).unwrap() else {
            panic!("refused")
        };
        let v = w.provenance.gate.unwrap().verdict.unwrap();
        assert!(v.pre_check.contains_key("foreign_cpu"), "{:?}", v.pre_check);
        assert!(v.pre_check.contains_key("foreign_io"), "{:?}", v.pre_check);
    }

    #[test]
    fn a_sample_the_per_sample_gate_refuses_is_run_again_and_the_retry_is_recorded() {
        let (prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        // Sample 1 is refused once (a bad kernel reading), then kept; sample 2 at once.
        let runner = MockRunner::new([ok(1.0), noisy(9.0), ok(10.0), ok(20.0)]);
        let Recorded::Written(w) = record(job(&prep, &t, out.path(), 2), &runner).unwrap() else {
            panic!("refused")
        };
        assert_eq!(runner.left(), 0);
        let calls: Vec<(u32, bool)> = runner.calls.borrow().iter().map(|c| (c.0, c.1)).collect();
        assert_eq!(calls, vec![(0, true), (1, false), (1, false), (2, false)]);
        // The refused attempt's figures are not in the recording.
        assert_eq!(w.provenance.raw["t.ms"], vec![10.0, 20.0]);
        let retried: Vec<(u32, usize)> = w
            .provenance
            .samples
            .iter()
            .map(|m| (m.index, m.retried_because.len()))
            .collect();
        assert_eq!(retried, vec![(0, 0), (1, 1), (2, 0)]);
        assert!(
            w.provenance.samples[1].retried_because[0]
                .contains("cpu_ms has a reading that is not a positive number"),
            "{:?}",
            w.provenance.samples[1].retried_because
        );
        assert_eq!(ledger(out.path(), &prep), vec!["accepted:".to_owned()]);
    }

    #[test]
    fn an_interrupt_stops_at_once_and_writes_nothing_not_even_the_ledger() {
        let (prep, t, out) = (prepared(), spec(), tempfile::tempdir().unwrap());
        let runner = MockRunner::new([ok(1.0), Step::Interrupt, ok(2.0)]);
        let Err(e) = record(job(&prep, &t, out.path(), 2), &runner) else {
            panic!("an interrupt is an error")
        };
        assert!(e.downcast_ref::<crate::interrupt::Interrupted>().is_some());
        assert_eq!(runner.left(), 1);
        assert!(files(out.path()).is_empty());
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git is installed");
        assert!(o.status.success(), "git {args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    }

    #[test]
    fn a_refused_record_in_a_tracked_dir_leaves_the_checkout_as_it_was() {
        let repo = tempfile::tempdir().unwrap();
        let out = repo.path().join("baselines/some-class");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("other.json"), "{}\n").unwrap();
        git(repo.path(), &["init", "-q"]);
        git(repo.path(), &["add", "."]);
        git(
            repo.path(),
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "baseline",
            ],
        );
        let before = git(
            repo.path(),
            &["status", "--porcelain", "--untracked-files=all"],
        );
        assert!(tracked_by_git(&out));
        let (prep, t) = (prepared(), spec());
        for runner in [
            MockRunner::new([noisy(1.0), ok(2.0), noisy(3.0)]),
            MockRunner::new([ok(1.0), Step::Fail("server died")]),
        ] {
            let r = record(job(&prep, &t, &out, 2), &runner).unwrap();
            // "Nothing written" is literally true here.
            assert!(
                matches!(&r, Recorded::Refused(c) if c.contains("nothing written") && !c.contains("counted in")),
                "{:?}",
                matches!(r, Recorded::Refused(_))
            );
        }
        assert_eq!(
            git(
                repo.path(),
                &["status", "--porcelain", "--untracked-files=all"]
            ),
            before
        );
        assert_eq!(files(&out), vec!["other.json".to_owned()]);
        // An untracked directory beside it does get the ledger.
        let fresh = repo.path().join("recording");
        assert!(!tracked_by_git(&fresh));
        let runner = MockRunner::new([ok(1.0), Step::Fail("server died")]);
        record(job(&prep, &t, &fresh, 2), &runner).unwrap();
        assert_eq!(ledger(&fresh, &prep), vec!["failed:server died".to_owned()]);
    }

    #[test]
    fn progress_lines_without_a_terminal() {
        assert_eq!(sample_line(0, 5, "ok", 3.04), "warm-up: ok, 3.0 s");
        assert_eq!(sample_line(3, 5, "ok", 14.23), "sample 3/5: ok, 14.2 s");
        assert_eq!(
            sample_line(2, 5, "failed: server died", 2.0),
            "sample 2/5: failed, 2.0 s: server died"
        );
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

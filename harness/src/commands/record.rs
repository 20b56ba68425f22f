//! `vaultbench record`: parse the arguments, take the machine lock, prepare the run, and
//! hand the record loop (`recording`) the real sample runner; print the summary.

use anyhow::bail;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::schema::Baseline;

use crate::prepare::{RunOpts, check_protocol, load_scenario, prepare};
use crate::recording::{RecordJob, Recorded, record};
use crate::sample::runner::SubprocessRunner;

/// Record a scenario: warm-up + N samples, each a fresh subprocess with a fresh server,
/// gated by the calibration channels; writes `<out>/<scenario>.json` and its sidecar.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    #[command(flatten, next_help_heading = "Scenario")]
    pub scenario: crate::commands::ScenarioArg,
    #[arg(help_heading = "Target", long, default_value = "ref", help = crate::commands::target_help("Server to measure"))]
    pub target: String,
    #[command(flatten)]
    pub common: RunOpts,
    /// Directory for the baseline and its sidecar (default: `target/vaultbench/<class>`, this
    /// machine's class as `vaultbench class` prints it, untracked, compared with the committed
    /// `baselines/<class>/` if there is one). To re-baseline: `--out-dir baselines/<class>`.
    // `--out` is the old spelling, kept as a hidden alias: `--out` names a file everywhere else.
    #[arg(
        help_heading = "Output",
        id = "out",
        long = "out-dir",
        alias = "out",
        value_name = "DIR"
    )]
    pub out: Option<PathBuf>,
    /// Print the recording (baseline + provenance) as one JSON document on stdout.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
    /// End with the whole table of keys, not only each phase's headline keys.
    #[arg(help_heading = "Output", long)]
    pub full: bool,
    /// Retries of a counted sample the per-sample gate refused (an in-sample channel over its
    /// bound, or a kernel reading far from the run's pooled readings or this machine's
    /// reference), after its first attempt; then the recording is refused. `0`: no retry.
    #[arg(help_heading = "Gate", long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// Counted samples (the scenario's default when absent); one warm-up runs first.
    #[arg(help_heading = "Scenario", long)]
    pub samples: Option<u32>,
    /// With `--cost`: cost samples to run after the counted ones (each a full run under
    /// callgrind and strace). A cost key is their median and its raw series all of them, so
    /// `compare` can tell a change from the run-to-run spread of a server that batches work by
    /// timing (group commit, polling): one cost sample gives no spread. The trend job uses 3.
    #[arg(help_heading = "Cost channel", long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20), requires = "cost")]
    pub cost_samples: u32,
}

pub fn run(args: RecordArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let mut scenario = load_scenario(args.scenario.name(), args.common.scenario_file.as_deref())?;
    args.common.client_into(&mut scenario)?;
    args.common.validate()?;
    if let Some(out) = &args.out
        && out.exists()
        && !out.is_dir()
    {
        bail!(
            "--out-dir {} is not a directory: it takes the baseline and its sidecar",
            out.display()
        );
    }
    let opts = args.common.target_opts()?;
    let n = args.samples.unwrap_or(scenario.samples);
    if n == 0 {
        bail!("--samples must be at least 1");
    }
    // A `git:REV` target is checked now and built under the lock, before any sample.
    crate::prepare::git::check(&args.target, &args.common.git)?;
    let early = crate::prepare::git::rev_of(&args.target).is_some();
    let early_lock = args.common.lock_now_if(early)?;
    let (mut target, git) = args.common.resolve_target(&args.target, &opts)?;
    check_protocol(
        &scenario,
        args.common.protocol.as_ref(),
        &mut [("--target", &mut target)],
    )?;
    let mut identity = target.identity()?;
    identity.git = git;
    // Outside a Cargo workspace nothing ignores `./target/`: say where the recording (or a
    // refused attempt's ledger line) goes before anything else is printed.
    if args.out.is_none()
        && let Ok(cwd) = std::env::current_dir()
        && !in_cargo_workspace(&cwd)
    {
        let work = args
            .common
            .work_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let class = crate::commands::class::this_machine(&work);
        eprintln!(
            "vaultbench: no --out-dir given: writing to {} (this machine's class; pass --out-dir DIR to choose)",
            cwd.join(default_out(&class)).display()
        );
    }

    crate::sample::target::print_identity("target", &identity);
    let _lock = match early_lock {
        Some(l) => l,
        None => calibration::MachineLock::acquire(None, !args.common.no_wait)?,
    };
    let prep = prepare(scenario, &args.common)?;
    let class = crate::commands::class::of(&prep.fingerprint);
    let out = args.out.clone().unwrap_or_else(|| default_out(&class));
    if out.exists() && !out.is_dir() {
        bail!(
            "{} is not a directory: it takes the baseline and its sidecar",
            out.display()
        );
    }
    let runner = SubprocessRunner {
        work: prep.work.path().to_path_buf(),
        timeout: prep.timeout,
    };
    let job = RecordJob {
        prep: &prep,
        target: &target,
        identity,
        samples: n,
        attempts: args.retries + 1,
        cost_samples: args.cost_samples,
        out: &out,
    };
    let w = match record(job, &runner)? {
        Recorded::Refused(cause) => return Err(contract::exit::Refused(cause).into()),
        Recorded::Written(w) => w,
    };
    eprint!(
        "{}",
        summary_table(
            &w.baseline,
            &w.provenance.raw,
            prep.gate_cfg.cpu_ms.max_cv,
            args.full
        )
    );
    // How each per-file cost grows with the vault, in one line each (counts first).
    for g in reports::render::growth(&w.baseline) {
        eprintln!("growth: {}: {}", g.phase, g.finding);
    }
    for (phase, series, named, fitted) in
        reports::render::superlinear_samples(&w.baseline, &w.provenance)
    {
        eprintln!(
            "growth: {phase} {series}: {named} of {fitted} samples, each fitted alone, named a superlinear growth"
        );
    }
    eprintln!(
        "wrote {} and {}",
        w.baseline_path.display(),
        w.provenance_path.display()
    );
    if args.out.is_none() {
        eprint!("{}", against_committed(&w.baseline_path, &class));
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(
                &serde_json::json!({ "baseline": w.baseline, "provenance": w.provenance })
            )?
        );
    }
    Ok(crate::exit::OK)
}

/// Where a recording goes without `--out`: `target/vaultbench/<class>/` of the working
/// directory, which git ignores, so a first run leaves the checkout's tracked files alone.
/// Writing into `baselines/<class>/` (re-baselining) is asked for with `--out`.
pub fn default_out(class: &str) -> PathBuf {
    PathBuf::from("target").join("vaultbench").join(class)
}

/// Whether `dir` or a parent holds a `Cargo.toml` (there `target/` is Cargo's, and ignored).
fn in_cargo_workspace(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join("Cargo.toml").is_file())
}

/// How a recording written to the default place compares with the committed baseline of its
/// scenario and this machine's class (`baselines/<class>/<scenario>.json` of the working
/// directory), as text for stderr: the comparison of `vaultbench compare` at its default
/// threshold, or why there is none and how to make one. Never an error: the recording stands
/// either way, and the comparison does not change the exit code.
pub fn against_committed(recording: &Path, class: &str) -> String {
    against_committed_in(Path::new("baselines"), recording, class)
}

/// [`against_committed`] with the baselines directory given.
fn against_committed_in(baselines: &Path, recording: &Path, class: &str) -> String {
    let committed_dir = baselines.join(class);
    let Some(name) = recording.file_name() else {
        return String::new();
    };
    let committed = committed_dir.join(name);
    let rebaseline = format!(
        "to make this run the baseline: `vaultbench record ... --out-dir {}`, then `vaultbench verify` and commit",
        committed_dir.display()
    );
    if !committed.exists() {
        return format!(
            "no committed baseline {} for this machine class: nothing to compare; {rebaseline}\n",
            committed.display()
        );
    }
    let compared = (|| -> anyhow::Result<reports::compare::Comparison> {
        let (bb, bp) = crate::commands::verify::read_pair(&committed)?;
        let (rb, rp) = crate::commands::verify::read_pair(recording)?;
        if let Some(m) = reports::schema::verify_pair(&bb, &bp).first() {
            bail!("it does not verify ({}: {})", m.key, m.detail);
        }
        Ok(reports::compare::compare(
            (&bb, &bp),
            (&rb, &rp),
            reports::compare::DEFAULT_THRESHOLD,
        )?)
    })();
    match compared {
        Ok(cmp) => format!(
            "{}\ncompared with the committed baseline {}: {} regression(s) beyond {} and the recordings' noise (again: `vaultbench compare baselines/ {}`); {rebaseline}\n",
            reports::compare::markdown(&cmp),
            committed.display(),
            cmp.regressions,
            reports::fmt::pct(cmp.threshold),
            recording.display()
        ),
        Err(e) => format!(
            "not compared with the committed baseline {}: {e:#}\n",
            committed.display()
        ),
    }
}

/// Whether a key is one of a phase's headline figures: wall time, p50/p95 (of the phase and
/// of each route it used, and each route-load step's p50), files/s, CPU per request, fsyncs
/// per file (and the server's total CPU and peak RSS); of a long-polling step, its fan-out,
/// posts per second, journal flushes per post and RSS per 1,000 held devices. Syscall counts
/// per request are not headline figures; `--full` shows them.
pub fn is_headline(key: &str) -> bool {
    const SUFFIXES: [&str; 16] = [
        ".fanout_p50_ms",
        ".fanout_p99_ms",
        ".posts_per_s",
        ".journal_flushes_per_post",
        "rss_kib_per_1000_held",
        ".wall_ms",
        ".ready_ms",
        ".propagate_ms",
        ".p50_ms",
        ".p95_ms",
        ".p50_us",
        ".p95_us",
        ".files_per_s",
        "fsyncs_per_file",
        ".cpu_us_per_request",
        ".cpu_us_per_file",
    ];
    SUFFIXES.iter().any(|s| key.ends_with(s))
        || matches!(
            key,
            "server.cpu_s"
                | "server.peak_rss_mib"
                // An MCP server's boot and shutdown (its `cold_start.ready_ms`).
                | "mcp_boot.first_list_us"
                | "mcp_shutdown.exit_us"
        )
}

/// Coefficient of variation (sample sd / mean) of a raw series; `None` under two values or a
/// zero mean.
fn cv(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if mean == 0.0 || !mean.is_finite() {
        return None;
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(var.sqrt() / mean.abs())
}

/// The end summary of a recording. Without `full`: per phase its headline keys, then every
/// key whose spread over the samples is beyond the gate's CV bound for the cpu channel
/// (`max_cv`: a key noisier than the noise the gate admits for the machine is worth a look).
/// With `full`: every key. Column widths come from the content either way.
pub fn summary_table(
    b: &Baseline,
    raw: &BTreeMap<String, Vec<f64>>,
    max_cv: f64,
    full: bool,
) -> String {
    let mut s = format!(
        "\n{} (seed {:#x}, median of {} samples)\n",
        b.scenario, b.seed, b.samples
    );
    let row = |k: &str, m: &reports::schema::Metric, note: String| {
        let better = match m.better {
            reports::schema::Better::Lower => "lower",
            reports::schema::Better::Higher => "higher",
        };
        vec![
            k.to_owned(),
            fmt_value(m.value),
            m.unit.clone(),
            m.class.as_str().to_owned(),
            better.to_owned(),
            note,
        ]
    };
    let noisy: Vec<(String, f64)> = b
        .metrics
        .iter()
        .filter(|(_, m)| m.class != reports::schema::MetricClass::Exact)
        .filter_map(|(k, _)| Some((k.clone(), cv(raw.get(k)?)?)))
        .filter(|(_, c)| *c > max_cv)
        .collect();
    let note = |k: &str| {
        noisy
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, c)| format!("CV {c:.2} > {max_cv:.2}"))
            .unwrap_or_default()
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    if full {
        rows.extend(b.metrics.iter().map(|(k, m)| row(k, m, note(k))));
    } else {
        rows.extend(
            b.metrics
                .iter()
                .filter(|(k, _)| is_headline(k))
                .map(|(k, m)| row(k, m, note(k))),
        );
        rows.extend(
            noisy
                .iter()
                .filter(|(k, _)| !is_headline(k))
                .filter_map(|(k, _)| Some(row(k, b.metrics.get(k)?, note(k)))),
        );
    }
    let headers = ["metric", "value", "unit", "class", "better", "noise"];
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::from(" ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i == 1 {
                l.push_str(&format!(" {}{c}", " ".repeat(pad)));
            } else {
                l.push_str(&format!(" {c}{}", " ".repeat(pad)));
            }
        }
        format!("{}\n", l.trim_end())
    };
    s.push_str(&line(&headers));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        s.push_str(&line(&cells));
    }
    if !full {
        s.push_str(&format!(
            "({} of {} keys: headline keys per phase and keys noisier than CV {max_cv:.2}; --full shows all)\n",
            rows.len(),
            b.metrics.len()
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
    use reports::schema::{Better, Metric, MetricClass};

    fn metric(value: f64, unit: &str, class: MetricClass) -> Metric {
        Metric {
            value,
            unit: unit.into(),
            class,
            better: Better::Lower,
        }
    }

    fn baseline() -> (Baseline, BTreeMap<String, Vec<f64>>) {
        let mut metrics = BTreeMap::new();
        metrics.insert(
            "cold_push.wall_ms".to_owned(),
            metric(1234.5, "ms", MetricClass::Timing),
        );
        metrics.insert(
            "cold_push.server.fsyncs_per_file".to_owned(),
            metric(3.0, "count", MetricClass::Exact),
        );
        metrics.insert(
            "cold_push.put-chunk.p99_us".to_owned(),
            metric(900.0, "us", MetricClass::Timing),
        );
        metrics.insert(
            "server.io.syscr".to_owned(),
            metric(10.0, "count", MetricClass::Resource),
        );
        let raw = BTreeMap::from([
            ("cold_push.wall_ms".to_owned(), vec![1200.0, 1234.5, 1250.0]),
            (
                "cold_push.put-chunk.p99_us".to_owned(),
                vec![300.0, 900.0, 2000.0],
            ),
            ("server.io.syscr".to_owned(), vec![10.0, 10.0, 10.0]),
        ]);
        let b = Baseline {
            metrics,
            ..serde_json::from_str(include_str!("../../../reports/tests/fixtures/small.json"))
                .unwrap()
        };
        (b, raw)
    }

    #[test]
    fn headline_keys_are_the_phase_figures_the_issue_names() {
        for k in [
            "cold_push.wall_ms",
            "cold_start.ready_ms",
            "edit.p95_ms",
            "cold_push.put-chunk.p50_us",
            "cold_pull.changes.p95_us",
            "route.changes.c4.p50_us",
            "cold_push.files_per_s",
            "cold_push.server.data_fsyncs_per_file",
            "route.put-chunk.c1.server.cpu_us_per_request",
            "cold_push.server.cpu_us_per_file",
            "server.cpu_s",
            "fanout.fanout_p99_ms",
            "push_d4.server.journal_flushes_per_post",
            "fanout.generator.rss_kib_per_1000_held",
        ] {
            assert!(is_headline(k), "{k}");
        }
        for k in [
            "route.changes.c1.server.syscalls_per_request",
            "route.changes.c1.p99_us",
            "cold_push.requests.put-chunk",
            "server.io.syscr",
        ] {
            assert!(!is_headline(k), "{k}");
        }
    }

    #[test]
    fn the_summary_shows_headline_and_noisy_keys_and_full_shows_all() {
        let (b, raw) = baseline();
        let short = summary_table(&b, &raw, 0.2, false);
        assert!(
            short.contains("cold_push.wall_ms") && short.contains("fsyncs_per_file"),
            "{short}"
        );
        assert!(
            short.contains("cold_push.put-chunk.p99_us") && short.contains("CV 0.81 > 0.20"),
            "{short}"
        );
        assert!(!short.contains("server.io.syscr"), "{short}");
        assert!(short.contains("3 of 4 keys"), "{short}");
        let full = summary_table(&b, &raw, 0.2, true);
        assert!(full.contains("server.io.syscr"), "{full}");
        // Widths from the content: the value column is right-aligned under its header.
        let rows: Vec<&str> = full.lines().skip(2).collect();
        let end = rows[0].find("value").unwrap() + "value".len();
        for r in &rows[1..] {
            let b = r.as_bytes();
            assert!(b[end - 1] != b' ' && b[end] == b' ', "{full}");
        }
        assert_eq!(rows[0].split_whitespace().next(), Some("metric"));
    }

    #[test]
    fn the_default_out_is_untracked_under_target() {
        assert_eq!(
            default_out("xeon-2c-24g-ext4-k6-5a0c82"),
            Path::new("target/vaultbench/xeon-2c-24g-ext4-k6-5a0c82")
        );
    }

    #[test]
    fn without_a_committed_baseline_it_says_how_to_make_one() {
        let t = tempfile::tempdir().unwrap();
        let text = against_committed_in(t.path(), Path::new("target/x/small.json"), "c-1");
        let committed = t.path().join("c-1").join("small.json");
        assert!(
            text.starts_with(&format!(
                "no committed baseline {} for this machine class",
                committed.display()
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("--out-dir {}", t.path().join("c-1").display())),
            "{text}"
        );
    }

    /// A committed baseline compared with itself: the comparison is printed with 0
    /// regressions, and the way to compare again names the recording.
    #[test]
    fn a_committed_baseline_is_compared_with_the_recording() {
        let baselines = Path::new(env!("CARGO_MANIFEST_DIR")).join("../baselines");
        let class = std::fs::read_dir(&baselines)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|c| baselines.join(c).join("small.json").exists())
            .expect("a committed small baseline");
        let rec = baselines.join(&class).join("small.json");
        let text = against_committed_in(&baselines, &rec, &class);
        assert!(text.contains("# vaultbench compare: small"), "{text}");
        assert!(
            text.contains("0 regression(s) beyond 5.0%")
                || text.contains("0 regression(s) beyond 5%"),
            "{text}"
        );
        assert!(
            text.contains(&format!("vaultbench compare baselines/ {}", rec.display())),
            "{text}"
        );
    }
}

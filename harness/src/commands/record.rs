//! `vaultbench record`: parse the arguments, take the machine lock, prepare the run, and
//! hand the record loop (`recording`) the real sample runner; print the summary.

use anyhow::bail;
use std::path::PathBuf;

use reports::schema::Baseline;

use crate::prepare::{RunOpts, load_scenario, prepare};
use crate::recording::{RecordJob, Recorded, record};
use crate::sample::runner::SubprocessRunner;
use crate::sample::target::TargetSpec;

/// Record a scenario: warm-up + N samples, each a fresh subprocess with a fresh server,
/// gated by the calibration channels; writes `<out>/<scenario>.json` and its sidecar.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// A built-in scenario: small, assets, personal, vault1k, fixture, large, vault100k, hazards;
    /// over WebDAV (with a WebDAV `--target`): small-webdav, personal-webdav.
    #[arg(required_unless_present = "scenario_file")]
    pub scenario: Option<String>,
    /// Server to measure: `ref` (default, the reference server), `ref FLAGS`, or a command line
    /// with `{addr}` and `{data}` placeholders (a bare executable path gets
    /// `--listen {addr} --data {data}`), or a WebDAV preset: `apache-webdav`, `nginx-webdav`,
    /// `rclone-webdav`.
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

pub fn run(args: RecordArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let scenario = load_scenario(
        args.scenario.as_deref(),
        args.common.scenario_file.as_deref(),
    )?;
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "--out {} is not a directory: it takes the baseline and its sidecar",
            args.out.display()
        );
    }
    let target = TargetSpec::parse(&args.target)?;
    let identity = target.identity()?;
    let n = args.common.samples.unwrap_or(scenario.samples);
    if n == 0 {
        bail!("--samples must be at least 1");
    }
    let _lock = calibration::MachineLock::acquire(None, !args.common.no_wait)?;
    let prep = prepare(scenario, &args.common)?;
    let runner = SubprocessRunner {
        work: prep.work.path().to_path_buf(),
        timeout: prep.timeout,
    };
    let job = RecordJob {
        prep: &prep,
        target: &target,
        identity,
        samples: n,
        out: &args.out,
    };
    let w = match record(job, &runner)? {
        Recorded::Refused(cause) => return Err(contract::exit::Refused(cause).into()),
        Recorded::Written(w) => w,
    };
    eprint!("{}", summary_table(&w.baseline));
    eprintln!(
        "wrote {} and {}",
        w.baseline_path.display(),
        w.provenance_path.display()
    );
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
        let class = m.class.as_str();
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

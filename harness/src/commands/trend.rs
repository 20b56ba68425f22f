//! `vaultbench trend detect`: change points per key over a history file
//! (`history append|import`), found by E-Divisive means with a permutation test and named as
//! steps, drifts or machine changes (`reports::trend`). With `--bisect`, every step for the
//! worse whose commit range spans more than one commit is handed to `vaultbench bisect` (the
//! key decides cost or paired mode there), and the first bad commit it names is reported with
//! the point.
//!
//! Exit codes: 0 no step or drift for the worse; 1 one or more (machine changes do not count);
//! 2 an unreadable history or a usage error.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, FromArgMatches};
use contract::bisect::{BisectOutcome, BisectResult, KIND_BISECT};
use contract::history::HistoryEntry;
use contract::schema::MetricClass;
use contract::trend::{PointKind, TrendBisect, TrendPoint, TrendResult};
use reports::trend::Config;

use crate::commands::bisect::{self, BisectArgs};
use crate::commands::history::read_history;
use crate::prepare::git::Repo;

/// Find change points in a history.
#[derive(Debug, clap::Subcommand)]
pub enum TrendCmd {
    /// Change points per key over a history file: steps, drifts and machine changes.
    Detect(DetectArgs),
}

/// `trend detect` flags.
#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    /// The history: a `.jsonl` file that `history append` or `history import` wrote.
    #[arg(value_name = "HISTORY")]
    pub history: PathBuf,
    /// Seed of the permutation draws.
    #[arg(help_heading = "Detection", long, value_name = "SEED", default_value = "0x7e2d", value_parser = contract::parse::seed)]
    pub seed: u64,
    /// Shuffles per significance test.
    #[arg(help_heading = "Detection", long, value_name = "N", default_value_t = 199, value_parser = clap::value_parser!(u32).range(19..=9999))]
    pub permutations: u32,
    /// A split is kept when its permutation p-value is at most this (0 < P < 1).
    #[arg(help_heading = "Detection", long, value_name = "P", default_value_t = 0.01, value_parser = p_value)]
    pub max_p: f64,
    /// The fewest history entries either side of a change point.
    #[arg(help_heading = "Detection", long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub min_segment: u32,
    /// The smallest change reported for a class, e.g. `cost=2%` (repeatable; defaults: exact
    /// 0 %, cost 1 %, resource 5 %, timing 5 %).
    #[arg(help_heading = "Detection", long, value_name = "CLASS=PERCENT", value_parser = class_effect)]
    pub min_effect: Vec<(MetricClass, f64)>,
    /// Hand every step for the worse whose range spans more than one commit to `vaultbench
    /// bisect`; its flags (`--build`, `--bin` or `--run`, `--scenario-file`, `--gate-config`,
    /// ...) follow `--`. The scenario defaults to the history's.
    #[arg(help_heading = "Bisect", long)]
    pub bisect: bool,
    /// The repository the history's commits belong to (for `--bisect`).
    #[arg(help_heading = "Bisect", long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Flags passed to every `bisect` run, after `--`.
    #[arg(last = true, value_name = "BISECT FLAGS")]
    pub bisect_flags: Vec<String>,
    /// Write the result here (JSON), with a Markdown (`.md`) and an HTML (`.html`) report
    /// beside it.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the result as one JSON document on stdout.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

fn p_value(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("bad p-value {s:?}: a number between 0 and 1, e.g. 0.01"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("bad p-value {s:?}: it must lie between 0 and 1"))
    }
}

fn class_effect(s: &str) -> Result<(MetricClass, f64), String> {
    let (c, p) = s
        .split_once('=')
        .ok_or_else(|| format!("bad {s:?}: write CLASS=PERCENT, e.g. cost=2%"))?;
    let class = MetricClass::ALL
        .into_iter()
        .find(|k| k.as_str() == c.trim())
        .ok_or_else(|| format!("bad class {c:?}: one of exact, timing, resource, cost"))?;
    let f = contract::parse::percent(p.trim())?;
    Ok((class, f * 100.0))
}

pub fn run(cmd: TrendCmd) -> anyhow::Result<i32> {
    match cmd {
        TrendCmd::Detect(a) => detect(a),
    }
}

fn detect(a: DetectArgs) -> anyhow::Result<i32> {
    crate::interrupt::install();
    let entries = read_history(&a.history)?;
    if entries.len() < 2 * a.min_segment as usize {
        bail!(
            "{}: {} entr{}, fewer than twice --min-segment {}: nothing to split",
            a.history.display(),
            entries.len(),
            if entries.len() == 1 { "y" } else { "ies" },
            a.min_segment
        );
    }
    let mixed: Vec<String> = {
        let mut seen: Vec<String> = entries
            .iter()
            .map(|e| format!("{} on {}", e.scenario, e.machine_class))
            .collect();
        seen.sort();
        seen.dedup();
        seen
    };
    if mixed.len() > 1 {
        bail!(
            "{}: entries of {} mixed in one history; keep one scenario on one machine class per file",
            a.history.display(),
            mixed.join(", ")
        );
    }
    let mut cfg = Config {
        seed: a.seed,
        permutations: a.permutations,
        max_p: a.max_p,
        min_segment: a.min_segment as usize,
        ..Config::default()
    };
    for (class, pct) in &a.min_effect {
        cfg.min_effect_pct.insert(*class, *pct);
    }
    let mut result = reports::trend::detect(&entries, &cfg);
    if a.bisect {
        hand_off(&a, &entries, &mut result)?;
    }
    eprint!("{}", reports::render::trend_summary(&result));
    if let Some(out) = &a.out {
        write_reports(out, &result, &entries)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&result)?);
    }
    let worse = result
        .points
        .iter()
        .any(|p| p.kind != PointKind::Machine && p.worse);
    Ok(if worse {
        crate::exit::REGRESSION
    } else {
        crate::exit::OK
    })
}

/// Runs bisect over every step for the worse, in history order.
fn hand_off(a: &DetectArgs, entries: &[HistoryEntry], r: &mut TrendResult) -> anyhow::Result<()> {
    let repo = Repo::open(Some(&a.repo))?;
    let scratch = tempfile::tempdir().context("making a scratch directory for bisect results")?;
    let scenario = entries[0].scenario.clone();
    for (n, p) in r.points.iter_mut().enumerate() {
        if !p.worse || p.kind == PointKind::Machine {
            continue;
        }
        if p.kind == PointKind::Drift {
            p.bisect = Some(not_run(0, "a drift has no single commit to find"));
            continue;
        }
        let (Some(good), Some(bad)) = (p.before.commit.clone(), p.after.commit.clone()) else {
            p.bisect = Some(not_run(0, "the history lines have no commits"));
            continue;
        };
        let path = match repo.first_parent_path(&good, &bad) {
            Ok(path) => path,
            Err(e) => {
                p.bisect = Some(not_run(0, &format!("{e:#}")));
                continue;
            }
        };
        if path.len() <= 1 {
            p.bisect = Some(TrendBisect {
                mode: None,
                path_len: path.len(),
                outcome: (path.len() == 1).then_some(BisectOutcome::Found),
                first_bad: path.first().map(|c| c.id.clone()),
                note: Some("the range is one commit: no search needed".into()),
            });
            continue;
        }
        crate::prepare::progress(&format!(
            "trend: bisecting {} over {} commit(s) after {}",
            p.key,
            path.len(),
            &good[..good.len().min(12)]
        ));
        let out = scratch.path().join(format!("bisect-{n}.json"));
        p.bisect = Some(match run_bisect(a, p, &scenario, &good, &bad, &out) {
            Ok(res) => TrendBisect {
                mode: Some(res.mode.clone()),
                path_len: res.path_len,
                outcome: Some(res.outcome),
                first_bad: res.first_bad.map(|c| c.commit),
                note: None,
            },
            Err(e) => {
                if e.downcast_ref::<crate::interrupt::Interrupted>().is_some() {
                    return Err(e);
                }
                not_run(path.len(), &format!("bisect failed: {e:#}"))
            }
        });
    }
    Ok(())
}

fn not_run(path_len: usize, why: &str) -> TrendBisect {
    TrendBisect {
        mode: None,
        path_len,
        outcome: None,
        first_bad: None,
        note: Some(why.to_owned()),
    }
}

/// One `vaultbench bisect` over `good..bad` for the point's key, in this process.
fn run_bisect(
    a: &DetectArgs,
    p: &TrendPoint,
    scenario: &str,
    good: &str,
    bad: &str,
    out: &Path,
) -> anyhow::Result<BisectResult> {
    let mut argv: Vec<String> = ["bisect", "--good", good, "--bad", bad, "--key", &p.key]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    argv.push("--out".into());
    argv.push(out.display().to_string());
    argv.push("--repo".into());
    argv.push(a.repo.display().to_string());
    // `--scenario NAME`, `--scenario=NAME`, `--scenario-file F` among the flags name it.
    let named = a.bisect_flags.iter().any(|f| f.starts_with("--scenario"));
    if !named {
        argv.push("--scenario".into());
        argv.push(scenario.to_owned());
    }
    argv.extend(a.bisect_flags.iter().cloned());
    let cmd = BisectArgs::augment_args(clap::Command::new("bisect"));
    let matches = cmd.try_get_matches_from(&argv).map_err(|e| {
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        anyhow::anyhow!("the flags after -- for bisect: {first}")
    })?;
    let args = BisectArgs::from_arg_matches(&matches)
        .map_err(|e| anyhow::anyhow!("the flags after -- for bisect: {e}"))?;
    bisect::run(args)?;
    let bytes = std::fs::read(out).with_context(|| format!("reading {}", out.display()))?;
    contract::format::decode_slice(&bytes, KIND_BISECT)
        .map_err(|e| anyhow::anyhow!("{} {e}", out.display()))
}

/// The result as JSON at `out`, Markdown beside it (`.md`) and HTML (`.html`).
fn write_reports(out: &Path, r: &TrendResult, entries: &[HistoryEntry]) -> anyhow::Result<()> {
    let doc = reports::render::Document::Trend { result: r, entries };
    super::write_json_md_html(out, r, &doc)
}

/// The per-class floors a run used, for tests.
#[cfg(test)]
fn floors(a: &DetectArgs) -> std::collections::BTreeMap<MetricClass, f64> {
    let mut m = Config::default().min_effect_pct;
    for (c, p) in &a.min_effect {
        m.insert(*c, *p);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_floors_parse_and_bad_ones_name_the_input() {
        assert_eq!(class_effect("cost=2%").unwrap(), (MetricClass::Cost, 2.0));
        assert!(class_effect("costs=2%").unwrap_err().contains("\"costs\""));
        assert!(class_effect("cost").unwrap_err().contains("CLASS=PERCENT"));
        assert!(p_value("1.5").is_err() && p_value("0.05").is_ok());
        let a = DetectArgs::from_arg_matches(
            &DetectArgs::augment_args(clap::Command::new("detect"))
                .try_get_matches_from(["detect", "h.jsonl", "--min-effect", "timing=8%"])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(floors(&a)[&MetricClass::Timing], 8.0);
        // The flag's default is the library's.
        assert_eq!(a.seed, reports::trend::DEFAULT_SEED);
        assert_eq!(floors(&a)[&MetricClass::Cost], 1.0);
    }
}

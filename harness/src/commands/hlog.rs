//! `vaultbench hlog merge`: several generators' HdrHistogram interval logs (`load --hdr-log`,
//! one per worker or shard) summed into one, interval by interval (`loadgen::hlog`), and the
//! merged percentiles printed.
//!
//! Exit codes: 0 merged; 3 refused (the logs do not align, or were corrected for coordinated
//! omission differently: nothing is written); 2 an unreadable or malformed input.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use loadgen::hlog::{HlogError, LogInput, TagSummary};
use serde::Serialize;

use contract::exit;

/// Work with HdrHistogram interval logs.
#[derive(Debug, clap::Subcommand)]
pub enum HlogCmd {
    /// Sum interval logs interval by interval into one log and print its percentiles.
    Merge(MergeArgs),
}

/// `hlog merge` flags.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The interval logs to merge (`load --hdr-log` files of workers or shards).
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<PathBuf>,
    /// Where to write the merged interval log.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Largest difference between the logs' start times, with a unit: 1s, 500ms. Interval i
    /// of every log is summed into interval i, so starts further apart are refused.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = contract::parse::duration)]
    pub max_start_skew: Duration,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: HlogCmd) -> anyhow::Result<i32> {
    match cmd {
        HlogCmd::Merge(a) => merge(a),
    }
}

/// The `--json` document.
#[derive(Serialize)]
struct MergeDoc<'a> {
    out: String,
    inputs: Vec<String>,
    correction: &'a str,
    /// Values are in the logs' unit: microseconds for vaultbench's logs.
    unit: &'a str,
    intervals: usize,
    tags: std::collections::BTreeMap<String, TagSummary>,
}

fn merge(a: MergeArgs) -> anyhow::Result<i32> {
    let bytes: Vec<Vec<u8>> = a
        .logs
        .iter()
        .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let names: Vec<String> = a.logs.iter().map(|p| p.display().to_string()).collect();
    let inputs: Vec<LogInput<'_>> = names
        .iter()
        .zip(&bytes)
        .map(|(name, bytes)| LogInput { name, bytes })
        .collect();
    let merged = match loadgen::hlog::merge(&inputs, a.max_start_skew) {
        Ok(m) => m,
        Err(e @ (HlogError::Parse { .. } | HlogError::NoInput | HlogError::Add { .. })) => {
            return Err(e.into());
        }
        Err(e) => return Err(exit::Refused(e.to_string()).into()),
    };
    let mut buf = Vec::new();
    merged
        .write(&mut buf)
        .context("encoding the merged interval log")?;
    crate::atomic::write_atomic(&a.out, &buf)
        .with_context(|| format!("--out {}", a.out.display()))?;
    let unit = if merged.divisor == 1000.0 {
        "us"
    } else {
        "value"
    };
    let summary = merged.summary();
    if a.json {
        let doc = MergeDoc {
            out: a.out.display().to_string(),
            inputs: names,
            correction: &merged.correction,
            unit,
            intervals: merged.intervals.len(),
            tags: summary,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    println!(
        "merged {} logs into {} ({} intervals; correction: {}; values in {unit})",
        merged.inputs,
        a.out.display(),
        merged.intervals.len(),
        merged.correction
    );
    for (tag, s) in &summary {
        println!(
            "{:<24} n {:>10}  p50 {:>9}  p90 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}  ({} intervals)",
            if tag.is_empty() { "(untagged)" } else { tag },
            s.count,
            s.p50,
            s.p90,
            s.p99,
            s.p999,
            s.max,
            s.intervals
        );
    }
    Ok(exit::OK)
}

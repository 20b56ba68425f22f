//! `vaultbench sample` (hidden): run one sample plan in this fresh process and print its
//! result as one JSON document; `record` and `ab` re-execute the binary with it.

use anyhow::Context;
use std::path::PathBuf;

use crate::sample::child::execute;
use crate::sample::plan::SamplePlan;

/// Hidden: run one sample plan (the parent re-executes itself with this).
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    #[arg(long)]
    pub plan: PathBuf,
}

/// Reads the plan, runs it, prints the result; exit 2 when the sample reports errors.
pub fn run(args: SampleArgs) -> anyhow::Result<i32> {
    let text = std::fs::read(&args.plan)
        .with_context(|| format!("reading sample plan {}", args.plan.display()))?;
    let plan: SamplePlan = serde_json::from_slice(&text)
        .with_context(|| format!("sample plan {}", args.plan.display()))?;
    let result = execute(&plan);
    println!("{}", serde_json::to_string(&result)?);
    Ok(if result.errors.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::ERROR
    })
}

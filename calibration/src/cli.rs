//! `calibrate` and `probe` arguments (placeholder; see issue 5).

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {}

#[derive(Debug, clap::Subcommand)]
pub enum ProbeCmd {}

pub fn run_calibrate(_args: CalibrateArgs) -> anyhow::Result<i32> {
    anyhow::bail!("calibrate is not built yet")
}

pub fn run_probe(cmd: ProbeCmd) -> anyhow::Result<i32> {
    match cmd {}
}

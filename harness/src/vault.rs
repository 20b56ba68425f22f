//! `vaultbench vault gen|verify|bench`: writing generated vaults to disk (placeholder; see issue 2).

#[derive(Debug, clap::Subcommand)]
pub enum VaultCmd {}

pub fn run(cmd: VaultCmd) -> anyhow::Result<i32> {
    match cmd {}
}

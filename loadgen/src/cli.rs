//! `load` arguments (placeholder; see issue 4).

#[derive(Debug, clap::Args)]
pub struct LoadArgs {}

pub fn run(_args: LoadArgs) -> anyhow::Result<i32> {
    anyhow::bail!("load is not built yet")
}

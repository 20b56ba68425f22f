//! `serve-ref` arguments (placeholder; see issue 3).

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> anyhow::Result<i32> {
    anyhow::bail!("serve-ref is not built yet")
}

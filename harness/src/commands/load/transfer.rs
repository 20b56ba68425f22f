//! `load push|pull`: a whole-vault transfer as one device, and its output.

use super::conn::{COUCHDB, ConnArgs, WEBDAV, couch_client, dav_client, ensure_devices, target_of};
use super::report::{human_transfer, peak_rss_kib};

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use contract::exit;
use loadgen::couch::{Replica, Writer};
use loadgen::{PushOpts, Target, TransferReport, pull_vault, push_vault};

/// `load push|pull` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TransferArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The vault directory (push: must exist; pull: created if missing).
    #[arg(long, value_name = "DIR")]
    pub vault: PathBuf,
    /// Which enrolled device acts (default: 0 for push, 1 for pull).
    #[arg(long, value_name = "I")]
    pub device: Option<usize>,
    /// Push: files in flight.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub in_flight: usize,
    /// Push: a throughput checkpoint every N files.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub checkpoint_every: usize,
    /// Pull: start after this change-feed seq (obsync-v1).
    #[arg(long, default_value_t = 0)]
    pub since: u64,
    /// WebDAV pull: walk with one `Depth: infinity` PROPFIND instead of Depth 1 per folder.
    #[arg(long)]
    pub depth_infinity: bool,
    /// Pull: most entries the walk of the changes feed (obsync `GET /v1/changes` pages,
    /// CouchDB `_changes` pages) may list [default: obsync 1048576, CouchDB 4194304].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub feed_max_entries: Option<u64>,
    /// Pull: most pages the walk of the changes feed may ask for [default: obsync 4096,
    /// CouchDB 131072].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub feed_max_pages: Option<u64>,
    /// CouchDB pull: most bytes of documents the pull may hold at once (chunks until their
    /// file is written, files waiting for chunks, what is kept of each file); each answer is
    /// capped at what is left [default: 64MiB].
    #[arg(long, value_name = "BYTES", value_parser = crate::prepare::parse_bytes)]
    pub feed_max_bytes: Option<u64>,
    /// Upper bound on the whole push or pull, every request included: `1h`, `90s` (sized
    /// from `vault100k`); past it the transfer stops with one line naming this flag.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = contract::parse::duration)]
    pub transfer_timeout: Duration,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl TransferArgs {
    /// The changes feed walk bounds: `defaults` (the protocol's) with what `--feed-max-*` set.
    fn feed_bounds(&self, defaults: loadgen::FeedBounds) -> loadgen::FeedBounds {
        defaults.with(loadgen::FeedOverrides {
            max_entries: self.feed_max_entries,
            max_pages: self.feed_max_pages,
            max_bytes: self.feed_max_bytes,
        })
    }
}

/// as Self-hosted LiveSync does.
async fn run_couch_transfer(t: &TransferArgs, push: bool) -> anyhow::Result<i32> {
    let client =
        couch_client(&t.conn)?.with_feed_bounds(t.feed_bounds(loadgen::couch::FEED_DEFAULT));
    let report = if push {
        match std::fs::metadata(&t.vault) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--vault {}: not a directory", t.vault.display()),
            Err(e) => bail!("--vault {}: {e}", t.vault.display()),
        }
        Writer::new("vaultbench-load-a")
            .push_vault(&client, &t.vault)
            .await
            .with_context(|| format!("pushing {}", t.vault.display()))?
            .0
    } else {
        Replica::new("vaultbench-load-b")
            .pull_vault(&client, &t.vault)
            .await
            .with_context(|| format!("pulling into {}", t.vault.display()))?
    };
    let idx = t.device.unwrap_or(if push { 0 } else { 1 });
    print_transfer(t, client.target(), push, idx, &report)
}

#[derive(Serialize)]
struct TransferDoc<'a> {
    op: &'a str,
    target: &'a str,
    seed: u64,
    vault: String,
    device: usize,
    peak_rss_kib: Option<u64>,
    report: &'a TransferReport,
}

/// `load push|pull` within `--transfer-timeout`: past it, one line naming the flag.
pub(super) async fn run_transfer(t: TransferArgs, push: bool) -> anyhow::Result<i32> {
    let limit = t.transfer_timeout;
    match tokio::time::timeout(limit, transfer(t, push)).await {
        Ok(r) => r,
        Err(_) => bail!(
            "the {} did not finish within {} (bound --transfer-timeout)",
            if push { "push" } else { "pull" },
            contract::quote::duration(limit)
        ),
    }
}

async fn transfer(t: TransferArgs, push: bool) -> anyhow::Result<i32> {
    if t.conn.protocol == COUCHDB {
        return run_couch_transfer(&t, push).await;
    }
    let target = target_of(&t.conn)?.with_feed_bounds(t.feed_bounds(loadgen::FeedBounds::DEFAULT));
    if push {
        match std::fs::metadata(&t.vault) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--vault {}: not a directory", t.vault.display()),
            Err(e) => bail!("--vault {}: {e}", t.vault.display()),
        }
        if t.in_flight == 0 {
            bail!("--in-flight 0: must be at least 1");
        }
        if t.checkpoint_every == 0 {
            bail!("--checkpoint-every 0: must be at least 1");
        }
    }
    let idx = t.device.unwrap_or(if push { 0 } else { 1 });
    if t.conn.protocol == WEBDAV {
        let client = dav_client(&target, &t.conn).await?;
        let report = if push {
            loadgen::webdav::push_vault(&client, &t.vault)
                .await
                .with_context(|| format!("pushing {}", t.vault.display()))?
        } else {
            std::fs::create_dir_all(&t.vault)
                .with_context(|| format!("--vault {}", t.vault.display()))?;
            let depth = if t.depth_infinity {
                loadgen::webdav::Depth::Infinity
            } else {
                loadgen::webdav::Depth::One
            };
            loadgen::webdav::pull_vault(&client, &t.vault, depth)
                .await
                .with_context(|| format!("pulling into {}", t.vault.display()))?
        };
        return print_transfer(&t, &target, push, idx, &report);
    }
    let devices = ensure_devices(&target, &t.conn, idx + 1).await?;
    let dev = &devices[idx];
    let report = if push {
        let opts = PushOpts {
            in_flight: t.in_flight,
            checkpoint_every: t.checkpoint_every,
        };
        push_vault(dev, &t.vault, &opts)
            .await
            .with_context(|| format!("pushing {}", t.vault.display()))?
    } else {
        pull_vault(dev, &t.vault, t.since)
            .await
            .with_context(|| format!("pulling into {}", t.vault.display()))?
    };
    print_transfer(&t, &target, push, idx, &report)
}

fn print_transfer(
    t: &TransferArgs,
    target: &Target,
    push: bool,
    idx: usize,
    report: &TransferReport,
) -> anyhow::Result<i32> {
    let op = if push { "push" } else { "pull" };
    let rss = peak_rss_kib();
    if t.json {
        let doc = TransferDoc {
            op,
            target: target.base(),
            seed: t.conn.seed,
            vault: t.vault.display().to_string(),
            device: idx,
            peak_rss_kib: rss,
            report,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", human_transfer(op, report, &t.vault, rss));
    }
    Ok(exit::OK)
}

//! `load push|pull`: a whole-vault transfer through the protocol's side of the seam, and its
//! output. Push and pull share the connection and output flags; each shows only its own.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

use contract::exit;
use loadgen::{FeedBounds, FeedOverrides, TransferReport};

use super::conn::{Checker, ConnArgs};
use super::report::{human_transfer, peak_rss_kib};
use crate::sample::protocols::load::{Op, TransferJob};
use crate::sample::protocols::{self, ProtocolImpl};

/// The runtime of a pull is sized for this many connections (what `--in-flight` gave it
/// when push and pull shared their flags).
pub(super) const PULL_CONNECTIONS: usize = 4;

/// What `load push` and `load pull` share.
#[derive(Debug, Clone, clap::Args)]
pub struct TransferArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The vault directory (push: must exist; pull: created if missing).
    #[arg(help_heading = "Load", long, value_name = "DIR")]
    pub vault: PathBuf,
    /// Which enrolled device acts (protocols that enrol devices; default: 0 for push, 1 for
    /// pull).
    #[arg(help_heading = "Load", long, value_name = "I")]
    pub device: Option<usize>,
    /// Upper bound on the whole push or pull, every request included: `1h`, `90s` (sized
    /// from `vault100k`); past it the transfer stops with one line naming this flag.
    #[arg(help_heading = "Bounds", long, value_name = "DURATION", default_value = "1h", value_parser = contract::parse::duration)]
    pub transfer_timeout: Duration,
    /// Print one JSON document on stdout instead of the summary.
    #[arg(help_heading = "Output", long)]
    pub json: bool,
}

/// `load push` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct PushArgs {
    #[command(flatten)]
    pub common: TransferArgs,
    /// Files in flight.
    #[arg(help_heading = "Load", long, value_name = "N", default_value_t = 4)]
    pub in_flight: usize,
    /// A throughput checkpoint every N files.
    #[arg(help_heading = "Load", long, value_name = "N", default_value_t = 1000)]
    pub checkpoint_every: usize,
    /// Make the server's vault equal the folder, as a sync client run once per sync does:
    /// read the server's listing first, skip what it holds with the same content, and delete
    /// on the server what the folder no longer has (obsync-v1 only).
    #[arg(help_heading = "Load", long)]
    pub mirror: bool,
}

/// `load pull` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct PullArgs {
    #[command(flatten)]
    pub common: TransferArgs,
    /// Start after this change-feed seq (protocols whose feed counts by seq).
    #[arg(help_heading = "Load", long, default_value_t = 0)]
    pub since: u64,
    /// List the vault with one recursive listing (`Depth: infinity`) instead of one per
    /// folder (protocols that list folders).
    #[arg(help_heading = "Load", long)]
    pub depth_infinity: bool,
    /// Make the folder equal the server's vault: pull the whole feed, then remove every file
    /// and folder the server does not list (obsync-v1 only; conflicts with --since).
    #[arg(help_heading = "Load", long, conflicts_with = "since")]
    pub mirror: bool,
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help = feed_help("Most entries the walk of the changes feed may list", |b| b.max_entries.to_string()))]
    pub feed_max_entries: Option<u64>,
    #[arg(help_heading = "Bounds", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help = feed_help("Most pages the walk of the changes feed may ask for", |b| b.max_pages.to_string()))]
    pub feed_max_pages: Option<u64>,
    #[arg(help_heading = "Bounds", long, value_name = "BYTES", value_parser = crate::prepare::parse_bytes, help = format!("Most bytes of documents the pull may hold at once, for a protocol whose pull holds documents (chunks until their file is written, files waiting for chunks, what is kept of each file); each answer is capped at what is left [default: {}MiB]", FeedBounds::HELD_BYTES_DEFAULT >> 20))]
    pub feed_max_bytes: Option<u64>,
}

/// A `--feed-max-*` help line with every registered feed's default, from the registry.
fn feed_help(what: &str, value: fn(&FeedBounds) -> String) -> String {
    let defaults: Vec<String> = protocols::REGISTRY
        .iter()
        .filter_map(|p| {
            p.spec()
                .feed
                .map(|f| format!("{} {}", p.spec().name, value(&f)))
        })
        .collect();
    format!("{what} [default: {}]", defaults.join(", "))
}

impl PushArgs {
    /// `load push`.
    pub(super) async fn run(self) -> anyhow::Result<i32> {
        if self.in_flight == 0 {
            bail!("--in-flight 0: must be at least 1");
        }
        if self.checkpoint_every == 0 {
            bail!("--checkpoint-every 0: must be at least 1");
        }
        let op = Op::Push {
            in_flight: self.in_flight,
            checkpoint_every: self.checkpoint_every,
            mirror: self.mirror,
        };
        run_transfer(&self.common, op, FeedOverrides::default()).await
    }
}

impl PullArgs {
    /// `load pull`.
    pub(super) async fn run(self) -> anyhow::Result<i32> {
        let op = Op::Pull {
            since: self.since,
            depth_infinity: self.depth_infinity,
            mirror: self.mirror,
        };
        let feed = FeedOverrides {
            max_entries: self.feed_max_entries,
            max_pages: self.feed_max_pages,
            max_bytes: self.feed_max_bytes,
        };
        run_transfer(&self.common, op, feed).await
    }
}

/// A push or pull within `--transfer-timeout`: past it, one line naming the flag.
async fn run_transfer(t: &TransferArgs, op: Op, feed: FeedOverrides) -> anyhow::Result<i32> {
    let limit = t.transfer_timeout;
    let push = matches!(op, Op::Push { .. });
    match tokio::time::timeout(limit, transfer(t, op, feed)).await {
        Ok(r) => r,
        Err(_) => bail!(
            "the {} did not finish within {} (bound --transfer-timeout)",
            if push { "push" } else { "pull" },
            contract::quote::duration(limit)
        ),
    }
}

async fn transfer(t: &TransferArgs, op: Op, feed: FeedOverrides) -> anyhow::Result<i32> {
    let imp: &'static dyn ProtocolImpl = t.conn.protocol()?;
    let push = matches!(op, Op::Push { .. });
    let mirror = matches!(
        op,
        Op::Push { mirror: true, .. } | Op::Pull { mirror: true, .. }
    );
    if mirror && imp.spec().name != contract::protocol::DEFAULT_NAME {
        bail!(
            "--mirror: only {} transfers can mirror; {} cannot",
            contract::protocol::DEFAULT_NAME,
            imp.spec().name
        );
    }
    if push {
        match std::fs::metadata(&t.vault) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--vault {}: not a directory", t.vault.display()),
            Err(e) => bail!("--vault {}: {e}", t.vault.display()),
        }
    }
    let idx = t.device.unwrap_or(if push { 0 } else { 1 });
    let check = Checker::of(imp, &t.conn)?;
    let conn = check.conn();
    let done = imp
        .load_transfer(TransferJob {
            conn: &conn,
            vault: &t.vault,
            device: idx,
            op,
            feed,
        })
        .await?;
    print_transfer(t, &done.target, push, idx, &done.report)
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

fn print_transfer(
    t: &TransferArgs,
    target: &str,
    push: bool,
    idx: usize,
    report: &TransferReport,
) -> anyhow::Result<i32> {
    let op = if push { "push" } else { "pull" };
    let rss = peak_rss_kib();
    if t.json {
        let doc = TransferDoc {
            op,
            target,
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

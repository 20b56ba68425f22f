//! Measures fsyncs per new note (one chunk PUT + one version post, signed) from the server's
//! own `/metrics`, without and with `--group-commit`, at 1 and 8 notes in flight.
//!
//! `cargo run -p refserver --example fsyncs_per_note -- [NOTES]` (default 400 notes per cell).
//! Each cell is a fresh in-process server on a fresh temp dir; setup requests are excluded by
//! reading the counters before and after the notes.

#[path = "../tests/it/client.rs"]
mod client;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use client::Api;
use refserver::{ServerConfig, TestServer};

const KEYS: &[(&str, &str)] = &[
    ("chunk_file", "obsync_fsyncs_total{kind=\"chunk_file\"}"),
    ("chunk_dir", "obsync_fsyncs_total{kind=\"chunk_dir\"}"),
    ("journal", "obsync_fsyncs_total{kind=\"journal\"}"),
    ("nonce_log", "obsync_fsyncs_total{kind=\"nonce_log\"}"),
];

struct Cell {
    per_note: BTreeMap<&'static str, f64>,
    total: f64,
    journal_records_per_flush: f64,
    wall_ms: u128,
}

async fn measure(group_commit: bool, in_flight: usize, notes: usize) -> anyhow::Result<Cell> {
    let dir = tempfile::tempdir()?;
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.group_commit = group_commit;
    let server = TestServer::start(cfg)?;
    let api = Arc::new(Api::new(&server.url(), 0x5eed));
    let a = api.setup(&server.setup_token).await;
    let before = api.metrics().await;
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..in_flight {
        let api = api.clone();
        let a = a.clone();
        workers.push(tokio::spawn(async move {
            for i in (w..notes).step_by(in_flight) {
                let body = format!("# note {i}\n\n{}\n", "lorem ipsum ".repeat(100));
                api.new_note(&a, &format!("{i:032x}"), body.as_bytes())
                    .await;
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    let wall_ms = started.elapsed().as_millis();
    let after = api.metrics().await;
    server.shutdown();
    let d = |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    let n = notes as f64;
    let per_note: BTreeMap<&'static str, f64> =
        KEYS.iter().map(|(name, key)| (*name, d(key) / n)).collect();
    let total = per_note.values().sum();
    Ok(Cell {
        per_note,
        total,
        journal_records_per_flush: d("obsync_journal_records_total")
            / d("obsync_journal_flushes_total").max(1.0),
        wall_ms,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let notes: usize = match std::env::args().nth(1) {
        None => 400,
        Some(s) => s
            .parse()
            .map_err(|_| anyhow::anyhow!("notes {s:?} is not a positive integer"))?,
    };
    anyhow::ensure!(notes > 0, "notes must be at least 1");
    println!("fsyncs per new note (chunk PUT + version post), {notes} notes per cell");
    println!(
        "{:<13} {:>9} {:>10} {:>9} {:>8} {:>9} {:>7} {:>12} {:>8}",
        "group_commit",
        "in_flight",
        "chunk_file",
        "chunk_dir",
        "journal",
        "nonce_log",
        "total",
        "recs/jflush",
        "wall_ms"
    );
    for group_commit in [false, true] {
        for in_flight in [1, 8] {
            let c = measure(group_commit, in_flight, notes).await?;
            println!(
                "{:<13} {:>9} {:>10.3} {:>9.3} {:>8.3} {:>9.3} {:>7.3} {:>12.2} {:>8}",
                if group_commit { "on" } else { "off" },
                in_flight,
                c.per_note["chunk_file"],
                c.per_note["chunk_dir"],
                c.per_note["journal"],
                c.per_note["nonce_log"],
                c.total,
                c.journal_records_per_flush,
                c.wall_ms
            );
        }
    }
    Ok(())
}

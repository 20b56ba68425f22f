//! `vaultbench history append|import`: the history of a scenario on one machine class, one
//! JSON line per accepted recording (`contract::history`), kept in the user's repository under
//! `<DIR>/<class>/<scenario>.jsonl`. `append` adds one recording (what the trend job runs
//! after each accepted post-merge recording); `import` adds every recording found under a
//! directory, oldest first. A recording whose baseline does not match its sidecar is refused
//! (as `verify` would); a recording already in the history (same commit and date) is skipped.
//!
//! Exit codes: 0 appended (or already there); 2 an unreadable input; 6 a recording that does
//! not verify.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use contract::history::{HistoryEntry, parse_lines};

use crate::commands::verify::{read_pair, sidecar_of};

/// Build the history a trend is detected over.
#[derive(Debug, clap::Subcommand)]
pub enum HistoryCmd {
    /// Append one recording's summary to its history file.
    Append(AppendArgs),
    /// Append every recording under a directory, oldest first.
    Import(ImportArgs),
}

/// Where the history lives.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryDir {
    /// The history directory: each scenario's history on each machine class is
    /// `DIR/<class>/<scenario>.jsonl`.
    #[arg(long = "history", value_name = "DIR", default_value = "perf/history")]
    pub root: PathBuf,
}

/// `history append` flags.
#[derive(Debug, clap::Args)]
pub struct AppendArgs {
    /// The recording: a baseline (`<scenario>.json`) with its sidecar beside it.
    #[arg(value_name = "RECORDING")]
    pub recording: PathBuf,
    #[command(flatten)]
    pub history: HistoryDir,
    /// The commit the recording measured, when its target was not a `git:REV` (which
    /// records its own).
    #[arg(long, value_name = "SHA")]
    pub commit: Option<String>,
    /// The commit's subject line (with `--commit`).
    #[arg(long, value_name = "TEXT")]
    pub subject: Option<String>,
}

/// `history import` flags.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A directory of recordings (searched up to six levels deep).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub history: HistoryDir,
}

pub fn run(cmd: HistoryCmd) -> anyhow::Result<i32> {
    match cmd {
        HistoryCmd::Append(a) => {
            let entry = match read_entry(&a.recording, a.commit, a.subject)? {
                Ok(e) => e,
                Err(why) => return Ok(mismatch(&why)),
            };
            let (file, added) = append(&a.history.root, &[entry])?;
            report(&file, added, 1);
            Ok(crate::exit::OK)
        }
        HistoryCmd::Import(a) => {
            let mut files = Vec::new();
            recordings_under(&a.dir, 6, &mut files)?;
            if files.is_empty() {
                bail!(
                    "{}: no recording (a <scenario>.json with its .provenance.json) found",
                    a.dir.display()
                );
            }
            let mut entries = Vec::new();
            for f in &files {
                match read_entry(f, None, None)? {
                    Ok(e) => entries.push(e),
                    Err(why) => return Ok(mismatch(&why)),
                }
            }
            // Oldest first: a directory has no commit order, so the recordings' dates give it.
            entries.sort_by(|a, b| a.date.cmp(&b.date));
            let mut groups: BTreeMap<(String, String), Vec<HistoryEntry>> = BTreeMap::new();
            for e in entries {
                groups
                    .entry((e.machine_class.clone(), e.scenario.clone()))
                    .or_default()
                    .push(e);
            }
            for group in groups.values() {
                let (file, added) = append(&a.history.root, group)?;
                report(&file, added, group.len());
            }
            Ok(crate::exit::OK)
        }
    }
}

fn report(file: &Path, added: usize, of: usize) {
    let skipped = of - added;
    if skipped > 0 {
        eprintln!(
            "{}: {added} appended, {skipped} already there",
            file.display()
        );
    } else {
        eprintln!("{}: {added} appended", file.display());
    }
    println!("{}", file.display());
}

/// Says why nothing was appended and gives `verify`'s code.
fn mismatch(why: &str) -> i32 {
    eprintln!("vaultbench: {why}");
    crate::exit::MISMATCH
}

/// A recording as a history line; the inner `Err` says why it does not verify.
fn read_entry(
    path: &Path,
    commit: Option<String>,
    subject: Option<String>,
) -> anyhow::Result<Result<HistoryEntry, String>> {
    let (b, p) = read_pair(path)?;
    let bad = reports::schema::verify_pair(&b, &p);
    if let Some(m) = bad.first() {
        return Ok(Err(format!(
            "{}: does not verify against its sidecar ({}: {}): nothing appended",
            path.display(),
            m.key,
            m.detail
        )));
    }
    Ok(Ok(reports::trend::entry_of(&b, &p, commit, subject)))
}

/// The history file of an entry.
pub fn file_of(dir: &Path, e: &HistoryEntry) -> PathBuf {
    dir.join(&e.machine_class)
        .join(format!("{}.jsonl", e.scenario))
}

/// Reads a history file (every line checked).
pub fn read_history(path: &Path) -> anyhow::Result<Vec<HistoryEntry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_lines(&text).map_err(|e| anyhow::anyhow!("{} {e}", path.display()))
}

/// Appends entries of one class and scenario to their file; returns the file and how many
/// were new (an entry with the commit and date of one already there is skipped).
fn append(dir: &Path, entries: &[HistoryEntry]) -> anyhow::Result<(PathBuf, usize)> {
    let Some(first) = entries.first() else {
        bail!("nothing to append");
    };
    let file = file_of(dir, first);
    let mut old = if file.exists() {
        read_history(&file)?
    } else {
        Vec::new()
    };
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let mut added = 0;
    for e in entries {
        if old.iter().any(|o| o.commit == e.commit && o.date == e.date) {
            continue;
        }
        text.push_str(&e.to_line());
        old.push(e.clone());
        added += 1;
    }
    if added > 0 {
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        crate::atomic::write_atomic(&file, text.as_bytes())?;
    }
    Ok((file, added))
}

/// Every recording (a baseline whose sidecar sits beside it) under `dir`, sorted by path.
fn recordings_under(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut items: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    items.sort();
    for p in items {
        if p.is_dir() {
            if depth > 0 {
                recordings_under(&p, depth - 1, out)?;
            }
            continue;
        }
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".json")
            && !name.ends_with(".provenance.json")
            && sidecar_of(&p).is_file()
        {
            out.push(p);
        }
    }
    Ok(())
}

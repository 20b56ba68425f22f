//! `vaultbench vault bench`: how close generation is to the disk. Writes each profile with
//! the generator, then the same paths and sizes from a plain buffer (the floor), both with
//! the same durability (temp dir, one flush, rename), and prints generator/floor and the
//! peak RSS of the generator run (the generator's targets: ratio <= 1.5, peak < 64 MiB).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Serialize;

use super::profile::{lookup_profile, seed_or_default};
use crate::exit;
use crate::prepare::vault::{install, sync_tree, temp_beside, write_vault};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Profiles to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "large,vault100k")]
    pub profiles: Vec<String>,
    /// Directory to write into (a scratch dir is made inside and removed) [default: the
    /// system temp dir]. Put it on the filesystem you care about.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Deprecated spelling of --work-dir.
    #[arg(
        long = "dir",
        hide = true,
        value_name = "DIR",
        conflicts_with = "work_dir"
    )]
    pub dir: Option<PathBuf>,
    /// Seed, decimal or 0x-prefixed hex [default: the profile's, 0x5eed].
    #[arg(long)]
    pub seed: Option<String>,
    /// Rounds per profile (alternating which side goes first); medians are reported.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct ProfileResult {
    profile: String,
    seed: u64,
    files: u64,
    bytes: u64,
    digest: String,
    generator_ms: Vec<u64>,
    /// Generating and hashing every file without writing (the generator's own CPU cost).
    generate_only_ms: u64,
    floor_ms: Vec<u64>,
    /// median(generator) / median(floor).
    ratio: f64,
    /// Peak RSS while the generator wrote the vault (VmHWM after resetting it), KiB.
    peak_rss_kib: Option<u64>,
    /// Whether the kernel let us reset VmHWM before the run (else it is the process peak).
    peak_rss_reset: bool,
}

/// Largest number of rounds accepted (each writes the vault twice).
const MAX_ROUNDS: u32 = 20;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    if a.rounds == 0 || a.rounds > MAX_ROUNDS {
        bail!("bad --rounds {}: expected 1 to {MAX_ROUNDS}", a.rounds);
    }
    let profiles = a
        .profiles
        .iter()
        .map(|n| lookup_profile(n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    crate::interrupt::install();
    if a.dir.is_some() {
        eprintln!(
            "vaultbench: {}",
            crate::commands::renamed("--dir", "--work-dir")
        );
    }
    let base = a
        .work_dir
        .clone()
        .or(a.dir.clone())
        .unwrap_or_else(std::env::temp_dir);
    let scratch = tempfile::Builder::new()
        .prefix("vaultbench-bench-")
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a scratch directory in {}", base.display()))?;
    let mut results = Vec::new();
    for p in &profiles {
        let seed = seed_or_default(p, a.seed.as_deref())?;
        let gen_dir = scratch.path().join(format!("{}-generator", p.name));
        let floor_dir = scratch.path().join(format!("{}-floor", p.name));
        let (mut gen_ms, mut floor_ms) = (Vec::new(), Vec::new());
        let mut files: Option<Vec<(String, u64)>> = None;
        let mut summary = None;
        let mut peak = (None, false);
        for round in 0..a.rounds {
            let floor_first = round % 2 == 1 && files.is_some();
            if floor_first {
                floor_ms.push(floor(files.as_deref().unwrap_or(&[]), &floor_dir)?);
                remove(&floor_dir)?;
            }
            let reset = reset_peak_rss();
            let t = Instant::now();
            let s = write_vault(p, seed, &gen_dir, false)?;
            gen_ms.push(t.elapsed().as_millis() as u64);
            if round == 0 {
                peak = (peak_rss_kib(), reset);
            }
            if files.is_none() {
                // The floor writes the same files in the generator's order (creation order
                // changes how ext4 lays out directories, so it must not differ).
                files = Some(
                    scenarios::generate(p, seed)
                        .map(|f| (f.path, f.size))
                        .collect(),
                );
            }
            remove(&gen_dir)?;
            summary = Some(s);
            if !floor_first {
                floor_ms.push(floor(files.as_deref().unwrap_or(&[]), &floor_dir)?);
                remove(&floor_dir)?;
            }
            eprintln!(
                "vault bench: {} round {}: generator {} ms, floor {} ms",
                p.name,
                round + 1,
                gen_ms.last().unwrap_or(&0),
                floor_ms.last().unwrap_or(&0)
            );
        }
        let s = summary.context("no rounds ran")?;
        let ratio = median(&gen_ms) / median(&floor_ms).max(1.0);
        let t = Instant::now();
        let m = scenarios::manifest(p, seed);
        let generate_only_ms = t.elapsed().as_millis() as u64;
        if s.digest != m.digest {
            bail!(
                "profile {} seed {seed:#x}: the written digest differs from the generator's",
                p.name
            );
        }
        results.push(ProfileResult {
            profile: s.profile,
            seed,
            files: s.files,
            bytes: s.bytes,
            digest: s.digest,
            generator_ms: gen_ms,
            generate_only_ms,
            floor_ms,
            ratio,
            peak_rss_kib: peak.0,
            peak_rss_reset: peak.1,
        });
    }
    if a.json {
        let doc = serde_json::json!({
            "dir": base.display().to_string(),
            "target_ratio": 1.5,
            "rss_limit_mib": 64,
            "profiles": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "written under {} (generator = vault gen; floor = same paths and sizes from a plain buffer)",
            base.display()
        );
        println!(
            "{:<10} {:>8} {:>8} {:>12} {:>10} {:>10} {:>14} {:>14}",
            "profile",
            "files",
            "MiB",
            "generator ms",
            "floor ms",
            "gen/floor",
            "no-disk gen ms",
            "peak RSS MiB"
        );
        for r in &results {
            println!(
                "{:<10} {:>8} {:>8.1} {:>12.0} {:>10.0} {:>10.2} {:>14} {:>14}",
                r.profile,
                r.files,
                r.bytes as f64 / 1048576.0,
                median(&r.generator_ms),
                median(&r.floor_ms),
                r.ratio,
                r.generate_only_ms,
                r.peak_rss_kib.map_or("n/a".to_owned(), |k| format!(
                    "{:.1}{}",
                    k as f64 / 1024.0,
                    if r.peak_rss_reset { "" } else { " (process)" }
                )),
            );
        }
        println!("targets: gen/floor <= 1.5, peak RSS < 64 MiB");
    }
    Ok(exit::OK)
}

/// The workspace's one median (`contract::schema::median`) of millisecond counts; 0 for none.
fn median(v: &[u64]) -> f64 {
    let xs: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    contract::schema::median(&xs).unwrap_or(0.0)
}

/// Removes a measured tree and flushes the deletion, so the next timed side does not pay
/// for this one's writeback (without the flush, whichever side ran first in a round was
/// ~1.5x slower).
fn remove(dir: &Path) -> anyhow::Result<()> {
    fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    sync_tree(dir.parent().unwrap_or(Path::new(".")))
        .with_context(|| format!("cannot flush after removing {}", dir.display()))
}

/// Every file's relative path and size, by walking the tree (checks the floor's output).
#[cfg(test)]
fn list_files(dir: &Path) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for e in fs::read_dir(&abs).with_context(|| format!("cannot list {}", abs.display()))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let m = e.metadata()?;
            if m.is_dir() {
                stack.push((e.path(), child));
            } else {
                out.push((child, m.len()));
            }
        }
    }
    Ok(out)
}

/// Writes the same paths and sizes from one plain buffer with the same durability steps as
/// `write_vault`; returns milliseconds.
fn floor(files: &[(String, u64)], out: &Path) -> anyhow::Result<u64> {
    let buf = vec![b'x'; 1 << 20];
    let t = Instant::now();
    let tmp = temp_beside(out)?;
    let mut made: BTreeSet<PathBuf> = BTreeSet::new();
    for (rel, size) in files {
        if crate::interrupt::requested() {
            return Err(crate::interrupt::Interrupted.into());
        }
        let full = tmp.path().join(rel);
        if let Some(dir) = full.parent()
            && !made.contains(dir)
        {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            made.insert(dir.to_owned());
        }
        let mut f =
            File::create(&full).with_context(|| format!("cannot create {}", full.display()))?;
        let mut left = *size;
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            f.write_all(&buf[..k])
                .with_context(|| format!("cannot write {}", full.display()))?;
            left -= k as u64;
        }
    }
    sync_tree(tmp.path())?;
    install(tmp, out, false)?;
    Ok(t.elapsed().as_millis() as u64)
}

/// Resets the kernel's peak-RSS mark for this process; false when not possible.
fn reset_peak_rss() -> bool {
    procstat::read::reset_peak_rss()
}

/// VmHWM (peak resident set) of this process in KiB.
fn peak_rss_kib() -> Option<u64> {
    procstat::read::peak_rss_kib(procstat::Pid::Current)
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3, 1, 2]), 2.0);
        assert_eq!(median(&[4, 1, 2, 3]), 2.5);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_peak_rss() {
        assert!(peak_rss_kib().unwrap() > 0);
    }

    #[test]
    fn floor_writes_the_same_shape() {
        let d = tempfile::tempdir().unwrap();
        let files = vec![
            ("a/b.md".to_owned(), 10),
            ("c.bin".to_owned(), 3_000_000),
            ("e.md".to_owned(), 0),
        ];
        floor(&files, &d.path().join("f")).unwrap();
        let mut got = list_files(&d.path().join("f")).unwrap();
        got.sort();
        assert_eq!(got, files);
    }
}

//! `vaultbench vault gen|verify|bench|list`: seeded synthetic vaults on disk.
//!
//! The generator itself (`scenarios`) is pure; this module writes its files (temp dir beside
//! the target, one flush, rename), reads trees back into manifests, caches vaults for
//! scenarios, applies edits, and measures generation against the disk.

mod bench;
mod measure;
mod profile;

use std::path::PathBuf;

use anyhow::bail;

pub use crate::prepare::vault::{
    NamePairs, VaultSummary, apply_edit, check_name_pairs, ensure_cached_vault, manifest_of_dir,
    probe_name_pairs, write_vault,
};

use crate::exit;
pub use measure::{measure_dir, profile_from_file, scenario_profile};
pub use profile::{lookup_profile, seed_or_default};

#[derive(Debug, clap::Subcommand)]
pub enum VaultCmd {
    /// Write a seeded synthetic vault to DIR (refuses a non-empty DIR unless --force).
    Gen(GenArgs),
    /// Check a vault on disk against what the generator would produce; names the first
    /// differing path (exit 6, `MISMATCH`, on a mismatch).
    Verify(VerifyArgs),
    /// Time generating `large` and `vault100k` against writing the same files from a plain
    /// buffer (the disk's floor), and report peak memory.
    Bench(bench::BenchArgs),
    /// List the profiles with their default seeds and where their shapes come from.
    List(ListArgs),
    /// Measure a vault directory into a shape file (counts and distributions, never a name
    /// or a byte of content) that `vault gen --profile-file` turns into a synthetic twin.
    Measure(measure::MeasureArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// Profile name (see `vaultbench vault list`).
    #[arg(
        required_unless_present = "profile_file",
        conflicts_with = "profile_file"
    )]
    pub profile: Option<String>,
    /// A shape file written by `vault measure`: generate that vault's synthetic twin.
    #[arg(long, value_name = "FILE")]
    pub profile_file: Option<PathBuf>,
    /// Seed, decimal or 0x-prefixed hex [default: the profile's, 0x5eed].
    #[arg(long)]
    pub seed: Option<String>,
    /// Directory to write the vault to.
    // `--out` is the old spelling, kept as a hidden alias: `--out` names a file everywhere else.
    #[arg(id = "out", long = "out-dir", alias = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// Replace DIR even if it is not empty.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON document (profile, seed, files, bytes, digest) on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The vault directory to check.
    pub dir: PathBuf,
    /// Profile it should have been generated from.
    #[arg(long)]
    pub profile: String,
    /// Seed, decimal or 0x-prefixed hex [default: the profile's, 0x5eed].
    #[arg(long)]
    pub seed: Option<String>,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `vault` subcommand; returns the exit code (see `exit.rs`).
pub fn run(cmd: VaultCmd) -> anyhow::Result<i32> {
    match cmd {
        VaultCmd::Gen(a) => gen_cmd(a),
        VaultCmd::Verify(a) => verify_cmd(a),
        VaultCmd::Bench(a) => bench::run(a),
        VaultCmd::List(a) => list_cmd(a),
        VaultCmd::Measure(a) => measure::run(a),
    }
}

fn gen_cmd(a: GenArgs) -> anyhow::Result<i32> {
    let p = match (&a.profile, &a.profile_file) {
        (_, Some(f)) => profile_from_file(f)?,
        (Some(name), None) => lookup_profile(name)?,
        (None, None) => bail!("name a profile or pass --profile-file"),
    };
    let seed = seed_or_default(&p, a.seed.as_deref())?;
    crate::interrupt::install();
    let s = write_vault(&p, seed, &a.out, a.force)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        println!(
            "wrote vault {} (seed {}) to {}: {} files, {} bytes, digest {}",
            s.profile,
            s.seed_hex,
            a.out.display(),
            s.files,
            s.bytes,
            s.digest
        );
    }
    Ok(exit::OK)
}

fn verify_cmd(a: VerifyArgs) -> anyhow::Result<i32> {
    let p = lookup_profile(&a.profile)?;
    let seed = seed_or_default(&p, a.seed.as_deref())?;
    if !a.dir.is_dir() {
        bail!(
            "vault directory {} does not exist or is not a directory",
            a.dir.display()
        );
    }
    let actual = manifest_of_dir(&a.dir)?;
    let expected = scenarios::manifest(&p, seed);
    let diff = expected.first_difference(&actual);
    if a.json {
        let doc = serde_json::json!({
            "ok": diff.is_none(),
            "dir": a.dir.display().to_string(),
            "profile": p.name,
            "seed": seed,
            "seed_hex": format!("{seed:#x}"),
            "files": actual.entries.len(),
            "bytes": actual.total_bytes(),
            "expected_digest": expected.digest,
            "digest": actual.digest,
            "first_difference": diff.as_ref().map(|d| d.path()),
            "difference": diff.as_ref().map(|d| d.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    match diff {
        None => {
            if !a.json {
                println!(
                    "vault {} matches {} (seed {seed:#x}): {} files, digest {}",
                    a.dir.display(),
                    p.name,
                    actual.entries.len(),
                    actual.digest
                );
            }
            Ok(exit::OK)
        }
        Some(d) => {
            if !a.json {
                println!(
                    "vault {} differs from {} (seed {seed:#x}): first differing path: {d}",
                    a.dir.display(),
                    p.name
                );
            }
            Ok(exit::MISMATCH)
        }
    }
}

fn list_cmd(a: ListArgs) -> anyhow::Result<i32> {
    let profiles: Vec<serde_json::Value> = scenarios::PROFILE_NAMES
        .iter()
        .filter_map(|n| scenarios::profile(n))
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "default_seed": format!("{:#x}", p.default_seed),
                "notes": p.notes,
                "doc": p.doc,
            })
        })
        .collect();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "profiles": profiles }))?
        );
    } else {
        for p in scenarios::PROFILE_NAMES
            .iter()
            .filter_map(|n| scenarios::profile(n))
        {
            println!(
                "{:<10} seed {:#x}  {:>6} notes  {}",
                p.name, p.default_seed, p.notes, p.doc
            );
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_or_default_to_the_profiles() {
        let p = lookup_profile("small").unwrap();
        assert_eq!(seed_or_default(&p, None).unwrap(), p.default_seed);
        assert_eq!(seed_or_default(&p, Some("0X_FF")).unwrap(), 255);
        let e = seed_or_default(&p, Some("0xzz")).unwrap_err().to_string();
        assert!(e.contains("bad seed \"0xzz\""), "{e}");
    }

    #[test]
    fn unknown_profile_names_the_input() {
        let e = lookup_profile("tiny").unwrap_err().to_string();
        assert!(e.starts_with("unknown profile \"tiny\""), "{e}");
        assert!(e.contains("vault100k"));
    }
}

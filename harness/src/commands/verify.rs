//! `vaultbench verify [PATH]`: the baseline's coherence check. Recomputes medians from the raw
//! series, compares exact keys with their snapshot, checks format version and binding digest.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

use reports::schema::{Baseline, Provenance, verify_pair};

/// Verify committed baselines: a hand-edited value fails and names the key (exit 6, `MISMATCH`).
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// A baseline (`<scenario>.json`), its sidecar, or a directory of baselines: the baselines
    /// in it and in each class directory under it (`baselines/<class>/`).
    #[arg(default_value = "baselines")]
    pub path: PathBuf,
    /// Print the result as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The baseline files a path names.
pub fn baseline_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                n.ends_with(".json") && !n.ends_with(".provenance.json") && !n.starts_with('.')
            })
            .collect();
        v.sort();
        if v.is_empty() {
            bail!("{} holds no baselines", path.display());
        }
        return Ok(v);
    }
    let s = path.display().to_string();
    if let Some(stem) = s.strip_suffix(".provenance.json") {
        return Ok(vec![PathBuf::from(format!("{stem}.json"))]);
    }
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    Ok(vec![path.to_path_buf()])
}

/// The baselines a `verify` path names: those of [`baseline_files`], and for a directory also
/// those one level down, in every machine class directory (`baselines/<class>/<scenario>.json`).
pub fn baseline_files_deep(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return baseline_files(path);
    }
    let mut v = baseline_files(path).unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        v.extend(baseline_files(&d).unwrap_or_default());
    }
    if v.is_empty() {
        bail!(
            "{} holds no baselines, neither directly nor in a class directory",
            path.display()
        );
    }
    Ok(v)
}

/// The sidecar beside a baseline.
pub fn sidecar_of(baseline: &Path) -> PathBuf {
    let s = baseline.display().to_string();
    PathBuf::from(format!(
        "{}.provenance.json",
        s.strip_suffix(".json").unwrap_or(&s)
    ))
}

/// Reads a baseline and its sidecar, refusing newer formats with advice.
pub fn read_pair(path: &Path) -> anyhow::Result<(Baseline, Provenance)> {
    let side = sidecar_of(path);
    let b = read_versioned::<Baseline>(path, reports::schema::KIND_BASELINE)?;
    let p = read_versioned::<Provenance>(&side, reports::schema::KIND_PROVENANCE)?;
    Ok((b, p))
}

fn read_versioned<T: serde::de::DeserializeOwned>(path: &Path, kind: &str) -> anyhow::Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    contract::format::decode_slice(&bytes, kind)
        .map_err(|e| anyhow::anyhow!("{} {e}", path.display()))
}

pub fn run(args: VerifyArgs) -> anyhow::Result<i32> {
    let files = baseline_files_deep(&args.path)?;
    let mut all_ok = true;
    let mut report = serde_json::Map::new();
    for f in &files {
        let (b, p) = read_pair(f)?;
        let mut mismatches = verify_pair(&b, &p);
        // A baseline is filed as `<scenario>.json`: one under another scenario's name would be
        // compared against the wrong runs.
        let stem = f
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .unwrap_or("");
        if stem != b.scenario {
            mismatches.push(reports::schema::Mismatch {
                key: "scenario".into(),
                detail: format!(
                    "the file is named for scenario {stem:?} but holds scenario {:?}",
                    b.scenario
                ),
            });
        }
        // A baseline in a class directory must have been recorded on a machine of that class,
        // or `compare` would judge a recording against another machine's numbers.
        let dir = f
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if contract::class::looks_like_class(dir)
            && let Some(recorded) = crate::commands::class::of_recorded(&p.machine)
            && recorded != dir
        {
            mismatches.push(reports::schema::Mismatch {
                key: "class".into(),
                detail: format!(
                    "the file is in class directory {dir:?} but was recorded on a machine of class {recorded:?}"
                ),
            });
        }
        if mismatches.is_empty() {
            let line = format!(
                "ok  {} ({} keys, {} samples, digest {})",
                f.display(),
                b.metrics.len(),
                b.samples,
                &p.digest[..12.min(p.digest.len())]
            );
            // The result goes to stdout, where scripts read it (failures go to stderr); with
            // --json stdout holds the one document, so the line goes to stderr.
            if args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        } else {
            all_ok = false;
            for m in &mismatches {
                eprintln!("FAIL {}: {}: {}", f.display(), m.key, m.detail);
            }
        }
        report.insert(f.display().to_string(), serde_json::to_value(&mismatches)?);
    }
    if args.json {
        println!("{}", serde_json::json!({ "ok": all_ok, "files": report }));
    }
    Ok(if all_ok {
        crate::exit::OK
    } else {
        crate::exit::MISMATCH
    })
}

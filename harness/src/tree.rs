//! The manifest and digest of a vault tree on disk (every file, hidden ones too): what a pull
//! is checked against, and what a user's vault is summarised by.

use std::fs::{self, File};
use std::path::Path;

use anyhow::{Context, bail};
use scenarios::{Manifest, ManifestEntry};

/// Reads every file under `dir` (hidden ones too) into a manifest.
pub fn manifest_of_dir(dir: &Path) -> anyhow::Result<Manifest> {
    let meta = fs::metadata(dir)
        .with_context(|| format!("vault directory {} cannot be read", dir.display()))?;
    if !meta.is_dir() {
        bail!("vault path {} is not a directory", dir.display());
    }
    let mut entries = Vec::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, relp)) = stack.pop() {
        for entry in fs::read_dir(&abs).with_context(|| format!("cannot list {}", abs.display()))? {
            let entry = entry.with_context(|| format!("cannot list {}", abs.display()))?;
            let name = entry.file_name();
            let name = name.to_str().with_context(|| {
                format!(
                    "file name {:?} under {} is not UTF-8",
                    entry.file_name(),
                    abs.display()
                )
            })?;
            let child = if relp.is_empty() {
                name.to_owned()
            } else {
                format!("{relp}/{name}")
            };
            let ft = entry
                .file_type()
                .with_context(|| format!("cannot inspect {}", entry.path().display()))?;
            if ft.is_dir() {
                stack.push((entry.path(), child));
            } else if ft.is_file() {
                let file = File::open(entry.path())
                    .with_context(|| format!("cannot open {}", entry.path().display()))?;
                let (size, sha256) = scenarios::hash_reader(file)
                    .with_context(|| format!("cannot read {}", entry.path().display()))?;
                entries.push(ManifestEntry {
                    path: child,
                    size,
                    sha256,
                });
            } else {
                // A symlink or special file is never generated: record it so it is reported.
                entries.push(ManifestEntry {
                    path: child,
                    size: 0,
                    sha256: "not-a-regular-file".into(),
                });
            }
        }
    }
    Ok(Manifest::from_entries(entries))
}

/// The digest of the tree under `dir` (every file, hidden ones too), comparable with
/// `VaultSummary::digest` and `scenarios::Manifest::digest`.
pub fn tree_digest(dir: &Path) -> anyhow::Result<String> {
    Ok(manifest_of_dir(dir)?.digest)
}

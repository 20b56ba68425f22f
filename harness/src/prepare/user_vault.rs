//! `--vault DIR`: a user's own vault in place of the scenario profile's generated one.
//!
//! The directory is read, never written: what the protocol can carry is copied into the
//! run's work dir (deleted with it), and the samples push, pull and edit that copy. The
//! recording keeps the copy's manifest digest, its file count and bytes, and how many entries
//! were skipped: never a name or a byte of content. A file the protocol cannot carry (not a
//! regular file, a name that is not UTF-8, a path with a backslash, which the signed protocol
//! refuses and path-addressed servers map differently, or vaultbench's own temp-file prefix) is
//! listed once on stderr, with its reason, and skipped; nothing is skipped silently.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use contract::schema::UserVault;

/// At most this many entries (files, folders and skipped ones) are read from a user's vault:
/// a bound on a mistyped `--vault /`.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Folders deeper than this are skipped (a link farm or a mistake, not a vault).
pub const MAX_DEPTH: usize = 64;

/// One entry that was not carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path inside the vault, lossily decoded for display.
    pub path: String,
    pub reason: &'static str,
}

/// The copy a run uses, and what the recording says of it.
#[derive(Debug)]
pub struct Snapshot {
    pub dir: PathBuf,
    pub info: UserVault,
    pub skipped: Vec<Skipped>,
}

/// Copies what can be carried from `src` into `dest` (created; must not exist), sorted, and
/// returns the copy's summary.
pub fn snapshot(src: &Path, dest: &Path) -> anyhow::Result<Snapshot> {
    let meta = fs::metadata(src).with_context(|| format!("--vault {}", src.display()))?;
    if !meta.is_dir() {
        bail!("--vault {} is not a directory", src.display());
    }
    let src = fs::canonicalize(src).with_context(|| format!("--vault {}", src.display()))?;
    let dest_abs = dest
        .parent()
        .map(fs::canonicalize)
        .transpose()
        .ok()
        .flatten()
        .unwrap_or_default();
    if dest_abs.starts_with(&src) {
        bail!(
            "--vault {}: the work dir {} is inside the vault; pass a --work-dir outside it",
            src.display(),
            dest.display()
        );
    }
    fs::create_dir(dest).with_context(|| format!("creating {}", dest.display()))?;
    let mut skipped = Vec::new();
    let mut seen = 0usize;
    // (absolute source dir, its vault-relative path, depth)
    let mut stack = vec![(src.clone(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let mut names: BTreeMap<Vec<u8>, fs::DirEntry> = BTreeMap::new();
        for e in
            fs::read_dir(&dir).with_context(|| format!("--vault: cannot list {}", dir.display()))?
        {
            let e = e.with_context(|| format!("--vault: cannot list {}", dir.display()))?;
            use std::os::unix::ffi::OsStrExt;
            names.insert(e.file_name().as_bytes().to_vec(), e);
            seen += 1;
            if seen > MAX_ENTRIES {
                bail!(
                    "--vault {} has more than {MAX_ENTRIES} entries: is it really a vault?",
                    src.display()
                );
            }
        }
        // Pushed in reverse so the walk goes in sorted order.
        let mut subdirs = Vec::new();
        for (raw, e) in names {
            let shown = String::from_utf8_lossy(&raw).into_owned();
            let child_rel = |name: &str| {
                if rel.is_empty() {
                    name.to_owned()
                } else {
                    format!("{rel}/{name}")
                }
            };
            let mut skip = |reason| {
                skipped.push(Skipped {
                    path: child_rel(&shown),
                    reason,
                })
            };
            let Ok(name) = String::from_utf8(raw) else {
                skip("its name is not UTF-8");
                continue;
            };
            if name.contains('\\') {
                skip(
                    "its name has a backslash (the signed protocol refuses it; path-addressed servers disagree on it)",
                );
                continue;
            }
            if name.starts_with(".vbtmp-") {
                skip("its name has vaultbench's temp-file prefix .vbtmp-");
                continue;
            }
            let ft = e
                .file_type()
                .with_context(|| format!("--vault: cannot inspect {}", e.path().display()))?;
            let to = dest.join(child_rel(&name));
            if ft.is_dir() {
                if depth + 1 > MAX_DEPTH {
                    skip("it is nested deeper than 64 folders");
                    continue;
                }
                fs::create_dir(&to).with_context(|| format!("creating {}", to.display()))?;
                subdirs.push((e.path(), child_rel(&name), depth + 1));
            } else if ft.is_file() {
                copy_file(&e.path(), &to)?;
            } else if ft.is_symlink() {
                skip("it is a symbolic link");
            } else {
                skip("it is not a regular file");
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    let manifest = crate::prepare::vault::manifest_of_dir(dest)?;
    let bytes = manifest.entries.iter().map(|e| e.size).sum();
    Ok(Snapshot {
        dir: dest.to_path_buf(),
        info: UserVault {
            manifest_digest: manifest.digest.clone(),
            files: manifest.entries.len() as u64,
            bytes,
            skipped: skipped.len() as u64,
        },
        skipped,
    })
}

/// Copies one file's bytes (not its permissions: the copy is the harness's, writable).
fn copy_file(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut r =
        fs::File::open(from).with_context(|| format!("--vault: cannot read {}", from.display()))?;
    let mut w = fs::File::create(to).with_context(|| format!("creating {}", to.display()))?;
    std::io::copy(&mut r, &mut w)
        .with_context(|| format!("--vault: copying {}", from.display()))?;
    Ok(())
}

/// Prints the skipped entries once (at most 20 named, then a count).
pub fn report_skipped(skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    eprintln!(
        "--vault: {} entr{} the protocol cannot carry, skipped:",
        skipped.len(),
        if skipped.len() == 1 { "y" } else { "ies" }
    );
    for s in skipped.iter().take(20) {
        eprintln!("  {:?}: {}", s.path, s.reason);
    }
    if skipped.len() > 20 {
        eprintln!("  ... and {} more", skipped.len() - 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_what_it_can_skips_the_rest_by_name_and_leaves_the_source_alone() {
        use std::os::unix::ffi::OsStrExt;
        let src = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir_all(s.join("Notes/Deep")).unwrap();
        fs::create_dir(s.join(".obsidian")).unwrap();
        fs::create_dir(s.join("Empty")).unwrap();
        fs::write(s.join("Notes/a.md"), "# a\n[[b]]\n").unwrap();
        fs::write(s.join("Notes/Deep/b.md"), "b").unwrap();
        fs::write(s.join(".obsidian/app.json"), "{}").unwrap();
        fs::write(s.join("back\\slash.md"), "x").unwrap();
        fs::write(s.join(".vbtmp-1"), "x").unwrap();
        fs::write(s.join(std::ffi::OsStr::from_bytes(b"bad\xff.md")), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.join("link.md")).unwrap();
        let listing = |d: &Path| {
            let mut v = Vec::new();
            let mut stack = vec![d.to_path_buf()];
            while let Some(d) = stack.pop() {
                for e in fs::read_dir(&d).unwrap() {
                    let e = e.unwrap();
                    let m = fs::symlink_metadata(e.path()).unwrap();
                    if m.is_dir() {
                        stack.push(e.path());
                    }
                    v.push((e.path(), m.len(), m.modified().unwrap()));
                }
            }
            v.sort();
            v
        };
        let before = listing(s);
        let work = tempfile::tempdir().unwrap();
        let snap = snapshot(s, &work.path().join("vault")).unwrap();
        assert_eq!(snap.info.files, 3);
        assert_eq!(snap.info.bytes, 10 + 1 + 2);
        assert_eq!(snap.info.skipped, 4);
        let mut reasons: Vec<_> = snap.skipped.iter().map(|k| k.path.as_str()).collect();
        reasons.sort();
        assert_eq!(
            reasons,
            [".vbtmp-1", "back\\slash.md", "bad\u{fffd}.md", "link.md"]
        );
        assert!(snap.dir.join("Empty").is_dir());
        assert_eq!(
            fs::read_to_string(snap.dir.join("Notes/a.md")).unwrap(),
            "# a\n[[b]]\n"
        );
        // The source is untouched, and the same source gives the same digest.
        assert_eq!(listing(s), before);
        let again = snapshot(s, &work.path().join("vault2")).unwrap();
        assert_eq!(again.info, snap.info);
        // The summary holds no name.
        let text = serde_json::to_string(&snap.info).unwrap();
        assert!(!text.contains("Notes") && !text.contains(".md"), "{text}");
    }

    #[test]
    fn refuses_a_file_a_missing_dir_and_a_work_dir_inside_the_vault() {
        let src = tempfile::tempdir().unwrap();
        let f = src.path().join("f");
        fs::write(&f, "x").unwrap();
        let e = snapshot(&f, &src.path().join("o")).unwrap_err().to_string();
        assert!(e.contains("is not a directory"), "{e}");
        let e = snapshot(&src.path().join("missing"), &src.path().join("o"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--vault"), "{e}");
        let e = format!(
            "{:#}",
            snapshot(src.path(), &src.path().join("inside")).unwrap_err()
        );
        assert!(e.contains("inside the vault"), "{e}");
    }
}

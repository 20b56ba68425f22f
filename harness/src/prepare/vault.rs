//! Writing a generated vault to disk (temp dir beside the target, one `syncfs`, rename),
//! reading a tree back into a manifest, the reusable vault cache, and applying edits.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use scenarios::edits::Edit;
use scenarios::{Manifest, ManifestEntry, Profile};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What `vault gen` wrote (printed with `--json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VaultSummary {
    pub profile: String,
    pub seed: u64,
    /// The seed as `0x...`, as users type it.
    pub seed_hex: String,
    pub files: u64,
    pub bytes: u64,
    /// SHA-256 over the manifest (see `scenarios::Manifest`).
    pub digest: String,
}

impl VaultSummary {
    fn new(p: &Profile, seed: u64, m: &Manifest) -> VaultSummary {
        VaultSummary {
            profile: p.name.to_owned(),
            seed,
            seed_hex: format!("{seed:#x}"),
            files: m.entries.len() as u64,
            bytes: m.total_bytes(),
            digest: m.digest.clone(),
        }
    }
}

/// Whether a filesystem keeps names apart that differ only by case or by Unicode
/// normalisation (macOS APFS/HFS+ and Windows fold at least one of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamePairs {
    pub case_distinct: bool,
    pub normalisation_distinct: bool,
}

/// Probes `dir` by creating each name of a pair with `create_new`: a folding filesystem
/// reports the second as already existing.
pub fn probe_name_pairs(dir: &Path) -> io::Result<NamePairs> {
    let distinct = |a: &str, b: &str| -> io::Result<bool> {
        let (pa, pb) = (dir.join(a), dir.join(b));
        OpenOptions::new().write(true).create_new(true).open(&pa)?;
        let second = OpenOptions::new().write(true).create_new(true).open(&pb);
        let _ = fs::remove_file(&pa);
        match second {
            Ok(_) => {
                let _ = fs::remove_file(&pb);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    };
    Ok(NamePairs {
        case_distinct: distinct(".vb-probe-case-A", ".vb-probe-case-a")?,
        normalisation_distinct: distinct(".vb-probe-caf\u{e9}", ".vb-probe-cafe\u{301}")?,
    })
}

/// Refuses a profile whose pairs this filesystem would merge, instead of writing another vault.
pub fn check_name_pairs(p: &Profile, pairs: NamePairs, where_: &Path) -> anyhow::Result<()> {
    if !p.hazards {
        return Ok(());
    }
    let mut folded = Vec::new();
    if !pairs.case_distinct {
        folded.push(format!(
            "case-only names ({} and {})",
            scenarios::hazards::CASE_PAIR[0],
            scenarios::hazards::CASE_PAIR[1]
        ));
    }
    if !pairs.normalisation_distinct {
        folded.push("NFC and NFD spellings of one name".to_owned());
    }
    if folded.is_empty() {
        return Ok(());
    }
    bail!(
        "the filesystem at {} cannot hold {}, so profile {} cannot be written as generated; use a case- and normalisation-sensitive filesystem (e.g. ext4)",
        where_.display(),
        folded.join(" or "),
        p.name
    )
}

fn parent_and_name(out: &Path) -> anyhow::Result<(PathBuf, std::ffi::OsString)> {
    let name = out
        .file_name()
        .with_context(|| format!("output path {} has no final directory name", out.display()))?
        .to_owned();
    let parent = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Checks `out` can take a vault: absent, an empty directory, or (with `force`) any directory.
fn check_out(out: &Path, force: bool) -> anyhow::Result<bool> {
    match fs::symlink_metadata(out) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot inspect output path {}", out.display())),
        Ok(m) if !m.is_dir() => bail!(
            "output path {} exists and is not a directory",
            out.display()
        ),
        Ok(_) => {
            let non_empty = fs::read_dir(out)
                .with_context(|| format!("cannot read output directory {}", out.display()))?
                .next()
                .is_some();
            if non_empty && !force {
                bail!(
                    "output directory {} is not empty (pass --force to replace it)",
                    out.display()
                );
            }
            Ok(non_empty)
        }
    }
}

/// A safe relative path from a generated or edited vault path (no `..`, not absolute).
fn rel(path: &str) -> anyhow::Result<&Path> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!("vault path {path:?} is not a plain relative path");
    }
    Ok(p)
}

/// Writes one file, hashing the bytes on the way.
fn write_file(path: &Path, f: &scenarios::GenFile, buf: &mut [u8]) -> io::Result<ManifestEntry> {
    let mut file = File::create(path)?;
    let mut h = Sha256::new();
    let size = match f.bytes() {
        Some(b) => {
            h.update(b);
            file.write_all(b)?;
            b.len() as u64
        }
        None => {
            let mut r = f.reader();
            let mut n = 0u64;
            loop {
                let k = r.read(buf)?;
                if k == 0 {
                    break;
                }
                h.update(&buf[..k]);
                file.write_all(&buf[..k])?;
                n += k as u64;
            }
            n
        }
    };
    Ok(ManifestEntry {
        path: f.path.clone(),
        size,
        sha256: hex::encode(h.finalize()),
    })
}

/// Makes `dir`'s writes durable: one `syncfs` on Linux (100k `fsync`s would take minutes),
/// a walk of `fsync`s elsewhere.
pub(crate) fn sync_tree(dir: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let d = File::open(dir)?;
        // SAFETY: syncfs takes a valid open descriptor, which `d` holds for the call.
        if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                sync_tree(&entry.path())?;
            } else {
                File::open(entry.path())?.sync_all()?;
            }
        }
        File::open(dir)?.sync_all()
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Moves a finished temp tree into place at `out`, replacing an old tree if there is one.
pub(crate) fn install(tmp: tempfile::TempDir, out: &Path, replace: bool) -> anyhow::Result<()> {
    let (parent, name) = parent_and_name(out)?;
    let old = if replace {
        let trash = tempfile::Builder::new()
            .prefix(&format!(".{}.vaultbench-old-", name.to_string_lossy()))
            .tempdir_in(&parent)
            .with_context(|| format!("cannot create a directory beside {}", out.display()))?
            .keep();
        let target = trash.join("old");
        fs::rename(out, &target)
            .with_context(|| format!("cannot move the old {} aside", out.display()))?;
        Some(trash)
    } else {
        None
    };
    let tmp_path = tmp.keep();
    if let Err(e) = fs::rename(&tmp_path, out) {
        let _ = fs::remove_dir_all(&tmp_path);
        if let Some(trash) = &old {
            let _ = fs::rename(trash.join("old"), out);
            let _ = fs::remove_dir_all(trash);
        }
        return Err(e)
            .with_context(|| format!("cannot rename the finished vault into {}", out.display()));
    }
    sync_dir(&parent);
    if let Some(trash) = old {
        fs::remove_dir_all(&trash)
            .with_context(|| format!("cannot remove the replaced vault at {}", trash.display()))?;
    }
    Ok(())
}

/// Creates a temp dir beside `out` for a tree that will be renamed onto it.
pub(crate) fn temp_beside(out: &Path) -> anyhow::Result<tempfile::TempDir> {
    let (parent, name) = parent_and_name(out)?;
    fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create the parent directory of {}", out.display()))?;
    tempfile::Builder::new()
        .prefix(&format!(".{}.vaultbench-", name.to_string_lossy()))
        .tempdir_in(&parent)
        .with_context(|| {
            format!(
                "cannot create a temporary directory beside {} (is it writable?)",
                out.display()
            )
        })
}

/// Batches in flight between the generating thread and the writing one. Files travel in
/// batches of up to `BATCH_FILES` files or `BATCH_BYTES` bytes, so the threads hand over
/// ~1,000 times for vault100k instead of 100,000 (bounds memory to a few MiB plus the
/// largest in-memory file, an 8 MiB image).
const PIPELINE_DEPTH: usize = 4;
const BATCH_FILES: usize = 128;
const BATCH_BYTES: u64 = 1 << 20;

type Batch = Vec<(scenarios::GenFile, Option<ManifestEntry>)>;

/// Writes every generated file under `root`: one thread makes (and hashes) the files while
/// this one writes them, so generation hides behind the disk. Returns the manifest entries.
fn write_tree(
    p: &Profile,
    seed: u64,
    root: &Path,
    out: &Path,
) -> anyhow::Result<Vec<ManifestEntry>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(PIPELINE_DEPTH);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut batch: Batch = Vec::with_capacity(BATCH_FILES);
            let mut bytes = 0;
            for f in scenarios::generate(p, seed) {
                let entry = f.bytes().is_some().then(|| scenarios::entry(&f));
                bytes += f.size;
                batch.push((f, entry));
                if batch.len() >= BATCH_FILES || bytes >= BATCH_BYTES {
                    bytes = 0;
                    // The writer hung up (an error): stop generating.
                    if tx
                        .send(std::mem::replace(
                            &mut batch,
                            Vec::with_capacity(BATCH_FILES),
                        ))
                        .is_err()
                    {
                        return;
                    }
                }
            }
            let _ = tx.send(batch);
        });
        let mut made_dirs: BTreeSet<PathBuf> = BTreeSet::new();
        let mut entries = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        for (f, entry) in rx.into_iter().flatten() {
            // Ctrl-C: stop here; the caller drops the temp dir, so nothing is left behind.
            if crate::interrupt::requested() {
                return Err(crate::interrupt::Interrupted.into());
            }
            let relpath = rel(&f.path)?;
            let full = root.join(relpath);
            if let Some(dir) = relpath.parent()
                && !dir.as_os_str().is_empty()
                && !made_dirs.contains(dir)
            {
                fs::create_dir_all(root.join(dir)).with_context(|| {
                    format!(
                        "cannot create folder {} in {}",
                        dir.display(),
                        out.display()
                    )
                })?;
                made_dirs.insert(dir.to_owned());
            }
            let written = match (entry, f.bytes()) {
                (Some(e), Some(b)) => fs::write(&full, b).map(|()| e),
                _ => write_file(&full, &f, &mut buf),
            };
            entries.push(
                written
                    .with_context(|| format!("cannot write {} into {}", f.path, out.display()))?,
            );
        }
        Ok(entries)
    })
}

/// Writes the vault `p` makes from `seed` to `out`: into a temp dir beside `out`, made
/// durable, then renamed into place, so a failure never leaves a partial vault at `out`.
pub fn write_vault(
    p: &Profile,
    seed: u64,
    out: &Path,
    force: bool,
) -> anyhow::Result<VaultSummary> {
    let replace = check_out(out, force)?;
    let tmp = temp_beside(out)?;
    let pairs = probe_name_pairs(tmp.path())
        .with_context(|| format!("cannot write probe files beside {}", out.display()))?;
    check_name_pairs(p, pairs, tmp.path().parent().unwrap_or(out))?;

    let entries = write_tree(p, seed, tmp.path(), out)?;
    sync_tree(tmp.path())
        .with_context(|| format!("cannot flush the vault beside {} to disk", out.display()))?;
    let manifest = Manifest::from_entries(entries);
    install(tmp, out, replace)?;
    Ok(VaultSummary::new(p, seed, &manifest))
}

/// The twin profile of the shape file at `path`: a missing, malformed or out-of-range file
/// is one line naming the file (and the field).
pub fn profile_from_file(path: &Path) -> anyhow::Result<Profile> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("shape file {} cannot be read", path.display()))?;
    let shape = scenarios::shape::Shape::parse(&text, &path.display().to_string())?;
    Ok(Profile::from_shape(&shape))
}

/// Reuses `<cache_root>/<profile>-<seed as 0x hex>/` only when its on-disk digest matches
/// what the generator would produce (every file re-hashed); regenerates it otherwise.
pub fn ensure_cached_vault(
    p: &Profile,
    seed: u64,
    cache_root: &Path,
) -> anyhow::Result<(PathBuf, VaultSummary)> {
    let dir = cache_root.join(format!("{}-{seed:#x}", p.name));
    let expected = scenarios::manifest(p, seed);
    if dir.is_dir()
        && let Ok(actual) = manifest_of_dir(&dir)
        && actual.digest == expected.digest
    {
        return Ok((dir, VaultSummary::new(p, seed, &actual)));
    }
    let summary = write_vault(p, seed, &dir, true)?;
    if summary.digest != expected.digest {
        bail!(
            "vault {} seed {seed:#x} wrote digest {} but the generator's manifest says {}",
            p.name,
            summary.digest,
            expected.digest
        );
    }
    Ok((dir, summary))
}

/// Replaces `path`'s bytes atomically (temp file beside it, fsync, rename, directory fsync).
fn replace_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".vaultbench-edit-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temp file beside {}", path.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot fsync {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot rename into {}", path.display()))?;
    sync_dir(dir);
    Ok(())
}

/// Applies one edit from `scenarios::edits` to a vault on disk (atomically per file).
pub fn apply_edit(dir: &Path, edit: &Edit) -> anyhow::Result<()> {
    match edit {
        Edit::Append { path, text } => {
            let full = dir.join(rel(path)?);
            let mut bytes = fs::read(&full)
                .with_context(|| format!("edit target {} cannot be read", full.display()))?;
            bytes.extend_from_slice(text.as_bytes());
            replace_file(&full, &bytes)
        }
        Edit::ModifyMiddle { path, text } => {
            let full = dir.join(rel(path)?);
            let old = fs::read(&full)
                .with_context(|| format!("edit target {} cannot be read", full.display()))?;
            replace_file(&full, &scenarios::edits::modify_middle(&old, text))
        }
        Edit::Create { path, content } => {
            let full = dir.join(rel(path)?);
            if full.exists() {
                bail!("edit creates {} but it already exists", full.display());
            }
            let parent = full.parent().unwrap_or(dir);
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create folder {}", parent.display()))?;
            replace_file(&full, content.as_bytes())
        }
        Edit::Delete { path } => {
            let full = dir.join(rel(path)?);
            fs::remove_file(&full).with_context(|| format!("cannot delete {}", full.display()))?;
            sync_dir(full.parent().unwrap_or(dir));
            Ok(())
        }
        Edit::RenameFolder { from, to } => {
            let (src, dst) = (dir.join(rel(from)?), dir.join(rel(to)?));
            // rename(2) may replace an empty directory (left behind by deletes), not a full one.
            let occupied = fs::read_dir(&dst)
                .map(|mut d| d.next().is_some())
                .unwrap_or(dst.exists());
            if occupied {
                bail!(
                    "edit renames a folder to {} but it already exists",
                    dst.display()
                );
            }
            let parent = dst.parent().unwrap_or(dir);
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create folder {}", parent.display()))?;
            fs::rename(&src, &dst).with_context(|| {
                format!(
                    "cannot rename folder {} to {}",
                    src.display(),
                    dst.display()
                )
            })?;
            sync_dir(parent);
            sync_dir(src.parent().unwrap_or(dir));
            Ok(())
        }
        Edit::Batch { edits } => edits.iter().try_for_each(|e| apply_edit(dir, e)),
    }
}

pub use crate::tree::{manifest_of_dir, tree_digest};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hazards_refused_on_folding_filesystems() {
        let p = scenarios::profile("hazards").unwrap();
        let both = NamePairs {
            case_distinct: true,
            normalisation_distinct: true,
        };
        assert!(check_name_pairs(&p, both, Path::new("/x")).is_ok());
        let mac = NamePairs {
            case_distinct: false,
            normalisation_distinct: false,
        };
        let err = check_name_pairs(&p, mac, Path::new("/x"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot hold case-only names") && err.contains("NFC and NFD"),
            "{err}"
        );
        let small = scenarios::profile("small").unwrap();
        assert!(
            check_name_pairs(&small, mac, Path::new("/x")).is_ok(),
            "only hazards needs the pairs"
        );
    }

    #[test]
    fn probe_on_this_filesystem() {
        let d = tempfile::tempdir().unwrap();
        let pairs = probe_name_pairs(d.path()).unwrap();
        // Linux test machines use case-sensitive, non-normalising filesystems.
        #[cfg(target_os = "linux")]
        assert_eq!(
            pairs,
            NamePairs {
                case_distinct: true,
                normalisation_distinct: true
            }
        );
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            0,
            "probe files removed"
        );
    }

    #[test]
    fn rel_rejects_escapes() {
        assert!(rel("a/b.md").is_ok());
        assert!(rel("../x").is_err());
        assert!(rel("/etc/passwd").is_err());
        assert!(rel("").is_err());
    }

    #[test]
    fn cache_reuses_only_matching_trees() {
        use std::os::unix::fs::MetadataExt;
        let p = scenarios::profile("small").unwrap();
        let d = tempfile::tempdir().unwrap();
        let (dir, first) = ensure_cached_vault(&p, 7, d.path()).unwrap();
        assert_eq!(dir, d.path().join("small-0x7"));
        let note = manifest_of_dir(&dir).unwrap().entries[0].path.clone();
        let ino = fs::metadata(dir.join(&note)).unwrap().ino();
        let (_, again) = ensure_cached_vault(&p, 7, d.path()).unwrap();
        assert_eq!(again, first);
        assert_eq!(
            fs::metadata(dir.join(&note)).unwrap().ino(),
            ino,
            "reused, not rewritten"
        );
        fs::write(dir.join(&note), "tampered").unwrap();
        let (_, fixed) = ensure_cached_vault(&p, 7, d.path()).unwrap();
        assert_eq!(fixed, first);
        assert_ne!(
            fs::read(dir.join(&note)).unwrap(),
            b"tampered",
            "regenerated"
        );
        assert_eq!(tree_digest_of(&dir), first.digest);
    }

    fn tree_digest_of(dir: &Path) -> String {
        manifest_of_dir(dir).unwrap().digest
    }

    #[test]
    fn edits_apply_and_match_the_stream() {
        let p = scenarios::profile("small").unwrap();
        let d = tempfile::tempdir().unwrap();
        let v = d.path().join("v");
        write_vault(&p, 5, &v, false).unwrap();
        let mut s = scenarios::edits::edits(&p, 5, 0);
        for _ in 0..300 {
            let e = s.next().unwrap();
            apply_edit(&v, &e).unwrap_or_else(|err| panic!("{e:?}: {err:#}"));
        }
        let on_disk: BTreeSet<String> = manifest_of_dir(&v)
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.path)
            .collect();
        let expected: BTreeSet<String> = s.notes().iter().cloned().collect();
        assert_eq!(on_disk, expected);
    }
}

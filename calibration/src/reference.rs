//! The machine reference: channel medians `vaultbench calibrate` measured while quiet, keyed by fingerprint id.
//!
//! One JSON file holds a map from fingerprint id to reference, so a home directory shared by
//! several machines (NFS, a dotfile sync) keeps one entry per machine. Default path:
//! `$VAULTBENCH_REFERENCE`, else `$XDG_DATA_HOME/vaultbench/reference.json`, else
//! `~/.local/share/vaultbench/reference.json` (the XDG base-directory spec's default).

use std::path::{Path, PathBuf};

use crate::fingerprint::Fingerprint;

/// Env var overriding the reference file path.
pub const ENV: &str = "VAULTBENCH_REFERENCE";

/// The reference types and their format check are `contract`'s; this module finds, reads and
/// writes the file.
pub use contract::reference::{Reference, ReferenceFile};

/// A reference file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("calibration reference {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("calibration reference {}: corrupt ({message}); delete it and run `vaultbench calibrate`", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error(
        "calibration reference: no path (set ${ENV}, $XDG_DATA_HOME or $HOME, or pass --reference)"
    )]
    NoPath,
}

/// The reference file path: `flag`, else `$VAULTBENCH_REFERENCE`, else the XDG data dir.
pub fn reference_path(flag: Option<&Path>) -> Result<PathBuf, ReferenceError> {
    if let Some(p) = flag {
        return Ok(p.to_owned());
    }
    if let Some(p) = std::env::var_os(ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    data_dir()
        .map(|d| d.join("reference.json"))
        .ok_or(ReferenceError::NoPath)
}

/// `$XDG_DATA_HOME/vaultbench` or `~/.local/share/vaultbench`.
pub fn data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        std::env::var_os("HOME")
            .filter(|p| !p.is_empty())
            .map(|h| PathBuf::from(h).join(".local").join("share"))
    })?;
    Some(base.join("vaultbench"))
}

fn read_file(path: &Path) -> Result<Option<ReferenceFile>, ReferenceError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ReferenceError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let file =
        ReferenceFile::from_json(text.as_bytes()).map_err(|message| ReferenceError::Corrupt {
            path: path.to_owned(),
            message,
        })?;
    Ok(Some(file))
}

/// The stored reference for this machine, `None` when the file or the entry does not exist.
/// `path` as in [`reference_path`]. A file that exists but does not parse is an error.
pub fn load_reference(
    path: Option<&Path>,
    fp: &Fingerprint,
) -> Result<Option<Reference>, ReferenceError> {
    let path = reference_path(path)?;
    let Some(mut file) = read_file(&path)? else {
        return Ok(None);
    };
    Ok(file.machines.remove(&fp.id()))
}

/// Adds or replaces this machine's entry; writes a temp file, fsyncs, renames over the
/// old file and fsyncs the directory, so a crash leaves the old file or the new one.
/// Returns the path written.
pub fn store_reference(
    path: Option<&Path>,
    reference: &Reference,
) -> Result<PathBuf, ReferenceError> {
    let path = reference_path(path)?;
    let io = |source| ReferenceError::Io {
        path: path.clone(),
        source,
    };
    let mut file = read_file(&path)?.unwrap_or_default();
    file.machines
        .insert(reference.fingerprint_id.clone(), reference.clone());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let json = file.to_json();
    // Owner-only, as the temp file it always was: a per-machine reference, not shared.
    durable::write_atomic(&path, &json, durable::PRIVATE).map_err(io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id_suffix: &str, cpu: f64) -> (Fingerprint, Reference) {
        let r = Reference::fixture(&format!("test {id_suffix}"), cpu, 5.0);
        (r.fingerprint.clone(), r)
    }

    #[test]
    fn store_then_load_keeps_one_entry_per_machine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/reference.json");
        let (fp_a, ref_a) = sample("a", 30.0);
        let (fp_b, ref_b) = sample("b", 40.0);
        assert_eq!(load_reference(Some(&path), &fp_a).unwrap(), None);
        store_reference(Some(&path), &ref_a).unwrap();
        store_reference(Some(&path), &ref_b).unwrap();
        assert_eq!(load_reference(Some(&path), &fp_a).unwrap(), Some(ref_a));
        assert_eq!(load_reference(Some(&path), &fp_b).unwrap(), Some(ref_b));
        // Only the final file is left: the temp files were renamed.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("reference.json")]);
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reference.json");
        std::fs::write(&path, "{ not json").unwrap();
        let (fp, r) = sample("a", 30.0);
        let err = load_reference(Some(&path), &fp).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "calibration reference {}: corrupt",
                path.display()
            )),
            "{err}"
        );
        assert!(!err.contains('\n'));
        // Storing over a corrupt file is refused too (it may be someone's hand edit).
        assert!(store_reference(Some(&path), &r).is_err());
        std::fs::write(&path, r#"{"format_version":1,"machines":{"x":{"bad":1}}}"#).unwrap();
        assert!(matches!(
            load_reference(Some(&path), &fp),
            Err(ReferenceError::Corrupt { .. })
        ));
    }
}

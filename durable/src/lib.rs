//! The one durable atomic write of the workspace: a reader never sees half a file, and after
//! a power cut the file is either the old one or the new one.
//!
//! Temp file beside the target (same file system, so the rename is atomic), write, fsync,
//! chmod, rename over the target, fsync the directory (so the rename itself is durable).
//!
//! Its own crate rather than a module of `contract`: `contract` is a pure leaf with no file
//! system access (a tidy test enforces that), while `harness`, `calibration`, `loadgen` and
//! `refserver` (its setup token and nonce-log compaction) all write files and share no other
//! crate below them but `contract`. The reference server's journal compaction and chunk
//! store keep their own sequence: they count every fsync for `/metrics`.

use std::io::Write;
use std::path::Path;

/// Permission bits for files others read (baselines, reports: committed and shared).
pub const SHARED: u32 = 0o644;
/// Permission bits for files only the owner may read (device keys, per-machine state).
pub const PRIVATE: u32 = 0o600;

/// Writes `bytes` to `path` atomically and durably, creating the parent directory if needed,
/// with permission bits `mode` (see [`SHARED`], [`PRIVATE`]). The temp file is removed on
/// failure. Each error names the step and the path.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let named = |step: &str, at: &Path, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{step} {}: {e}", at.display()))
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| named("creating", dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".vaultbench-tmp-")
        .tempfile_in(dir)
        .map_err(|e| named("creating a temp file in", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| named("writing", path, e))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| named("chmod of", path, e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| named("fsync of", path, e))?;
    tmp.persist(path)
        .map_err(|e| named("renaming into", path, e.error))?;
    // The rename is in place; a directory that cannot be opened for fsync (some file systems)
    // leaves it durable only at the next sync, which is what every other writer gets too.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_replaces_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("x.json");
        super::write_atomic(&p, b"1", super::SHARED).unwrap();
        super::write_atomic(&p, b"22", super::PRIVATE).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"22");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::read_dir(p.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left behind"
        );
    }

    #[test]
    fn a_failure_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"").unwrap();
        let e = super::write_atomic(&p, b"1", super::SHARED).unwrap_err();
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}

//! Writing files so that a reader never sees half of one: temp file beside it, fsync, rename,
//! fsync the directory.

use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temp + fsync + rename + dir fsync).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".vaultbench-tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temp file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        // Baselines are committed and shared: readable by all (tempfile creates 0600).
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("chmod of {}", path.display()))?;
    }
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("fsync of {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming into {}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_and_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.json");
        super::write_atomic(&p, b"1").unwrap();
        super::write_atomic(&p, b"22").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"22");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temp file left behind"
        );
    }
}

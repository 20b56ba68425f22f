//! Writing files so that a reader never sees half of one: the workspace's one durable write
//! (`durable::write_atomic`: temp file beside it, fsync, rename, fsync the directory).

use std::path::Path;

/// Writes `bytes` to `path` atomically (temp + fsync + rename + dir fsync).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    // Baselines are committed and shared: readable by all.
    Ok(durable::write_atomic(path, bytes, durable::SHARED)?)
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

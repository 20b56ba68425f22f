//! The machine lock: one recording at a time per machine, because two benchmarks at once measure each other.
//!
//! An exclusive `flock(2)` on a well-known file (`std::fs::File::lock`, which is `flock` on
//! Linux). The kernel drops the lock when the holder
//! exits, however it exits, so a crashed run never leaves a stale lock behind. Default path
//! `/tmp/vaultbench-machine.lock` (shared by every user of the machine, which is the point);
//! `$VAULTBENCH_LOCK` or an explicit path overrides it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Env var overriding the lock path.
pub const ENV: &str = "VAULTBENCH_LOCK";
/// Default lock path.
pub const DEFAULT_PATH: &str = "/tmp/vaultbench-machine.lock";

/// Another recording holds the machine lock and the caller would not wait. Exit code 5.
#[derive(Debug, thiserror::Error)]
#[error("machine lock {0} is held by another recording")]
pub struct LockBusy(pub String);

/// Holds the machine lock until dropped.
#[derive(Debug)]
pub struct MachineLock {
    // Closing the file releases the flock.
    _file: File,
    path: PathBuf,
}

impl MachineLock {
    /// The lock path: `path`, else `$VAULTBENCH_LOCK`, else [`DEFAULT_PATH`].
    pub fn path_for(path: Option<&Path>) -> PathBuf {
        path.map(Path::to_owned)
            .or_else(|| {
                std::env::var_os(ENV)
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
    }

    /// Takes the lock. If another process holds it: with `wait`, prints one line on stderr
    /// and blocks until it is free; without, fails with [`LockBusy`] (downcast it from the
    /// `anyhow::Error` to map it to the "busy" exit code). I/O failures name the path.
    pub fn acquire(path: Option<&Path>, wait: bool) -> anyhow::Result<MachineLock> {
        let path = Self::path_for(path);
        let mut file = open(&path).with_context(|| format!("machine lock {}", path.display()))?;
        if !try_lock(&file).with_context(|| format!("machine lock {}", path.display()))? {
            let holder = holder(&mut file);
            if !wait {
                return Err(LockBusy(format!("{}{holder}", path.display())).into());
            }
            eprintln!(
                "vaultbench: waiting for the machine lock {}{holder} (another recording is running)",
                path.display()
            );
            lock(&file).with_context(|| format!("machine lock {}", path.display()))?;
        }
        // Best effort: note who holds it, for the next waiter's message.
        if file.set_len(0).is_ok() {
            let _ = file.rewind();
            let _ = writeln!(file, "pid {}", std::process::id());
        }
        Ok(MachineLock { _file: file, path })
    }

    /// Where the lock lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    // 0o666 so that another user's run can lock the same file (umask permitting);
    // a read-only open still takes a flock when the file belongs to someone else.
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => File::open(path),
        other => other,
    }
}

/// `Ok(true)` when locked, `Ok(false)` when someone else holds it (a signal retries).
fn try_lock(file: &File) -> std::io::Result<bool> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Interrupted => {
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Blocks until locked (a signal that interrupts the wait retries it).
fn lock(file: &File) -> std::io::Result<()> {
    loop {
        match file.lock() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// " (held by pid N)" from the lock file's content, or "".
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    if file.rewind().is_ok() && file.take(64).read_to_string(&mut text).is_ok() {
        let text = text.trim();
        if let Some(pid) = text.strip_prefix("pid ")
            && pid.parse::<u32>().is_ok()
        {
            return format!(" (held by pid {pid})");
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_file_description_is_refused_until_the_first_drops() {
        // flock locks belong to the open file description, so two acquires in one process
        // conflict exactly as two processes do (the two-process case is in tests/it).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = MachineLock::acquire(Some(&path), false).unwrap();
        let err = MachineLock::acquire(Some(&path), false).unwrap_err();
        let busy = err.downcast_ref::<LockBusy>().expect("LockBusy");
        assert!(
            busy.0
                .contains(&format!("held by pid {}", std::process::id())),
            "{busy}"
        );
        drop(first);
        MachineLock::acquire(Some(&path), false).unwrap();
    }

    #[test]
    fn an_unopenable_path_is_an_error_naming_it() {
        let err =
            MachineLock::acquire(Some(Path::new("/nonexistent-dir/x.lock")), false).unwrap_err();
        assert!(err.downcast_ref::<LockBusy>().is_none());
        assert!(format!("{err:#}").starts_with("machine lock /nonexistent-dir/x.lock: "));
    }
}

//! Run directories a killed run left behind. Every run dir (`vaultbench-run-*` in the work dir's
//! parent) holds an `owner` file: the pid and kernel start time of the process that made it.
//! A later run removes the run dirs whose owner is gone (no such pid, or the pid reused by a
//! process with another start time), and only those: a run dir of a live run, or one without
//! an owner file (a run of an older build, or not ours), is left alone.

use std::path::{Path, PathBuf};

/// The file in a run dir naming its owner.
pub const OWNER_FILE: &str = "owner";

/// `PID STARTTIME` of this process.
pub fn owner_line() -> Option<String> {
    let pid = std::process::id();
    let st = procstat::read::process_stat(procstat::Pid::Of(pid)).ok()??;
    Some(format!("{pid} {}\n", st.starttime_ticks))
}

/// Writes this process's owner line into `run_dir`.
pub fn claim(run_dir: &Path) -> std::io::Result<()> {
    match owner_line() {
        Some(line) => std::fs::write(run_dir.join(OWNER_FILE), line),
        None => Ok(()),
    }
}

/// Whether the owner line names a live process.
fn owner_alive(line: &str) -> bool {
    let mut it = line.split_whitespace();
    let (Some(pid), Some(start)) = (
        it.next().and_then(|p| p.parse::<u32>().ok()),
        it.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        // Unreadable: treat as alive (never remove what we cannot attribute).
        return true;
    };
    match procstat::read::process_stat(procstat::Pid::Of(pid)) {
        Ok(Some(st)) => st.starttime_ticks == start,
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Removes the run dirs under `parent` whose owner is gone; returns them.
pub fn sweep(parent: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(parent) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("vaultbench-run-") {
            continue;
        }
        // A symlink is never followed or removed.
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(line) = std::fs::read_to_string(e.path().join(OWNER_FILE)) else {
            continue;
        };
        if !owner_alive(&line) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_dirs_of_dead_owners_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let mk = |name: &str, owner: Option<&str>| {
            let d = parent.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("data"), "x").unwrap();
            if let Some(o) = owner {
                std::fs::write(d.join(OWNER_FILE), o).unwrap();
            }
            d
        };
        // A child that has exited and been reaped: its pid names no process now.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = c.id();
        c.wait().unwrap();
        let dead = mk("vaultbench-run-dead", Some(&format!("{dead_pid} 1\n")));
        let mine = parent.path().join("vaultbench-run-live");
        std::fs::create_dir(&mine).unwrap();
        claim(&mine).unwrap();
        // Our own pid with another start time: the pid was reused, the owner is gone.
        let reused = mk(
            "vaultbench-run-reused",
            Some(&format!("{} 0\n", std::process::id())),
        );
        let unowned = mk("vaultbench-run-old", None);
        let other = mk("not-ours", Some(&format!("{dead_pid} 1\n")));
        let removed = sweep(parent.path());
        assert!(!dead.exists() && !reused.exists(), "{removed:?}");
        assert!(mine.exists() && unowned.exists() && other.exists());
        assert_eq!(removed.len(), 2);
    }
}

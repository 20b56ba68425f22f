//! The live processes that belong to a test's run, found through `/proc`.

use std::path::Path;

/// (pid, command line) of every live process whose command line mentions `needle`, or one of
/// whose open files or working directory is under it: nginx rewrites its workers' command
/// lines (`nginx: worker process`), but they keep the error log in the data dir open. Zombies
/// have an empty command line and no files, and drop out. A test passes its own work or data
/// dir, which every process of its run names.
pub fn procs_with(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.is_empty() {
            continue;
        }
        let under =
            |p: &Path| std::fs::read_link(p).is_ok_and(|l| l.to_string_lossy().contains(needle));
        let files = || {
            std::fs::read_dir(e.path().join("fd"))
                .map(|fds| fds.flatten().any(|fd| under(&fd.path())))
                .unwrap_or(false)
        };
        if cmd.contains(needle) || under(&e.path().join("cwd")) || files() {
            out.push((pid, cmd));
        }
    }
    out
}

//! Peak RSS of one test run as a child process: the RSS tests of `hostile_dav` and
//! `hostile_obsync` re-execute this binary with an environment variable set, read the child's
//! line tagged with that variable's name, then its `VmHWM` before letting it exit.

use std::io::BufRead as _;

/// Runs this test binary's `test` (its full name, module path included: the child runs it with
/// `--exact`) as a child with `env=kind`; returns the child's first line containing `env` and
/// its `VmHWM` in KiB.
pub fn run_child(test: &str, env: &str, kind: &str) -> (String, u64) {
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--include-ignored"])
        .env(env, kind)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains(env) {
        line.clear();
    }
    assert!(
        line.contains(env),
        "the child printed no line tagged {env}: is {test:?} a full test name of this binary?"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/<pid>/status");
    drop(child.stdin.take());
    let _ = std::io::copy(&mut out, &mut std::io::sink());
    assert!(child.wait().unwrap().success());
    (line.trim().to_owned(), hwm)
}

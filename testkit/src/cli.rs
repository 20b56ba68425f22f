//! The `vaultbench` binary as the harness's tests run it: isolated in a home directory, and
//! what it prints on a refused input.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// `vaultbench` (the harness's binary, as the calling test program was built with it) with
/// caches, references and the machine lock inside a home directory: `vb!(home)` in `home`,
/// `vb!()` in [`shared_home`] for commands whose output does not depend on them.
///
/// A macro because the binary's path is known only where the harness's own tests are
/// compiled (`CARGO_BIN_EXE_vaultbench`).
#[macro_export]
macro_rules! vb {
    () => {
        $crate::isolated(
            ::std::env!("CARGO_BIN_EXE_vaultbench"),
            &$crate::shared_home(::std::env!("CARGO_TARGET_TMPDIR")),
        )
    };
    ($home:expr) => {
        $crate::isolated(::std::env!("CARGO_BIN_EXE_vaultbench"), $home)
    };
}

/// The command `bin` with its caches (`XDG_DATA_HOME`, `XDG_CACHE_HOME`, `VAULTBENCH_CACHE`)
/// and machine lock (`VAULTBENCH_LOCK`) inside `home`, and no reference or gate config taken
/// from the environment the tests run in.
pub fn isolated(bin: impl AsRef<Path>, home: &Path) -> Command {
    let mut c = Command::new(bin.as_ref());
    c.env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("VAULTBENCH_CACHE", home.join("cache"))
        .env("VAULTBENCH_LOCK", home.join("machine.lock"))
        .env_remove("VAULTBENCH_REFERENCE")
        .env_remove("VAULTBENCH_GATE_CONFIG");
    c
}

/// The home that the tests of one test program share, under cargo's temporary directory for
/// integration tests (`tmp_dir`, the program's `CARGO_TARGET_TMPDIR`): kept between runs, so
/// a cached vault is generated once.
pub fn shared_home(tmp_dir: &str) -> PathBuf {
    Path::new(tmp_dir).join("vaultbench-home")
}

/// Runs `cmd`, asserts that it exits with `code` and prints exactly one line on stderr,
/// starting `vaultbench: ` (the binary's one-line errors); returns that line.
pub fn one_line_error(cmd: &mut Command, code: i32) -> String {
    let out = cmd.assert().code(code).get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("vaultbench: "), "{err}");
    err
}

/// Calibration gate bounds so wide no machine is refused: what a test records must not depend
/// on how busy the test machine is. The gate's own accept/refuse logic is tested in the
/// calibration crate.
pub const LOOSE_GATE: &str = "[cpu_ms]\nmax_cv = 1000.0\nmax_over_median = 1000.0\nreference_tolerance = 1000.0\n\
                              [io_ms]\nmax_cv = 1000.0\nmax_over_median = 1000.0\nreference_tolerance = 1000.0\n\
                              [rtt_ms]\nmax_cv = 1000.0\nmax_over_median = 1000.0\nreference_tolerance = 1000.0\n\
                              [server_run_delay]\nmax_share = 1000.0\n[generator_run_delay]\nmax_share = 1000.0\n\
                              [psi_cpu_some]\nmax_share = 1000.0\n[psi_io_some]\nmax_share = 1000.0\n\
                              [steal]\nmax_share = 1000.0\n[foreign_cpu]\nmax_share = 1000.0\n[foreign_io]\nmax_share = 1000000.0\n";

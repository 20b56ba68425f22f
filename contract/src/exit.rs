//! The exit codes of `vaultbench` (and of the reference server and the calibration example,
//! which use the same numbers), documented once. README.md's table is checked against these
//! constants by a test.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success; `ab`: KEEP or no rule; `compare`: no regression; `verify`: every pair verifies |
//! | 1 | `compare`: a regression beyond threshold; `ab`: the rule said REJECT; `trend detect`: a step or drift for the worse |
//! | 2 | usage or runtime error (one line naming the input): a target that would not start, I/O failure, a scenario, target or `--protocol` that speak different protocols (refused before any sample) |
//! | 3 | refused: the calibration gate judged the machine too noisy, a sample failed, or too few balanced `ab` rounds survived; no recording written (the attempt is counted in the ledger beside it only when git tracks nothing in `--out`) |
//! | 4 | `ab`: INCONCLUSIVE, the rule could not decide at this sensitivity |
//! | 5 | busy: another recording holds the machine lock and `--no-wait` was given |
//! | 6 | `verify` / `vault verify`: a baseline does not match its sidecar (edited value, digest, version), or a vault differs from its manifest |
//! | 7 | `compare`: the baseline and the recording come from different machine classes (refused unless `--across-machines`), or with `--strict-machine` a calibration channel differs from the baseline's beyond its tolerance |
//! | 8 | a `git:REV` target did not build (`record`, `ab`; `bisect` for an end of its range): the revision and the log's tail are named; the failure is cached with the build |
//! | 9 | `load --locust-master`: the Locust master stopped answering heartbeats; the load was stopped within the liveness |
//! | 130 | interrupted (SIGINT/SIGTERM): children killed and reaped, nothing half-written |
//!
//! 6 is the first free number after the existing ones: a mismatch is not a regression (the
//! numbers may be fine, the file is not what was recorded), so scripts must be able to tell
//! them apart; and it stays below 126, where shells start to give codes their own meanings.
//! 7 is the next free number: a comparison across machine classes is neither a regression nor
//! a broken file, and a trend job must be able to tell "wrong baseline" from "slower build".
//! 8 is the next free number: a build that fails is the user's code, not the harness's input
//! (2) nor the machine (3), and a script bisecting by hand must tell it from both.
//! 9: a worker whose master vanished is neither an error of its own input nor a success, and
//! a job runner restarting workers must be able to tell it from both.
//! 130 is the shell's 128 + SIGINT.

/// Success.
pub const OK: i32 = 0;
/// `compare` found a regression beyond threshold; `ab`'s rule said REJECT; `trend detect`
/// found a step or drift for the worse.
pub const REGRESSION: i32 = 1;
/// Usage or runtime error.
pub const ERROR: i32 = 2;
/// Refused by the gate (or a failed sample): no recording was written.
pub const REFUSED: i32 = 3;
/// `ab`'s rule could not decide.
pub const INCONCLUSIVE: i32 = 4;
/// The machine lock is held and the caller would not wait.
pub const BUSY: i32 = 5;
/// `verify` found a baseline that does not match its sidecar.
pub const MISMATCH: i32 = 6;
/// `compare` was asked to judge recordings of two different machine classes, or (with
/// `--strict-machine`) of two machines whose calibration channels differ.
pub const ACROSS_MACHINES: i32 = 7;
/// A `git:REV` target's build command failed.
pub const BUILD_FAILED: i32 = 8;
/// A Locust worker's master went silent for longer than the heartbeat liveness.
pub const MASTER_GONE: i32 = 9;
/// Interrupted by SIGINT or SIGTERM (128 + 2, as shells report it).
pub const INTERRUPTED: i32 = 130;

/// Every code with its constant's name, in numeric order (the README test compares this).
pub const ALL: [(i32, &str); 11] = [
    (OK, "OK"),
    (REGRESSION, "REGRESSION"),
    (ERROR, "ERROR"),
    (REFUSED, "REFUSED"),
    (INCONCLUSIVE, "INCONCLUSIVE"),
    (BUSY, "BUSY"),
    (MISMATCH, "MISMATCH"),
    (ACROSS_MACHINES, "ACROSS_MACHINES"),
    (BUILD_FAILED, "BUILD_FAILED"),
    (MASTER_GONE, "MASTER_GONE"),
    (INTERRUPTED, "INTERRUPTED"),
];

/// The one way out for a refusal: a command returns `Err(Refused(..).into())` and the binary
/// maps it to [`REFUSED`]. Commands never return the code itself for a refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused: {0}")]
pub struct Refused(pub String);

/// The one way out for a failed build of a `git:REV` target: the binary maps it to
/// [`BUILD_FAILED`]. The message names the revision and ends with the log's tail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BuildFailed(pub String);

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_distinct_and_ordered() {
        let codes: Vec<i32> = super::ALL.iter().map(|c| c.0).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted);
    }
}

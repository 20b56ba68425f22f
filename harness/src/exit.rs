//! The exit codes of `vaultbench`, documented once.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success; for `ab` the rule said KEEP (or no rule was given); for `compare` no regression |
//! | 1 | a regression beyond threshold (`compare`), the rule said REJECT (`ab`), `verify` found a mismatch |
//! | 2 | usage or runtime error: bad input, a target that would not start, I/O failure |
//! | 3 | refused: the calibration gate judged the machine too noisy; nothing was written |
//! | 4 | inconclusive: the `ab` rule could not decide at this sensitivity |
//! | 5 | busy: another recording holds the machine lock and `--no-wait` was given |
//! | 130 | interrupted by SIGINT/SIGTERM; children were killed and reaped, nothing half-written |

pub const OK: i32 = 0;
pub const REGRESSION: i32 = 1;
pub const ERROR: i32 = 2;
pub const REFUSED: i32 = 3;
pub const INCONCLUSIVE: i32 = 4;
pub const BUSY: i32 = 5;
pub const INTERRUPTED: i32 = 130;

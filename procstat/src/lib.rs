//! Linux `/proc` readers with one owner: the CPU time, run-queue delay, context switches and io
//! of a whole process tree, and the system's pressure (PSI) and steal.
//!
//! A [`Snapshot`] reads a root pid's process tree (every descendant process, every thread of
//! each) plus the system-wide counters; [`Delta::between`] turns two snapshots into what the
//! tree spent in between: CPU ns in total and by thread name, run-queue delay as a share of CPU
//! time, context switches, io, PSI stall and steal.
//!
//! # Why direct reads and not the `procfs` crate
//! Every number here comes from one short file read and a split on whitespace. A snapshot's
//! cost is the number of files it opens: three per thread (`stat`, `schedstat`, `status`), two
//! per process (`stat`, `io`), one per process for the tree (`children`), and three for the
//! system. `procfs` would open the same files. On top of that it parses each `stat` into a
//! 52-field struct and each `status` into about 60 fields, for fields nobody here reads. It
//! would also bring a new dependency tree (it is not in this workspace's lock file) for seven
//! small formats. Direct reads keep the parsers pure and tested against fixture text.
//! `examples/snapshot_cost.rs` measures a snapshot. On a 2-core cloud VM under heavy
//! load, each file read cost tens of µs, and a 10-thread process took about 0.5–0.7 ms.
//!
//! # What a delta can and cannot include
//! - Per thread, `/proc/<pid>/task/<tid>/schedstat` gives the scheduler's exact CPU ns
//!   (`sum_exec_runtime`) and run-queue delay. A thread that exits between two snapshots has
//!   no task file any more: the CPU it used after the first snapshot is **not** in
//!   [`Delta::cpu_ns`], and its count is in [`Delta::tasks_exited`].
//! - Per process, `/proc/<pid>/stat` utime + stime *do* include threads that have exited (the
//!   kernel folds a dead thread's time into its thread group), but in clock ticks (10 ms at
//!   the usual 100 Hz): [`Delta::process_cpu_ns_ticks`] carries that sum, so a reader can see
//!   how much CPU the exact per-thread sum missed, to within a tick per process.
//! - `/proc/<pid>/schedstat` of a process is its *main thread* only (the kernel shows the
//!   thread-group leader's task), not the process: it is not used.
//! - A process of the tree that exits between snapshots is gone with its counters (its time
//!   moves to the parent's `cutime`/`cstime` only when the parent reaps it):
//!   [`Delta::processes_exited`] counts them. `/proc/<pid>/io` counts a process's exited
//!   threads, like `stat`.
//! - Tasks and processes started between snapshots count from zero (all their CPU is inside
//!   the window). A reused pid or tid is told apart by its start time.
//!
//! [`read`] has one-file readers for a figure now (a process's `stat`, `io`, a `status` memory
//! line, the live pids of a process group, the system `cpu` line): the harness's resource
//! sampling, the gate trial's CPU accounting and the peak-RSS lines use them.
//!
//! System-wide values are `Option`s: `None` means the kernel does not offer them (no
//! `/proc/pressure` without `CONFIG_PSI` or with `psi=0`, no steal field on old kernels).

mod error;
pub mod parse;
pub mod read;
mod snapshot;

pub use error::Error;
pub use parse::{CpuTimes, CtxSwitches, Io, Pressure, Schedstat, Stat};
pub use read::Pid;
pub use snapshot::{
    Delta, ProcessSample, Snapshot, SystemSample, TaskSample, clock_ticks_per_second,
};

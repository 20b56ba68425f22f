//! Where the time goes, as persisted: a cost sample's top functions per part (from callgrind),
//! its blocked time per syscall per part (from the traced run), and an A/B's functions that
//! changed most. Every list is capped: a recording carries the head of a profile, not the
//! profile (`--keep-profiles DIR` keeps the whole files).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Functions a recording keeps per part, by self and by inclusive instructions each.
pub const RECORDED_FUNCTIONS: usize = 15;

/// Functions an A/B result keeps per part: the largest changes by absolute size.
pub const RECORDED_CHANGES: usize = 8;

/// One function's instructions in one part of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCost {
    /// Demangled name (Rust hash suffix removed).
    pub name: String,
    /// Instructions in the function's own code.
    pub self_ir: u64,
    /// Instructions in the function and everything it called (recursion counted once per
    /// call site, as callgrind's inclusive cost is).
    pub inclusive_ir: u64,
}

/// The head of one part's profile: its total and its top functions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartProfile {
    /// Every instruction of the part (all processes of the server).
    pub total_ir: u64,
    /// The part's work: requests, or files for a push or pull (0 for none).
    #[serde(default)]
    pub work: u64,
    /// `request` or `file`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub work_unit: String,
    /// The top functions by self instructions, then any of the top by inclusive instructions
    /// not already among them; each list sorted by its own measure, largest first.
    pub functions: Vec<FunctionCost>,
    /// Collapsed stacks for a flame graph, each at least [`STACK_MIN_SHARE`] of the part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<Stack>,
}

/// A stack's smallest share of its part that a recording keeps: a server's stacks run 20-40
/// frames deep through its runtime, so at 0.5 % a `small` recording's sidecar carried 800 KB
/// of them; at 2 % a part keeps a few dozen.
pub const STACK_MIN_SHARE: f64 = 0.02;

/// One collapsed stack: frames from the outermost, `;`-joined, and its own instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    pub frames: String,
    pub ir: u64,
}

impl PartProfile {
    /// The functions sorted by inclusive instructions, largest first.
    pub fn by_inclusive(&self, n: usize) -> Vec<&FunctionCost> {
        let mut v: Vec<&FunctionCost> = self.functions.iter().collect();
        v.sort_by(|a, b| {
            b.inclusive_ir
                .cmp(&a.inclusive_ir)
                .then_with(|| a.name.cmp(&b.name))
        });
        v.truncate(n);
        v
    }
    /// The functions sorted by self instructions, largest first.
    pub fn by_self(&self, n: usize) -> Vec<&FunctionCost> {
        let mut v: Vec<&FunctionCost> = self.functions.iter().collect();
        v.sort_by(|a, b| b.self_ir.cmp(&a.self_ir).then_with(|| a.name.cmp(&b.name)));
        v.truncate(n);
        v
    }
    /// A copy keeping the top `n` by self and the top `n` by inclusive instructions.
    pub fn capped(&self, n: usize) -> PartProfile {
        let mut keep: Vec<FunctionCost> = self.by_self(n).into_iter().cloned().collect();
        for f in self.by_inclusive(n) {
            if !keep.iter().any(|k| k.name == f.name) {
                keep.push(f.clone());
            }
        }
        PartProfile {
            functions: keep,
            ..self.clone()
        }
    }
}

/// Wall time the server's threads spent inside one syscall during one part (traced run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallTime {
    pub name: String,
    pub calls: u64,
    /// Summed wall time inside the call, every thread, µs.
    pub time_us: f64,
}

/// Per-thread scheduler figures over one part, from schedstat (by thread name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadTime {
    pub thread: String,
    /// Threads of that name.
    pub threads: u64,
    pub on_cpu_ms: f64,
    /// Waiting in a run queue.
    pub run_queue_ms: f64,
    /// Neither running nor runnable over the part: the part's wall time times the threads,
    /// minus the two above.
    pub blocked_ms: f64,
}

/// Where one part's wall time went in the traced run: the syscalls the server waited in and
/// its threads' scheduler figures. Traced figures: never timing keys.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PartBlocked {
    /// The part's wall time in the traced run, ms.
    pub wall_ms: f64,
    /// Syscalls by summed wall time inside them, largest first (waiting for work, such as
    /// `epoll_wait` or `futex`, left out).
    pub syscalls: Vec<SyscallTime>,
    /// Per thread name, by on-CPU time, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadTime>,
}

impl PartBlocked {
    /// All time inside the counted syscalls, µs.
    pub fn total_us(&self) -> f64 {
        self.syscalls.iter().map(|s| s.time_us).sum()
    }
}

/// One function's change between A and B in one part: medians over the rounds of its self
/// instructions per unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionChange {
    pub name: String,
    /// Median over A's rounds, self instructions per unit of work.
    pub a: f64,
    /// Median over B's rounds.
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
    /// `delta / a` (None when A has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
    /// `delta` over the part's own change (B's median total minus A's), when that moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_change: Option<f64>,
    /// `delta` over A's median part total.
    pub share_of_total: f64,
}

/// One part's functions that changed most, B against A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartChanges {
    /// `request`, `file`, or empty (per part).
    pub per: String,
    /// Median total instructions per unit of work, A and B.
    pub a_total: f64,
    pub b_total: f64,
    /// Largest absolute changes first.
    pub functions: Vec<FunctionChange>,
    /// The stacks of A's and B's median round (by the part's total), per unit of work
    /// scaled by `a_work` and `b_work`: the differential flame graph's input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub a_stacks: Vec<Stack>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub b_stacks: Vec<Stack>,
    #[serde(default)]
    pub a_work: u64,
    #[serde(default)]
    pub b_work: u64,
}

/// The profiles of one cost sample, by part name (`cold_push`, `route.post-version.c1`).
pub type Profiles = BTreeMap<String, PartProfile>;

/// The blocked time of one traced run, by part name.
pub type Blocked = BTreeMap<String, PartBlocked>;

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, s: u64, i: u64) -> FunctionCost {
        FunctionCost {
            name: name.into(),
            self_ir: s,
            inclusive_ir: i,
        }
    }

    #[test]
    fn capping_keeps_the_heads_of_both_orders() {
        let p = PartProfile {
            total_ir: 100,
            work: 1,
            work_unit: "request".into(),
            functions: vec![
                f("main", 1, 100),
                f("a", 50, 60),
                f("b", 40, 40),
                f("c", 9, 9),
            ],
            stacks: Vec::new(),
        };
        let c = p.capped(1);
        let names: Vec<&str> = c.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a", "main"]);
        assert_eq!(p.by_inclusive(2)[1].name, "a");
    }
}

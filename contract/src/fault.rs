//! The fault hop's fault kinds: what a rule of a scenario's `[[fault]]` schedule does to a
//! request it picks. The scenario file spells them (`status_after`, ...) and the hop in
//! `loadgen` acts on them, so the one enum lives here, below both.

use serde::{Deserialize, Serialize};

/// What a fault rule does to a request it picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer `503` without forwarding: the target never sees the request.
    StatusBefore,
    /// Forward, then answer `503` instead of the target's answer: the target did the work and
    /// the client must retry it (the idempotency case).
    StatusAfter,
    /// Forward, then close the client's connection with a reset instead of the answer.
    ResetAfter,
    /// Wait `ms` before forwarding.
    Delay,
    /// Forward the head and the first half of the body, wait `ms`, then the rest.
    StallBody,
}

impl FaultKind {
    /// The name a scenario file uses, and the hop's counters are keyed by.
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::StatusBefore => "status_before",
            FaultKind::StatusAfter => "status_after",
            FaultKind::ResetAfter => "reset_after",
            FaultKind::Delay => "delay",
            FaultKind::StallBody => "stall_body",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_is_the_serde_name() {
        for k in [
            FaultKind::StatusBefore,
            FaultKind::StatusAfter,
            FaultKind::ResetAfter,
            FaultKind::Delay,
            FaultKind::StallBody,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.label());
        }
    }
}

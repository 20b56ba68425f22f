//! Round orders: a balanced, seeded shuffle of A-first / B-first, and Pinpoint's
//! drop-to-balance rule when rounds fail.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::error::AbError;

/// Upper bound on rounds: every A/B run is bounded in count (each round is two fresh
/// server processes, so 1000 rounds is already hours of work).
pub const MAX_ROUNDS: usize = 1000;

/// Which build runs first in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    AFirst,
    BFirst,
}

/// `rounds` orders, exactly half A-first, shuffled with `ChaCha8Rng::seed_from_u64(seed)`
/// (Fisher–Yates via rand's `SliceRandom::shuffle`). The same seed gives the same plan; the
/// caller records the seed. `rounds` must be even, at least 2 and at most [`MAX_ROUNDS`].
pub fn plan_orders(rounds: usize, seed: u64) -> Result<Vec<Order>, AbError> {
    if rounds < 2 || !rounds.is_multiple_of(2) || rounds > MAX_ROUNDS {
        return Err(AbError::BadRounds {
            rounds,
            max: MAX_ROUNDS,
        });
    }
    let mut v: Vec<Order> = (0..rounds)
        .map(|i| {
            if i < rounds / 2 {
                Order::AFirst
            } else {
                Order::BFirst
            }
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    v.shuffle(&mut rng);
    Ok(v)
}

/// Why a round was left out of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// A sample of this round failed or was refused by the calibration gate (after retries).
    Failed,
    /// The round succeeded but was dropped to keep A-first and B-first counts equal.
    Balance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedRound {
    /// 0-based round index in the plan.
    pub round: usize,
    pub order: Order,
    pub reason: DropReason,
}

/// Which rounds to analyse after failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalancePlan {
    /// 0-based indices of the rounds kept, ascending; A-first and B-first counts are equal.
    pub kept: Vec<usize>,
    /// Rounds left out, ascending by index, with the reason.
    pub dropped: Vec<DroppedRound>,
}

/// Pinpoint's rule: drop every failed round, then drop as few successful rounds as needed so
/// that A-first and B-first counts are equal — always the latest rounds of the majority
/// order, so the choice is deterministic and does not look at the measured values.
pub fn drop_to_balance(orders: &[Order], ok: &[bool]) -> Result<BalancePlan, AbError> {
    if orders.len() != ok.len() {
        return Err(AbError::LengthMismatch {
            what: "orders and round outcomes",
            left: orders.len(),
            right: ok.len(),
        });
    }
    let mut reason: Vec<Option<DropReason>> = ok
        .iter()
        .map(|&good| (!good).then_some(DropReason::Failed))
        .collect();
    let count = |reason: &[Option<DropReason>], o: Order| {
        (0..orders.len())
            .filter(|&i| reason[i].is_none() && orders[i] == o)
            .count()
    };
    let (na, nb) = (count(&reason, Order::AFirst), count(&reason, Order::BFirst));
    let (majority, excess) = if na > nb {
        (Order::AFirst, na - nb)
    } else {
        (Order::BFirst, nb - na)
    };
    let mut left = excess;
    for i in (0..orders.len()).rev() {
        if left == 0 {
            break;
        }
        if reason[i].is_none() && orders[i] == majority {
            reason[i] = Some(DropReason::Balance);
            left -= 1;
        }
    }
    let kept = (0..orders.len()).filter(|&i| reason[i].is_none()).collect();
    let dropped = (0..orders.len())
        .filter_map(|i| {
            reason[i].map(|r| DroppedRound {
                round: i,
                order: orders[i],
                reason: r,
            })
        })
        .collect();
    Ok(BalancePlan { kept, dropped })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_balanced_seeded_and_validated() {
        let p = plan_orders(6, 42).unwrap();
        assert_eq!(p.iter().filter(|o| **o == Order::AFirst).count(), 3);
        assert_eq!(p, plan_orders(6, 42).unwrap());
        for bad in [0, 1, 3, 7, MAX_ROUNDS + 2] {
            assert!(plan_orders(bad, 1).is_err(), "{bad}");
        }
        assert_eq!(
            plan_orders(5, 1).unwrap_err().to_string(),
            "rounds must be an even number >= 2 and <= 1000, got 5"
        );
    }
}

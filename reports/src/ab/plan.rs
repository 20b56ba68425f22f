//! Round orders: a balanced, seeded shuffle of A-first / B-first, and Pinpoint's
//! drop-to-balance rule when rounds fail.

pub use contract::ab::{BalancePlan, DropReason, DroppedRound, Order, OrderCount, OrderCounts};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::error::AbError;

/// Upper bound on rounds: every A/B run is bounded in count (each round is two fresh
/// server processes, so 1000 rounds is already hours of work).
pub const MAX_ROUNDS: usize = 1000;

/// `rounds` orders shuffled with `ChaCha8Rng::seed_from_u64(seed)` (Fisher–Yates via rand's
/// `SliceRandom::shuffle`): `rounds / 2` of each order and, when `rounds` is odd, one extra
/// round whose order is a fair bit drawn from the same stream before the shuffle. The same
/// seed gives the same plan; the caller records the seed. An even plan draws nothing before
/// the shuffle, so even plans are the ones every earlier seed produced. `rounds` must be at
/// least 2 and at most [`MAX_ROUNDS`].
pub fn plan_orders(rounds: usize, seed: u64) -> Result<Vec<Order>, AbError> {
    if !(2..=MAX_ROUNDS).contains(&rounds) {
        return Err(AbError::BadRounds {
            rounds,
            max: MAX_ROUNDS,
        });
    }
    let half = rounds / 2;
    let mut v: Vec<Order> = (0..2 * half)
        .map(|i| {
            if i < half {
                Order::AFirst
            } else {
                Order::BFirst
            }
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    if !rounds.is_multiple_of(2) {
        v.push(if rng.random::<bool>() {
            Order::AFirst
        } else {
            Order::BFirst
        });
    }
    v.shuffle(&mut rng);
    Ok(v)
}

/// The counts of `orders`.
pub fn order_count<'a>(orders: impl IntoIterator<Item = &'a Order>) -> OrderCount {
    let mut c = OrderCount::default();
    for o in orders {
        match o {
            Order::AFirst => c.a_first += 1,
            Order::BFirst => c.b_first += 1,
        }
    }
    c
}

/// The counts of a plan and of the rounds `kept` (0-based indices into `orders`).
pub fn order_counts(orders: &[Order], kept: &[usize]) -> OrderCounts {
    OrderCounts {
        planned: order_count(orders),
        kept: order_count(kept.iter().filter_map(|&i| orders.get(i))),
    }
}

/// Pinpoint's rule: drop every failed round, then drop as few successful rounds as needed so
/// that A-first and B-first counts are equal — always the latest rounds of the majority
/// order, so the choice is deterministic and does not look at the measured values. An odd
/// plan (`orders.len()` odd) was planned with one round more of one order, and keeps that
/// imbalance: counts that differ by at most one are balanced there.
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
    // An odd plan keeps its planned imbalance of one; an even plan is balanced exactly.
    let allowed = orders.len() % 2;
    let mut left = excess.saturating_sub(allowed);
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
        for bad in [0, 1, MAX_ROUNDS + 1, MAX_ROUNDS + 2] {
            assert!(plan_orders(bad, 1).is_err(), "{bad}");
        }
        assert!(plan_orders(MAX_ROUNDS, 1).is_ok());
        assert!(plan_orders(MAX_ROUNDS - 1, 1).is_ok());
        assert_eq!(
            plan_orders(1, 1).unwrap_err().to_string(),
            "rounds must be >= 2 and <= 1000, got 1"
        );
    }

    #[test]
    fn an_odd_plan_has_half_of_each_order_plus_one_seeded_extra() {
        let mut extra_a = 0;
        for seed in 0..200u64 {
            for rounds in [3, 5, 7, 11] {
                let p = plan_orders(rounds, seed).unwrap();
                assert_eq!(p, plan_orders(rounds, seed).unwrap(), "deterministic");
                let c = order_count(&p);
                assert_eq!(c.a_first + c.b_first, rounds);
                assert_eq!(c.a_first.abs_diff(c.b_first), 1, "{rounds} {seed}");
                if rounds == 3 && c.a_first == 2 {
                    extra_a += 1;
                }
            }
        }
        // The extra round's order is a fair draw: over 200 seeds both orders get it.
        assert!((60..=140).contains(&extra_a), "{extra_a}");
        // Golden: rand 0.10.4 + rand_chacha 0.10.0 (Cargo.lock); the extra order is the
        // stream's first bit, then the shuffle.
        use Order::{AFirst as A, BFirst as B};
        assert_eq!(plan_orders(3, 0x5eed).unwrap(), GOLDEN_3_5EED);
        assert_eq!(plan_orders(3, 0xab).unwrap(), GOLDEN_3_AB);
        const GOLDEN_3_5EED: [Order; 3] = [B, A, B];
        const GOLDEN_3_AB: [Order; 3] = [A, B, A];
    }

    #[test]
    fn an_odd_plan_keeps_its_imbalance_of_one() {
        use Order::{AFirst as A, BFirst as B};
        let three = [A, B, A];
        // All kept: 2 A-first, 1 B-first is the plan, nothing dropped to balance.
        let p = drop_to_balance(&three, &[true; 3]).unwrap();
        assert_eq!(p.kept, vec![0, 1, 2]);
        assert!(p.dropped.is_empty());
        // An A-first round fails: 1 and 1 left.
        let p = drop_to_balance(&three, &[true, true, false]).unwrap();
        assert_eq!(p.kept, vec![0, 1]);
        assert_eq!(p.dropped.len(), 1);
        // The B-first round fails: 2 A-first and 0 B-first, so the latest A-first round goes.
        let p = drop_to_balance(&three, &[true, false, true]).unwrap();
        assert_eq!(p.kept, vec![0]);
        assert_eq!(
            p.dropped,
            vec![
                DroppedRound {
                    round: 1,
                    order: B,
                    reason: DropReason::Failed
                },
                DroppedRound {
                    round: 2,
                    order: A,
                    reason: DropReason::Balance
                },
            ]
        );
        // Five rounds, 3 A-first + 2 B-first; a B-first failure leaves 3 and 1: one A-first
        // round (the latest) is dropped, keeping an imbalance of one.
        let five = [A, B, A, B, A];
        let p = drop_to_balance(&five, &[true, true, true, false, true]).unwrap();
        assert_eq!(p.kept, vec![0, 1, 2]);
        assert_eq!(
            order_counts(&five, &p.kept).kept.to_string(),
            "2 A-first, 1 B-first"
        );
        // An A-first failure leaves 2 and 2: nothing more dropped.
        let p = drop_to_balance(&five, &[false, true, true, true, true]).unwrap();
        assert_eq!(p.kept, vec![1, 2, 3, 4]);
        // Even plans stay exact: 4 rounds with one failure drop one more.
        let four = [A, B, A, B];
        let p = drop_to_balance(&four, &[true, false, true, true]).unwrap();
        assert_eq!(p.kept, vec![0, 3]);
    }

    #[test]
    fn order_counts_count_the_plan_and_the_kept_rounds() {
        use Order::{AFirst as A, BFirst as B};
        let c = order_counts(&[A, B, A], &[0, 1]);
        assert_eq!(
            c.planned,
            OrderCount {
                a_first: 2,
                b_first: 1
            }
        );
        assert_eq!(
            c.kept,
            OrderCount {
                a_first: 1,
                b_first: 1
            }
        );
        assert!(c.planned.is_uneven());
        assert!(!c.kept.is_uneven());
        assert_eq!(c.planned.to_string(), "2 A-first, 1 B-first");
    }
}

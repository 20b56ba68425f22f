//! `bisect`'s search and conclusions, pure: the binary search over a first-parent path with
//! skipped and unknown commits, the three-valued answer of one comparison, how the search
//! ends, and each commit's verdict. The harness builds and measures commits; a test can call
//! these with answers of its own.

use std::collections::{BTreeMap, BTreeSet};

use contract::ab::{MetricAnalysis, Verdict};
use contract::bisect::{Answer, BisectOutcome, BisectStep, CommitVerdict};

/// The search's state, by commit: what `search` needs to know of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// It did not build.
    Skip,
    Answer(Answer),
}

/// The outcome of the pure search over positions `0..=n` (0 good, n bad).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// The last known good and the first known bad position.
    pub lo: usize,
    pub hi: usize,
    /// Positions that were skipped or unknown, strictly between `lo` and `hi`.
    pub unsure: Vec<usize>,
    /// Every position probed, in order, with what it gave and whom it was compared with.
    pub probed: Vec<(usize, usize, Probe)>,
}

/// Binary search for the first bad position between a good `0` and a bad `n`: each candidate
/// (the untested position nearest the middle of the open range) is probed against the last
/// known good position `lo` by `probe(candidate, lo)`. Skipped and unknown positions stay
/// out of the range's ends; they are reported when they sit between the last good and the
/// first bad.
pub fn search<E>(
    n: usize,
    mut probe: impl FnMut(usize, usize) -> Result<Probe, E>,
) -> Result<Search, E> {
    let (mut lo, mut hi) = (0usize, n);
    let mut out: BTreeMap<usize, Probe> = BTreeMap::new();
    let mut probed = Vec::new();
    loop {
        let mid = (lo + hi) / 2;
        let Some(c) = (lo + 1..hi)
            .filter(|i| !out.contains_key(i))
            .min_by_key(|&i| (i.abs_diff(mid), i))
        else {
            break;
        };
        let p = probe(c, lo)?;
        probed.push((c, lo, p));
        out.insert(c, p);
        match p {
            Probe::Answer(Answer::Different) => hi = c,
            Probe::Answer(Answer::Same) => lo = c,
            Probe::Skip | Probe::Answer(Answer::Unknown) => {}
        }
    }
    let unsure = (lo + 1..hi).filter(|i| out.contains_key(i)).collect();
    Ok(Search {
        lo,
        hi,
        unsure,
        probed,
    })
}

/// The answer of a comparison at `rounds` rounds: worse is *different*, better or no change
/// is *same*; inconclusive is *unknown* at the round cap and `None` (measure another round)
/// below it.
pub fn answer(m: &MetricAnalysis, rounds: usize, cap: usize) -> Option<Answer> {
    match m.verdict {
        Verdict::Worse => Some(Answer::Different),
        Verdict::NoChange | Verdict::Better => Some(Answer::Same),
        Verdict::Inconclusive if rounds >= cap => Some(Answer::Unknown),
        Verdict::Inconclusive => None,
    }
}

/// How a search over positions `0..=n` ended, by position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    pub outcome: BisectOutcome,
    pub first_bad: Option<usize>,
    /// An ambiguous end's candidates: the unsure positions, then the first known bad.
    pub candidates: Vec<usize>,
    /// The comparison whose estimate is the step's, as (candidate, against): the first bad
    /// against the last known good.
    pub estimate: (usize, usize),
}

/// The conclusion from the ends' answer and, when they differ, the search over the path.
pub fn conclude(n: usize, ends: Answer, search: Option<&Search>) -> Conclusion {
    let plain = |outcome| Conclusion {
        outcome,
        first_bad: None,
        candidates: Vec::new(),
        estimate: (n, 0),
    };
    match (ends, search) {
        (Answer::Same, _) => plain(BisectOutcome::NoRegression),
        (Answer::Unknown, _) | (Answer::Different, None) => plain(BisectOutcome::Unknown),
        (Answer::Different, Some(s)) => {
            let mut candidates = Vec::new();
            let outcome = if s.unsure.is_empty() {
                BisectOutcome::Found
            } else {
                candidates.extend(&s.unsure);
                candidates.push(s.hi);
                BisectOutcome::Ambiguous
            };
            Conclusion {
                outcome,
                first_bad: Some(s.hi),
                candidates,
                estimate: (s.hi, s.lo),
            }
        }
    }
}

/// The last step that compared `candidate` with `against`, if the search made it (the ends'
/// comparison is the step `(n, 0)`).
pub fn step_of(steps: &[BisectStep], (candidate, against): (usize, usize)) -> Option<&BisectStep> {
    steps
        .iter()
        .rev()
        .find(|s| s.candidate == candidate && s.against == against)
}

/// Each position's verdict from the steps: bad if its comparison said different, good if
/// same, unknown if unknown; position 0 is good, and `skipped` positions (they did not
/// build) are skipped.
pub fn verdicts(steps: &[BisectStep], skipped: &BTreeSet<usize>) -> BTreeMap<usize, CommitVerdict> {
    let mut v = BTreeMap::new();
    v.insert(0, CommitVerdict::Good);
    for s in steps {
        v.insert(
            s.candidate,
            match s.answer {
                Answer::Different => CommitVerdict::Bad,
                Answer::Same => CommitVerdict::Good,
                Answer::Unknown => CommitVerdict::Unknown,
            },
        );
    }
    for &i in skipped {
        v.insert(i, CommitVerdict::Skipped);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(bad_from: usize, skip: &[usize]) -> impl FnMut(usize, usize) -> Result<Probe, ()> {
        let skip = skip.to_vec();
        move |c, _lo| {
            Ok(if skip.contains(&c) {
                Probe::Skip
            } else if c >= bad_from {
                Probe::Answer(Answer::Different)
            } else {
                Probe::Answer(Answer::Same)
            })
        }
    }

    #[test]
    fn the_search_finds_the_first_bad_position_in_few_probes() {
        for bad_from in 1..=15 {
            let s = search(15, answers(bad_from, &[])).unwrap();
            assert_eq!((s.lo, s.hi), (bad_from - 1, bad_from), "{bad_from}");
            assert!(s.unsure.is_empty());
            assert!(s.probed.len() <= 4, "{bad_from}: {:?}", s.probed);
        }
    }

    #[test]
    fn a_skipped_position_is_stepped_around_and_named_when_it_matters() {
        // The middle of 0..15 does not build: its neighbours are probed instead.
        let s = search(15, answers(11, &[7])).unwrap();
        assert_eq!((s.lo, s.hi), (10, 11));
        assert!(s.unsure.is_empty());
        assert_eq!(s.probed[0], (7, 0, Probe::Skip));
        assert!(s.probed.len() <= 6, "{:?}", s.probed);
        // A skipped commit right before the first bad one leaves two candidates.
        let s = search(15, answers(11, &[10])).unwrap();
        assert_eq!((s.lo, s.hi, s.unsure.clone()), (9, 11, vec![10]));
    }

    #[test]
    fn each_probe_is_against_the_last_known_good() {
        let s = search(15, answers(11, &[])).unwrap();
        let mut lo = 0;
        for &(c, against, p) in &s.probed {
            assert_eq!(against, lo);
            if p == Probe::Answer(Answer::Same) {
                lo = c;
            }
        }
    }

    fn step(candidate: usize, against: usize, answer: Answer) -> BisectStep {
        BisectStep {
            candidate,
            against,
            answer,
            rounds: 3,
            estimate_pct: None,
            ci_pct: None,
            reason: String::new(),
        }
    }

    #[test]
    fn the_conclusion_names_the_first_bad_or_the_candidates() {
        let found = search(15, answers(11, &[])).unwrap();
        let c = conclude(15, Answer::Different, Some(&found));
        assert_eq!(c.outcome, BisectOutcome::Found);
        assert_eq!((c.first_bad, c.estimate), (Some(11), (11, 10)));
        let ambiguous = search(15, answers(11, &[10])).unwrap();
        let c = conclude(15, Answer::Different, Some(&ambiguous));
        assert_eq!(c.outcome, BisectOutcome::Ambiguous);
        assert_eq!(c.candidates, vec![10, 11]);
        assert_eq!(c.estimate, (11, 9));
        let same = conclude(15, Answer::Same, None);
        assert_eq!(
            (same.outcome, same.first_bad),
            (BisectOutcome::NoRegression, None)
        );
        assert_eq!(
            conclude(15, Answer::Unknown, None).outcome,
            BisectOutcome::Unknown
        );
    }

    #[test]
    fn verdicts_follow_the_last_answer_and_skips_win() {
        let steps = [
            step(8, 0, Answer::Same),
            step(12, 8, Answer::Different),
            step(10, 8, Answer::Unknown),
        ];
        let v = verdicts(&steps, &BTreeSet::from([9]));
        assert_eq!(v[&0], CommitVerdict::Good);
        assert_eq!(v[&8], CommitVerdict::Good);
        assert_eq!(v[&12], CommitVerdict::Bad);
        assert_eq!(v[&10], CommitVerdict::Unknown);
        assert_eq!(v[&9], CommitVerdict::Skipped);
        assert_eq!(
            step_of(&steps, (12, 8)).map(|s| s.answer),
            Some(Answer::Different)
        );
        assert!(step_of(&steps, (12, 0)).is_none());
    }
}

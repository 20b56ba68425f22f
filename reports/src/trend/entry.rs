//! A recording as one history line: its commit, date, machine class, each calibration
//! channel's median and every key's value with the spread of its raw series.

use std::collections::BTreeMap;

use contract::gate::KERNELS;
use contract::history::{HistoryEntry, HistoryValue};
use contract::schema::{Baseline, Provenance};

use crate::comparability::channel_median;

/// The history line of a recording. `commit` and `subject` stand in for the target's own
/// (a `git:REV` target records its commit in the sidecar) when given; the machine class is the
/// fingerprint's (`unknown` when the sidecar has none that names a class).
pub fn entry_of(
    b: &Baseline,
    p: &Provenance,
    commit: Option<String>,
    subject: Option<String>,
) -> HistoryEntry {
    let git = p.target.git.as_ref();
    let commit = commit.or_else(|| git.map(|g| g.commit.clone()));
    let subject = subject.or_else(|| git.map(|g| g.subject.clone()));
    let calibration: BTreeMap<String, f64> = KERNELS
        .iter()
        .filter_map(|ch| channel_median(p, ch).map(|m| ((*ch).to_owned(), m)))
        .collect();
    let keys = b
        .metrics
        .iter()
        .map(|(k, m)| {
            let raw: Vec<f64> = p
                .raw
                .get(k)
                .map(|r| r.iter().copied().filter(|v| v.is_finite()).collect())
                .unwrap_or_default();
            let (low, high) = raw
                .iter()
                .fold(None, |acc: Option<(f64, f64)>, &v| match acc {
                    Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
                    None => Some((v, v)),
                })
                .unwrap_or((m.value, m.value));
            (
                k.clone(),
                HistoryValue {
                    value: m.value,
                    unit: m.unit.clone(),
                    class: m.class,
                    better: m.better,
                    low,
                    high,
                    n: raw.len().max(1) as u32,
                },
            )
        })
        .collect();
    HistoryEntry::new(
        commit,
        subject,
        p.recorded_at.clone(),
        contract::class::of_machine(&p.machine).unwrap_or_else(|| "unknown".to_owned()),
        b.scenario.clone(),
        b.seed,
        p.vault_digest.clone(),
        calibration,
        keys,
    )
}

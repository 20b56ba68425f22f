//! What grew: per part, the functions whose self instructions changed most between the arms
//! of an `ab --cost` run. Each function's value per arm is the median over the kept rounds of
//! its self instructions per unit of work, so one round cannot make a function grow; the
//! part's change is the median total's, and each function's share of it is its delta over it.

use std::collections::{BTreeMap, BTreeSet};

use crate::schema::median;
use contract::profile::{FunctionChange, PartChanges, Profiles, RECORDED_CHANGES};

/// A part's change is split among functions only when it moved by at least this share of
/// its total: an A/A's part moves by about 0.001 % and a share of that would be noise over
/// noise.
pub const MIN_CHANGE_FOR_SHARES: f64 = 0.001;

/// Per part present in every round of both arms, the [`RECORDED_CHANGES`] largest changes.
/// `a` and `b` are the kept rounds' profiles, one per round, in the same round order.
pub fn function_changes(a: &[&Profiles], b: &[&Profiles]) -> BTreeMap<String, PartChanges> {
    let mut out = BTreeMap::new();
    if a.is_empty() || b.is_empty() {
        return out;
    }
    let parts: BTreeSet<&String> = a[0].keys().collect();
    for part in parts {
        let (Some(pa), Some(pb)) = (
            a.iter().map(|p| p.get(part)).collect::<Option<Vec<_>>>(),
            b.iter().map(|p| p.get(part)).collect::<Option<Vec<_>>>(),
        ) else {
            continue;
        };
        let per = |p: &contract::profile::PartProfile| p.work.max(1) as f64;
        let total = |ps: &[&contract::profile::PartProfile]| {
            median(
                &ps.iter()
                    .map(|p| p.total_ir as f64 / per(p))
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0)
        };
        let (a_total, b_total) = (total(&pa), total(&pb));
        let names: BTreeSet<&str> = pa
            .iter()
            .chain(&pb)
            .flat_map(|p| p.functions.iter().map(|f| f.name.as_str()))
            .collect();
        let value = |ps: &[&contract::profile::PartProfile], name: &str| {
            let v: Vec<f64> = ps
                .iter()
                .map(|p| {
                    p.functions
                        .iter()
                        .find(|f| f.name == name)
                        .map_or(0.0, |f| f.self_ir as f64 / per(p))
                })
                .collect();
            median(&v).unwrap_or(0.0)
        };
        let change = b_total - a_total;
        let split = a_total > 0.0 && (change / a_total).abs() >= MIN_CHANGE_FOR_SHARES;
        let mut functions: Vec<FunctionChange> = names
            .into_iter()
            .map(|name| {
                let (va, vb) = (value(&pa, name), value(&pb, name));
                let delta = vb - va;
                FunctionChange {
                    name: name.to_owned(),
                    a: va,
                    b: vb,
                    delta,
                    relative: (va > 0.0).then(|| delta / va),
                    share_of_change: split.then(|| delta / change),
                    share_of_total: if a_total > 0.0 { delta / a_total } else { 0.0 },
                }
            })
            .filter(|f| f.delta != 0.0)
            .collect();
        functions.sort_by(|x, y| {
            y.delta
                .abs()
                .total_cmp(&x.delta.abs())
                .then_with(|| x.name.cmp(&y.name))
        });
        functions.truncate(RECORDED_CHANGES);
        let middle =
            |ps: &[&contract::profile::PartProfile]| -> (Vec<contract::profile::Stack>, u64) {
                let mut v: Vec<&&contract::profile::PartProfile> = ps.iter().collect();
                v.sort_by_key(|p| p.total_ir);
                let m = v[(v.len() - 1) / 2];
                (m.stacks.clone(), m.work)
            };
        let ((a_stacks, a_work), (b_stacks, b_work)) = (middle(&pa), middle(&pb));
        out.insert(
            part.clone(),
            PartChanges {
                per: pa[0].work_unit.clone(),
                a_total,
                b_total,
                functions,
                a_stacks,
                b_stacks,
                a_work,
                b_work,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::profile::{FunctionCost, PartProfile};

    fn profile(work: u64, fns: &[(&str, u64)]) -> Profiles {
        let functions: Vec<FunctionCost> = fns
            .iter()
            .map(|(n, s)| FunctionCost {
                name: (*n).into(),
                self_ir: *s,
                inclusive_ir: *s,
            })
            .collect();
        BTreeMap::from([(
            "route.post-version.c1".to_owned(),
            PartProfile {
                total_ir: fns.iter().map(|f| f.1).sum(),
                work,
                work_unit: "request".into(),
                functions,
                stacks: Vec::new(),
            },
        )])
    }

    #[test]
    fn the_grower_explains_the_change_and_one_round_cannot_make_a_function_grow() {
        let a = [
            profile(10, &[("handler", 1_000_000), ("alloc", 500_000)]),
            profile(10, &[("handler", 1_000_010), ("alloc", 500_000)]),
            profile(10, &[("handler", 999_990), ("alloc", 500_000)]),
        ];
        let b = [
            profile(
                10,
                &[
                    ("handler", 1_000_000),
                    ("alloc", 500_000),
                    ("inject_work", 30_000),
                ],
            ),
            profile(
                10,
                &[
                    ("handler", 1_000_000),
                    ("alloc", 900_000),
                    ("inject_work", 30_000),
                ],
            ),
            profile(
                10,
                &[
                    ("handler", 1_000_000),
                    ("alloc", 500_000),
                    ("inject_work", 30_000),
                ],
            ),
        ];
        let ar: Vec<&Profiles> = a.iter().collect();
        let br: Vec<&Profiles> = b.iter().collect();
        let c = function_changes(&ar, &br);
        let p = &c["route.post-version.c1"];
        assert_eq!(p.per, "request");
        assert_eq!(p.a_total, 150_000.0);
        assert_eq!(p.b_total, 153_000.0);
        assert_eq!(p.functions[0].name, "inject_work");
        assert_eq!(p.functions[0].delta, 3_000.0);
        assert_eq!(p.functions[0].share_of_change, Some(1.0));
        assert_eq!(p.functions[0].relative, None);
        // `alloc` grew in one round only: its median did not move.
        assert!(p.functions.iter().all(|f| f.name != "alloc"), "{p:?}");
    }

    #[test]
    fn an_aa_gives_no_shares_of_a_change_that_did_not_happen() {
        let a = [profile(1, &[("f", 1000), ("g", 10)])];
        let b = [profile(1, &[("f", 1000), ("g", 10)])];
        let c = function_changes(&[&a[0]], &[&b[0]]);
        assert!(c["route.post-version.c1"].functions.is_empty());
    }
}

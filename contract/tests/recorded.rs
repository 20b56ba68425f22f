//! Every committed recording reads into the typed documents and writes back byte for byte
//! (canonical JSON, the bytes the binding digest is taken over): typing a field that used to
//! be raw JSON must not change the digest of a file already on disk.

use std::path::{Path, PathBuf};

use contract::schema::{Baseline, Provenance, binding_digest, canonical_json};

fn committed_pairs() -> Vec<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![root.join("reports/tests/fixtures")];
    // One folder level under each: `baselines/<class>/`, `docs/webdav-small/<server>/`.
    for parent in ["baselines", "docs/webdav-small"] {
        for sub in std::fs::read_dir(root.join(parent)).expect(parent) {
            let sub = sub.unwrap().path();
            if sub.is_dir() {
                dirs.push(sub);
            }
        }
    }
    let mut out = Vec::new();
    for dir in dirs {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".provenance.json") {
                out.push((dir.join(format!("{stem}.json")), p));
            }
        }
    }
    out
}

#[test]
fn committed_recordings_round_trip_through_the_types() {
    let pairs = committed_pairs();
    assert!(pairs.len() >= 5, "{pairs:?}");
    for (b, p) in pairs {
        let bytes = std::fs::read(&p).unwrap();
        let raw: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let typed: Provenance =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(
            String::from_utf8(canonical_json(&typed)).unwrap(),
            String::from_utf8(canonical_json(&raw)).unwrap(),
            "{} does not write back as it was read",
            p.display()
        );
        let mut pretty = serde_json::to_vec_pretty(&typed).unwrap();
        pretty.push(b'\n');
        assert!(
            pretty == bytes,
            "{} does not pretty-print back to its own bytes",
            p.display()
        );
        let baseline: Baseline = serde_json::from_slice(&std::fs::read(&b).unwrap()).unwrap();
        assert_eq!(
            binding_digest(&baseline, &typed),
            typed.digest,
            "{}",
            p.display()
        );
    }
}

/// Every metric key and histogram key of every committed recording reads into its family and
/// displays back to the same text; together the recordings hold every family.
#[test]
fn committed_keys_round_trip_through_the_grammar() {
    use contract::key::{HistogramKey, MetricKey, Scope};
    let mut families = std::collections::BTreeSet::new();
    let mut n = 0;
    for (b, p) in committed_pairs() {
        let prov: Provenance = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let baseline: Baseline = serde_json::from_slice(&std::fs::read(&b).unwrap()).unwrap();
        let cost = prov.cost.iter().flat_map(|c| c.metrics.keys());
        let keys = baseline
            .metrics
            .keys()
            .chain(prov.raw.keys())
            .chain(prov.exact_snapshot.keys())
            .chain(cost);
        for k in keys {
            let parsed: MetricKey = k.parse().unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(&parsed.to_string(), k, "{}", p.display());
            families.insert(match &parsed {
                MetricKey::RouteLoad(_) => "route load",
                MetricKey::Server(s) => match s.scope {
                    Some(Scope::Phase(_)) => "phase server",
                    Some(Scope::Level(_)) => "level server",
                    None => "sample server",
                },
                MetricKey::PhaseRoute(_) => "phase route",
                MetricKey::Phase(_) => "phase",
            });
            n += 1;
        }
        for k in prov.histograms.keys() {
            let parsed: HistogramKey = k.parse().unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(&parsed.to_string(), k, "{}", p.display());
        }
    }
    assert!(n > 300, "only {n} keys");
    assert_eq!(families.len(), 6, "{families:?}");
}

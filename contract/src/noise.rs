//! The A/A noise floor: what an `ab --aa` run measured as this machine's per-metric noise for
//! a scenario, stored in the user's data dir and read back as the default practical threshold
//! (τ) of later `ab` runs. [`NoiseFloor`] is its one reader and writer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::format::{self, FORMAT_VERSION, FormatError, Header};

/// The document's kind.
pub const KIND_NOISE_FLOOR: &str = "vaultbench.aa-noise-floor";

/// `aa-tau-<scenario>-<machine>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseFloor {
    pub kind: String,
    pub format_version: u32,
    /// The scenario the A/A run measured (empty in a file from before this type).
    #[serde(default)]
    pub scenario: String,
    /// The machine fingerprint id (empty in a file from before this type).
    #[serde(default)]
    pub machine: String,
    /// Per metric key, the noise floor as a fraction (0.03 = 3 %).
    pub tau: BTreeMap<String, f64>,
}

impl NoiseFloor {
    pub fn new(scenario: &str, machine: &str, tau: BTreeMap<String, f64>) -> NoiseFloor {
        NoiseFloor {
            kind: KIND_NOISE_FLOOR.to_owned(),
            format_version: FORMAT_VERSION,
            scenario: scenario.to_owned(),
            machine: machine.to_owned(),
            tau,
        }
    }

    /// The file's bytes (pretty JSON).
    pub fn to_json(&self) -> Vec<u8> {
        // Strings and finite-or-not floats: serde_json writes a non-finite float as null,
        // never fails on this shape.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Reads a noise-floor file. A file written before this type existed is a bare
    /// `{"<key>": <fraction>}` map; it is still read (the A/A run that wrote it is as valid
    /// as ever), with scenario and machine left empty.
    pub fn from_json(bytes: &[u8]) -> Result<NoiseFloor, FormatError> {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| FormatError::NotJson(e.to_string()))?;
        if Header::of(&v).kind.is_empty()
            && let Ok(tau) = serde_json::from_value::<BTreeMap<String, f64>>(v.clone())
        {
            return Ok(NoiseFloor::new("", "", tau));
        }
        format::decode(v, KIND_NOISE_FLOOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_the_bare_map_it_replaced() {
        let tau = BTreeMap::from([("cold_push.wall_s".to_owned(), 0.031)]);
        let f = NoiseFloor::new("small", "abc123", tau.clone());
        assert_eq!(NoiseFloor::from_json(&f.to_json()).unwrap(), f);
        let legacy = NoiseFloor::from_json(br#"{"cold_push.wall_s": 0.031}"#).unwrap();
        assert_eq!(legacy.tau, tau);
        assert_eq!(legacy.kind, KIND_NOISE_FLOOR);
    }

    #[test]
    fn another_kind_or_a_newer_version_is_refused() {
        let e =
            NoiseFloor::from_json(br#"{"kind":"vaultbench.ab","format_version":1}"#).unwrap_err();
        assert!(matches!(e, FormatError::WrongKind { .. }), "{e}");
        let newer = format!(
            r#"{{"kind":"{KIND_NOISE_FLOOR}","format_version":{},"tau":{{}}}}"#,
            FORMAT_VERSION + 1
        );
        assert!(matches!(
            NoiseFloor::from_json(newer.as_bytes()),
            Err(FormatError::Newer(_))
        ));
        assert!(matches!(
            NoiseFloor::from_json(b"[1"),
            Err(FormatError::NotJson(_))
        ));
    }
}

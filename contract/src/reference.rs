//! The calibration reference file: channel medians `vaultbench calibrate` measured while
//! quiet, one entry per machine keyed by fingerprint id. `calibration` measures and stores
//! it (through `durable`); this module owns the type, its bytes and its format check.
//!
//! The file carries no `kind`: every build so far wrote `{format_version, machines}` and
//! refuses unknown fields, so adding one would make an older build call a newer file corrupt.
//! Its version goes through the one check ([`crate::format::check_version`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::machine::Fingerprint;

/// What a quiet machine's channels measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub fingerprint_id: String,
    pub fingerprint: Fingerprint,
    /// Median of the calibration readings of the cpu channel, ms.
    pub cpu_ms: f64,
    /// Median of the calibration readings of the io channel, ms.
    pub io_ms: f64,
    pub cpu_cv: f64,
    pub io_cv: f64,
    /// Median of the round-trip channel's readings, ms; absent from a reference stored before
    /// the channel existed (then the round trip's drift is not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_cv: Option<f64>,
    /// Readings per channel the medians came from.
    pub n: usize,
    /// Unix seconds when it was measured (metadata only).
    pub created_unix_s: u64,
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    /// Version of the crate that measured it (the kernels are versioned with the code).
    pub vaultbench_version: String,
}

impl Reference {
    /// An entry for a test fixture: a machine whose one identity field is `cpu_model`, with
    /// these medians and fixed metadata (20 readings, CVs 0.01 and 0.1, no load averages,
    /// time 0, version `test`). Tests of this crate and of `calibration` share it.
    pub fn fixture(cpu_model: &str, cpu_ms: f64, io_ms: f64) -> Reference {
        let fingerprint = Fingerprint {
            identity: [("cpu_model".to_owned(), cpu_model.to_owned())].into(),
            info: BTreeMap::new(),
        };
        Reference {
            fingerprint_id: fingerprint.id(),
            fingerprint,
            cpu_ms,
            io_ms,
            cpu_cv: 0.01,
            io_cv: 0.1,
            rtt_ms: None,
            rtt_cv: None,
            n: 20,
            created_unix_s: 0,
            loadavg_before: None,
            loadavg_after: None,
            vaultbench_version: "test".into(),
        }
    }
}

/// The whole reference file: every machine's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFile {
    pub format_version: u32,
    pub machines: BTreeMap<String, Reference>,
}

impl Default for ReferenceFile {
    fn default() -> Self {
        ReferenceFile {
            format_version: crate::format::FORMAT_VERSION,
            machines: BTreeMap::new(),
        }
    }
}

impl ReferenceFile {
    /// Reads a reference file's bytes: JSON, a version this build reads, and every entry
    /// filed under its own fingerprint id with positive, finite medians. The error is one
    /// line, to follow the file's name.
    pub fn from_json(bytes: &[u8]) -> Result<ReferenceFile, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let version = crate::format::Header::of(&v).version;
        crate::format::check_version(version).map_err(|e| e.to_string())?;
        let file: ReferenceFile = serde_json::from_value(v).map_err(|e| e.to_string())?;
        for (id, r) in &file.machines {
            let sane = |v: f64| v.is_finite() && v > 0.0;
            if *id != r.fingerprint_id
                || !sane(r.cpu_ms)
                || !sane(r.io_ms)
                || !r.rtt_ms.is_none_or(sane)
            {
                return Err(format!("entry {id} is inconsistent"));
            }
        }
        Ok(file)
    }

    /// The file's bytes: pretty JSON and a final newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec_pretty(self).expect("a reference file always serialises");
        json.push(b'\n');
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cpu_ms: f64) -> Reference {
        Reference {
            loadavg_after: Some([0.5, 0.25, 0.125]),
            ..Reference::fixture("test", cpu_ms, 5.0)
        }
    }

    #[test]
    fn a_file_round_trips_and_its_version_and_entries_are_checked() {
        let mut f = ReferenceFile::default();
        let r = entry(30.0);
        f.machines.insert(r.fingerprint_id.clone(), r.clone());
        let bytes = f.to_json();
        assert_eq!(ReferenceFile::from_json(&bytes), Ok(f.clone()));
        assert!(bytes.ends_with(b"}\n"));
        let newer = String::from_utf8(bytes.clone())
            .unwrap()
            .replace("\"format_version\": 1", "\"format_version\": 99");
        let e = ReferenceFile::from_json(newer.as_bytes()).unwrap_err();
        assert!(e.contains("upgrade vaultbench"), "{e}");
        let misfiled =
            String::from_utf8(bytes)
                .unwrap()
                .replacen(&r.fingerprint_id, "0000000000000000", 1);
        assert_eq!(
            ReferenceFile::from_json(misfiled.as_bytes()),
            Err("entry 0000000000000000 is inconsistent".to_owned())
        );
        let mut bad = ReferenceFile::default();
        bad.machines.insert(r.fingerprint_id.clone(), entry(0.0));
        assert!(ReferenceFile::from_json(&bad.to_json()).is_err());
        assert!(ReferenceFile::from_json(br#"{"format_version":1,"machines":{},"x":1}"#).is_err());
    }

    #[test]
    fn a_reference_without_the_rtt_channel_loads_and_writes_back_as_it_was() {
        let mut f = ReferenceFile::default();
        let r = entry(30.0);
        f.machines.insert(r.fingerprint_id.clone(), r.clone());
        let old = f.to_json();
        assert!(!String::from_utf8_lossy(&old).contains("rtt"));
        let back = ReferenceFile::from_json(&old).unwrap();
        assert_eq!(back.machines[&r.fingerprint_id].rtt_ms, None);
        assert_eq!(back.to_json(), old);
        // With the channel it round-trips, and a non-positive median is refused.
        let mut with = f.clone();
        with.machines.get_mut(&r.fingerprint_id).unwrap().rtt_ms = Some(8.5);
        assert_eq!(ReferenceFile::from_json(&with.to_json()), Ok(with.clone()));
        with.machines.get_mut(&r.fingerprint_id).unwrap().rtt_ms = Some(-1.0);
        assert!(ReferenceFile::from_json(&with.to_json()).is_err());
    }
}

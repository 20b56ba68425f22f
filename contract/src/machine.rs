//! The machine fingerprint as persisted: what a calibration reference is keyed by, and what a
//! provenance sidecar and an A/B result record in `machine`. `calibration` reads the live
//! machine into it; `reports` and the harness read it back from here, so a renamed field
//! breaks the build instead of silently blanking a report section.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Identity (hashed into [`Fingerprint::id`]) plus informational fields (not hashed). Every
/// fingerprint `calibration` has written holds both maps, values as strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// cpu_model, logical_cpus, memory_gib, kernel, os, arch, virtualisation, fs_type, cpu_governor.
    pub identity: BTreeMap<String, String>,
    /// hostname and other context that should not change the key.
    pub info: BTreeMap<String, String>,
}

impl Fingerprint {
    /// A stable id: the first 16 hex digits of SHA-256 over `key=value\n` of the identity
    /// fields in key order.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        for (k, v) in &self.identity {
            h.update(k.as_bytes());
            h.update(b"=");
            h.update(v.as_bytes());
            h.update(b"\n");
        }
        let digest = h.finalize();
        hex::encode(&digest[..8])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_sixteen_hex_digits_of_the_identity_only() {
        let mut fp = Fingerprint::default();
        fp.identity
            .insert("cpu_model".into(), "AMD EPYC 7B13".into());
        let id = fp.id();
        // `printf 'cpu_model=AMD EPYC 7B13\n' | sha256sum`, first 16 hex digits.
        assert_eq!(id, "ccf07e28882114ed");
        fp.info.insert("hostname".into(), "h".into());
        assert_eq!(fp.id(), id, "info is not hashed");
        fp.identity.insert("kernel".into(), "6.1".into());
        assert_ne!(fp.id(), id);
        let only = Fingerprint {
            identity: [("cpu_model".to_owned(), "AMD EPYC 7B13".to_owned())].into(),
            info: BTreeMap::new(),
        };
        assert_eq!(only.id(), id);
    }

    #[test]
    fn it_reads_and_writes_the_recorded_shape_byte_for_byte() {
        let text = r#"{"identity":{"arch":"x86_64","kernel":"6.1"},"info":{"hostname":"h"}}"#;
        let fp: Fingerprint = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&fp).unwrap(), text);
    }
}

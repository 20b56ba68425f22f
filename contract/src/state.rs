//! The `load` command's state file: the devices enrolled on a target, kept between separate
//! invocations so later ones sign as the same devices. `loadgen` reads and writes the file
//! (under its lock, 0600, atomically); this module owns the document and its format check.
//!
//! Files written before the document had a `kind` carry only `format_version`; they are still
//! read (the devices in them are as enrolled as ever). Every build reads the file without
//! refusing unknown fields, so adding `kind` does not make an older build call a newer file
//! corrupt.

use serde::{Deserialize, Serialize};

use crate::format::{self, FORMAT_VERSION, FormatError};

/// The document's kind.
pub const KIND_LOAD_STATE: &str = "vaultbench.load-state";

/// `load-<host>-<port>.json` under the user's state dir (or `load --state FILE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadState {
    /// [`KIND_LOAD_STATE`]; a file from before the field existed is read with it filled in.
    #[serde(default = "load_state_kind")]
    pub kind: String,
    pub format_version: u32,
    /// The target base URL the devices belong to.
    pub target: String,
    pub seed: u64,
    /// Incremented by every invocation that loads the file (under the state file's lock).
    pub session: u64,
    pub domain_id: String,
    pub devices: Vec<StateDevice>,
}

fn load_state_kind() -> String {
    KIND_LOAD_STATE.to_owned()
}

/// One enrolled device in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateDevice {
    pub device_id: String,
    pub device_secret: String,
}

impl LoadState {
    /// A new document of this build's kind and version, at session 0.
    pub fn new(target: &str, seed: u64, domain_id: &str, devices: Vec<StateDevice>) -> LoadState {
        LoadState {
            kind: load_state_kind(),
            format_version: FORMAT_VERSION,
            target: target.to_owned(),
            seed,
            session: 0,
            domain_id: domain_id.to_owned(),
            devices,
        }
    }

    /// The file's bytes (pretty JSON).
    pub fn to_json(&self) -> Vec<u8> {
        // Strings and integers only: serialising this shape cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Reads a state file's bytes through the one kind/version check. A file without `kind`
    /// (written before it existed) has only its version checked.
    pub fn from_json(bytes: &[u8]) -> Result<LoadState, FormatError> {
        let mut v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| FormatError::NotJson(e.to_string()))?;
        if let Some(obj) = v.as_object_mut()
            && !obj.contains_key("kind")
        {
            obj.insert("kind".to_owned(), KIND_LOAD_STATE.into());
        }
        format::decode(v, KIND_LOAD_STATE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LoadState {
        LoadState::new(
            "http://127.0.0.1:9",
            5,
            &"ab".repeat(16),
            vec![StateDevice {
                device_id: "01".repeat(16),
                device_secret: "02".repeat(32),
            }],
        )
    }

    #[test]
    fn round_trips_and_reads_a_file_without_kind() {
        let s = sample();
        let json = String::from_utf8(s.to_json()).unwrap();
        assert!(
            json.contains(r#""kind": "vaultbench.load-state""#),
            "{json}"
        );
        assert_eq!(LoadState::from_json(json.as_bytes()).unwrap(), s);
        // What builds before the kind wrote.
        let old = br#"{"format_version":1,"target":"http://127.0.0.1:9","seed":5,"session":3,
            "domain_id":"abababababababababababababababab",
            "devices":[{"device_id":"0101010101010101010101010101010101","device_secret":"02"}]}"#;
        let back = LoadState::from_json(old).unwrap();
        assert_eq!((back.kind.as_str(), back.session), (KIND_LOAD_STATE, 3));
    }

    #[test]
    fn another_kind_a_newer_or_no_version_is_refused() {
        let e =
            LoadState::from_json(br#"{"kind":"vaultbench.ab","format_version":1}"#).unwrap_err();
        assert!(matches!(e, FormatError::WrongKind { .. }), "{e}");
        let newer = format!(
            r#"{{"format_version":{},"target":"t","seed":0,"session":0,"domain_id":"","devices":[]}}"#,
            FORMAT_VERSION + 1
        );
        let e = LoadState::from_json(newer.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("upgrade vaultbench"), "{e}");
        let e = LoadState::from_json(br#"{"target":"t"}"#).unwrap_err();
        assert_eq!(e, FormatError::NoVersion);
        assert!(matches!(
            LoadState::from_json(b"{"),
            Err(FormatError::NotJson(_))
        ));
        assert!(matches!(
            LoadState::from_json(br#"{"format_version":1}"#),
            Err(FormatError::Schema { .. })
        ));
    }
}

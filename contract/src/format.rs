//! The kind/format-version check, written once for every persisted document.
//!
//! Semantics: a reader accepts every `format_version` from 1 up to its own
//! [`FORMAT_VERSION`] (a newer build still reads what an older
//! one wrote), refuses a newer one with "upgrade vaultbench", and refuses 0 or a missing
//! version (no vaultbench wrote it). The `kind` must be the one the caller expects. A sample
//! comes from the same binary, so it passes the same check (the old `!=` there was stricter
//! only for versions that do not exist yet).

use serde::de::DeserializeOwned;

/// The format version this build writes and the newest it reads (every document kind shares
/// it; `schema` re-exports it).
pub const FORMAT_VERSION: u32 = 1;

/// Why a document was not read. The `Display` texts read after the file's name
/// (`"{path} {error}"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("is not JSON: {0}")]
    NotJson(String),
    #[error("is not a {expected} document (kind {found:?})")]
    WrongKind { expected: String, found: String },
    #[error("has format_version {0}, newer than this build's {FORMAT_VERSION}: upgrade vaultbench")]
    Newer(u64),
    #[error("has format_version 0 or none: not a vaultbench format")]
    NoVersion,
    #[error("does not match the {kind} schema: {detail}")]
    Schema { kind: String, detail: String },
}

/// The two fields every document carries, read without trusting the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// `""` when absent or not a string.
    pub kind: &'a str,
    /// 0 when absent or not a number.
    pub version: u64,
}

impl<'a> Header<'a> {
    pub fn of(v: &'a serde_json::Value) -> Header<'a> {
        Header {
            kind: v.get("kind").and_then(|k| k.as_str()).unwrap_or(""),
            version: v
                .get("format_version")
                .and_then(|k| k.as_u64())
                .unwrap_or(0),
        }
    }

    /// Whether the kind is one of vaultbench's own (`vaultbench.*`).
    pub fn is_ours(&self) -> bool {
        self.kind.starts_with("vaultbench.")
    }
}

/// The version half of the check.
pub fn check_version(version: u64) -> Result<(), FormatError> {
    if version == 0 {
        Err(FormatError::NoVersion)
    } else if version > u64::from(FORMAT_VERSION) {
        Err(FormatError::Newer(version))
    } else {
        Ok(())
    }
}

/// Checks kind and version of a parsed document, then decodes it as `T`.
pub fn decode<T: DeserializeOwned>(v: serde_json::Value, kind: &str) -> Result<T, FormatError> {
    let h = Header::of(&v);
    if h.kind != kind {
        return Err(FormatError::WrongKind {
            expected: kind.to_owned(),
            found: h.kind.to_owned(),
        });
    }
    check_version(h.version)?;
    serde_json::from_value(v).map_err(|e| FormatError::Schema {
        kind: kind.to_owned(),
        detail: e.to_string(),
    })
}

/// [`decode`] from bytes.
pub fn decode_slice<T: DeserializeOwned>(bytes: &[u8], kind: &str) -> Result<T, FormatError> {
    let v = serde_json::from_slice(bytes).map_err(|e| FormatError::NotJson(e.to_string()))?;
    decode(v, kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Attempts, KIND_BASELINE};

    #[test]
    fn versions_one_to_current_pass_newer_and_zero_fail() {
        assert_eq!(check_version(1), Ok(()));
        assert_eq!(check_version(u64::from(FORMAT_VERSION)), Ok(()));
        assert_eq!(
            check_version(u64::from(FORMAT_VERSION) + 1),
            Err(FormatError::Newer(u64::from(FORMAT_VERSION) + 1))
        );
        assert_eq!(check_version(0), Err(FormatError::NoVersion));
        assert!(
            FormatError::Newer(99)
                .to_string()
                .contains("upgrade vaultbench")
        );
    }

    #[test]
    fn kind_is_checked_before_the_schema() {
        let v = serde_json::json!({"kind": "vaultbench.sample", "format_version": 1});
        let e = decode::<Attempts>(v, KIND_BASELINE).unwrap_err();
        assert_eq!(
            e.to_string(),
            "is not a vaultbench.baseline document (kind \"vaultbench.sample\")"
        );
        let v = serde_json::json!({"kind": "vaultbench.baseline", "format_version": 1});
        assert!(matches!(
            decode::<crate::schema::Baseline>(v, KIND_BASELINE),
            Err(FormatError::Schema { .. })
        ));
        assert!(matches!(
            decode_slice::<Attempts>(b"{", KIND_BASELINE),
            Err(FormatError::NotJson(_))
        ));
    }
}

//! `version_id`, which the server recomputes on every version post.
//!
//! hex SHA-256 of: the 16 bytes of `file_id`, each parent's 32 bytes in ascending order, the
//! manifest ciphertext bytes, then each sid's 32 bytes in manifest order (protocol page,
//! "Files and versions").

use sha2::{Digest, Sha256};

/// Why a `version_id` could not be computed from wire fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionInputError {
    FileId,
    Parent(String),
    Sid(String),
}

impl std::fmt::Display for VersionInputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionInputError::FileId => write!(f, "file_id is not 32 hex"),
            VersionInputError::Parent(p) => write!(f, "parent {p:?} is not 64 hex"),
            VersionInputError::Sid(s) => write!(f, "sid {s:?} is not 64 hex"),
        }
    }
}

impl std::error::Error for VersionInputError {}

/// Decodes exactly `N` bytes of lowercase or uppercase hex.
pub fn decode_hex_array<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    hex::decode(s).ok()?.try_into().ok()
}

/// `version_id` from decoded parts.
pub fn version_id_raw(
    file_id: &[u8; 16],
    parents: &[[u8; 32]],
    manifest_ct: &[u8],
    sids: &[[u8; 32]],
) -> String {
    let mut sorted: Vec<[u8; 32]> = parents.to_vec();
    sorted.sort_unstable();
    let mut h = Sha256::new();
    h.update(file_id);
    for p in &sorted {
        h.update(p);
    }
    h.update(manifest_ct);
    for s in sids {
        h.update(s);
    }
    hex::encode(h.finalize())
}

/// `version_id` from wire fields (hex ids, raw manifest ciphertext bytes).
pub fn version_id(
    file_id_hex: &str,
    parents_hex: &[String],
    manifest_ct: &[u8],
    sids_hex: &[String],
) -> Result<String, VersionInputError> {
    let file_id: [u8; 16] = decode_hex_array(file_id_hex).ok_or(VersionInputError::FileId)?;
    let parents = parents_hex
        .iter()
        .map(|p| decode_hex_array::<32>(p).ok_or_else(|| VersionInputError::Parent(p.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    let sids = sids_hex
        .iter()
        .map(|s| decode_hex_array::<32>(s).ok_or_else(|| VersionInputError::Sid(s.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(version_id_raw(&file_id, &parents, manifest_ct, &sids))
}

/// True when `s` is 64 lowercase hex (a chunk id the server accepts in a path).
pub fn is_sid(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors computed independently with Python's hashlib (see the test body for inputs).
    #[test]
    fn version_id_vectors() {
        let file_id = "000102030405060708090a0b0c0d0e0f";
        // No parents, no sids, manifest "m".
        assert_eq!(version_id(file_id, &[], b"m", &[]).unwrap(), V1);
        // Two parents given out of order, two sids in manifest order.
        let pa = "bb".repeat(32);
        let pb = "aa".repeat(32);
        let s1 = "11".repeat(32);
        let s2 = "22".repeat(32);
        assert_eq!(
            version_id(
                file_id,
                &[pa.clone(), pb.clone()],
                b"ct",
                &[s2.clone(), s1.clone()]
            )
            .unwrap(),
            V2
        );
        // Parent order does not matter; sid order does.
        assert_eq!(
            version_id(file_id, &[pb, pa.clone()], b"ct", &[s2.clone(), s1.clone()]).unwrap(),
            V2
        );
        assert_ne!(version_id(file_id, &[pa], b"ct", &[s1, s2]).unwrap(), V2);
    }

    const V1: &str = "1deeb5f828ba1ce49d180310e3af46834b493e80c1c4c1497323001f5b04dd8c";
    const V2: &str = "214b71734ddb7aa037b2bc520da0c206eb3a0c42553bd69d2a7acc71031f338e";

    #[test]
    fn bad_inputs_are_named() {
        assert_eq!(
            version_id("zz", &[], b"", &[]),
            Err(VersionInputError::FileId)
        );
        let fid = "00".repeat(16);
        assert!(matches!(
            version_id(&fid, &["x".into()], b"", &[]),
            Err(VersionInputError::Parent(_))
        ));
        assert!(matches!(
            version_id(&fid, &[], b"", &["x".into()]),
            Err(VersionInputError::Sid(_))
        ));
    }

    #[test]
    fn sid_syntax() {
        assert!(is_sid(&"ab".repeat(32)));
        assert!(!is_sid(&"AB".repeat(32)));
        assert!(!is_sid("../../etc/passwd"));
    }
}

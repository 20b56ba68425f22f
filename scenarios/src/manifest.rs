//! The manifest of a vault: every path, size and SHA-256, and one digest of the whole tree.

use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::generate::{GenFile, generate};
use crate::profile::Profile;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Vault-relative path with '/' separators.
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Sorted by path (byte order).
    pub entries: Vec<ManifestEntry>,
    /// Lowercase hex SHA-256 over `path NUL size NUL sha256 LF` for every entry in order.
    pub digest: String,
}

/// How two manifests first differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The path is expected but absent.
    Missing(String),
    /// The path is present but not expected.
    Unexpected(String),
    /// The path is present with other bytes.
    Content(String),
}

impl Difference {
    pub fn path(&self) -> &str {
        match self {
            Difference::Missing(p) | Difference::Unexpected(p) | Difference::Content(p) => p,
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Missing(p) => write!(f, "{p} (missing)"),
            Difference::Unexpected(p) => write!(f, "{p} (unexpected file)"),
            Difference::Content(p) => write!(f, "{p} (content differs)"),
        }
    }
}

impl Manifest {
    /// Sorts the entries and computes the digest.
    pub fn from_entries(mut entries: Vec<ManifestEntry>) -> Manifest {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let mut h = Sha256::new();
        for e in &entries {
            h.update(e.path.as_bytes());
            h.update([0]);
            h.update(e.size.to_string().as_bytes());
            h.update([0]);
            h.update(e.sha256.as_bytes());
            h.update([b'\n']);
        }
        Manifest {
            entries,
            digest: hex::encode(h.finalize()),
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The first path (in sorted order) where `actual` differs from `self` (the expected).
    pub fn first_difference(&self, actual: &Manifest) -> Option<Difference> {
        let (mut i, mut j) = (0, 0);
        let (a, b) = (&self.entries, &actual.entries);
        while i < a.len() || j < b.len() {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) => match x.path.as_bytes().cmp(y.path.as_bytes()) {
                    std::cmp::Ordering::Less => return Some(Difference::Missing(x.path.clone())),
                    std::cmp::Ordering::Greater => {
                        return Some(Difference::Unexpected(y.path.clone()));
                    }
                    std::cmp::Ordering::Equal => {
                        if x.size != y.size || x.sha256 != y.sha256 {
                            return Some(Difference::Content(x.path.clone()));
                        }
                        i += 1;
                        j += 1;
                    }
                },
                (Some(x), None) => return Some(Difference::Missing(x.path.clone())),
                (None, Some(y)) => return Some(Difference::Unexpected(y.path.clone())),
                (None, None) => break,
            }
        }
        None
    }
}

/// Hashes any reader in 1 MiB pieces; returns (size, hex SHA-256).
pub fn hash_reader(mut r: impl Read) -> std::io::Result<(u64, String)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, hex::encode(h.finalize())))
}

/// The manifest entry of a generated file.
pub fn entry(f: &GenFile) -> ManifestEntry {
    let (size, sha256) = match f.bytes() {
        Some(b) => (b.len() as u64, hex::encode(Sha256::digest(b))),
        // Generated readers cannot fail.
        None => hash_reader(f.reader()).unwrap_or_default(),
    };
    ManifestEntry {
        path: f.path.clone(),
        size,
        sha256,
    }
}

/// The manifest the generator would produce, computed streaming (nothing is written).
pub fn manifest(p: &Profile, seed: u64) -> Manifest {
    Manifest::from_entries(generate(p, seed).map(|f| entry(&f)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, sha: &str) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            size: 1,
            sha256: sha.into(),
        }
    }

    #[test]
    fn differences_name_the_first_path() {
        let a = Manifest::from_entries(vec![e("b", "1"), e("a", "1"), e("c", "1")]);
        assert_eq!(a.entries[0].path, "a");
        assert_eq!(a.first_difference(&a), None);
        let missing = Manifest::from_entries(vec![e("a", "1"), e("c", "1")]);
        assert_eq!(
            a.first_difference(&missing),
            Some(Difference::Missing("b".into()))
        );
        let extra =
            Manifest::from_entries(vec![e("a", "1"), e("b", "1"), e("bb", "1"), e("c", "1")]);
        assert_eq!(
            a.first_difference(&extra),
            Some(Difference::Unexpected("bb".into()))
        );
        let changed = Manifest::from_entries(vec![e("a", "1"), e("b", "2"), e("c", "1")]);
        assert_eq!(
            a.first_difference(&changed),
            Some(Difference::Content("b".into()))
        );
        assert_ne!(a.digest, changed.digest);
    }
}

//! The server's in-memory model (account, devices, pairings, files, the change feed) and the
//! journal records that rebuild it.
//!
//! Every mutation is a [`Record`]: a handler validates against the current [`State`], builds
//! the record, applies it and queues it on the journal while holding the state lock (so
//! journal order is apply order), and answers once the journal says it is durable. On start
//! the journal is replayed through the same [`State::apply`].

use std::collections::BTreeMap;

use protocol::wire::Change;
use serde::{Deserialize, Serialize};

/// A device's standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceStatus {
    Active,
    Pending,
    Revoked,
}

#[derive(Debug, Clone)]
pub struct Device {
    pub secret: [u8; 32],
    pub status: DeviceStatus,
}

#[derive(Debug, Clone)]
pub struct Pairing {
    pub enroll_token: String,
    pub creator: String,
    pub expires: i64,
    pub claimant: Option<String>,
    pub approved: Option<(String, String)>,
    pub envelope_consumed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct FileState {
    pub domain_id: String,
    pub heads: Vec<String>,
    pub conflicted: bool,
    /// Every version of the file, by id, with its seq.
    pub versions: BTreeMap<String, u64>,
}

/// One journal record. Serialized as JSON inside a frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Record {
    Setup {
        account_id: String,
        account_name: String,
        device_id: String,
        secret: String,
        name: String,
    },
    PairingCreated {
        pairing_id: String,
        enroll_token: String,
        creator: String,
        expires: i64,
    },
    PairingClaimed {
        pairing_id: String,
        device_id: String,
        secret: String,
        name: String,
    },
    PairingApproved {
        pairing_id: String,
        envelope: String,
        nonce: String,
    },
    EnvelopeConsumed {
        pairing_id: String,
    },
    Version(Change),
}

/// Why a journal record could not be applied on replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("journal record {index} is not valid JSON: {error}")]
    Json {
        index: usize,
        error: serde_json::Error,
    },
    #[error("journal record {index} does not fit the state: {what}")]
    Inconsistent { index: usize, what: String },
}

#[derive(Debug, Default)]
pub struct State {
    pub account_id: Option<String>,
    pub devices: BTreeMap<String, Device>,
    pub pairings: BTreeMap<String, Pairing>,
    pub files: BTreeMap<String, FileState>,
    /// `changes[i].seq == i + 1`.
    pub changes: Vec<Change>,
}

fn decode_secret(hex_s: &str) -> Option<[u8; 32]> {
    protocol::version::decode_hex_array::<32>(hex_s)
}

impl State {
    /// Rebuilds the state from journal payloads.
    pub fn replay(records: &[Vec<u8>]) -> Result<State, ReplayError> {
        let mut s = State::default();
        for (index, r) in records.iter().enumerate() {
            let rec: Record =
                serde_json::from_slice(r).map_err(|error| ReplayError::Json { index, error })?;
            s.apply(rec)
                .map_err(|what| ReplayError::Inconsistent { index, what })?;
        }
        Ok(s)
    }

    pub fn head_seq(&self) -> u64 {
        self.changes.len() as u64
    }

    /// Applies one record. Handlers validate first, so an error here means a journal that does
    /// not match this server's rules.
    pub fn apply(&mut self, rec: Record) -> Result<(), String> {
        match rec {
            Record::Setup {
                account_id,
                device_id,
                secret,
                ..
            } => {
                let secret = decode_secret(&secret).ok_or("setup secret is not 64 hex")?;
                self.account_id = Some(account_id);
                self.devices.insert(
                    device_id,
                    Device {
                        secret,
                        status: DeviceStatus::Active,
                    },
                );
            }
            Record::PairingCreated {
                pairing_id,
                enroll_token,
                creator,
                expires,
            } => {
                self.pairings.insert(
                    pairing_id,
                    Pairing {
                        enroll_token,
                        creator,
                        expires,
                        claimant: None,
                        approved: None,
                        envelope_consumed: false,
                    },
                );
            }
            Record::PairingClaimed {
                pairing_id,
                device_id,
                secret,
                ..
            } => {
                let secret = decode_secret(&secret).ok_or("claim secret is not 64 hex")?;
                let p = self
                    .pairings
                    .get_mut(&pairing_id)
                    .ok_or_else(|| format!("claim of unknown pairing {pairing_id}"))?;
                p.claimant = Some(device_id.clone());
                self.devices.insert(
                    device_id,
                    Device {
                        secret,
                        status: DeviceStatus::Pending,
                    },
                );
            }
            Record::PairingApproved {
                pairing_id,
                envelope,
                nonce,
            } => {
                let p = self
                    .pairings
                    .get_mut(&pairing_id)
                    .ok_or_else(|| format!("approval of unknown pairing {pairing_id}"))?;
                p.approved = Some((envelope, nonce));
                let claimant = p.claimant.clone().ok_or("approval before claim")?;
                if let Some(d) = self.devices.get_mut(&claimant) {
                    d.status = DeviceStatus::Active;
                }
            }
            Record::EnvelopeConsumed { pairing_id } => {
                let p = self
                    .pairings
                    .get_mut(&pairing_id)
                    .ok_or_else(|| format!("envelope of unknown pairing {pairing_id}"))?;
                p.envelope_consumed = true;
            }
            Record::Version(change) => {
                let expected = self.head_seq() + 1;
                if change.seq != expected {
                    return Err(format!(
                        "version seq {} where {expected} was next",
                        change.seq
                    ));
                }
                let f = self.files.entry(change.file_id.clone()).or_default();
                if f.versions.is_empty() {
                    f.domain_id = change.domain_id.clone();
                }
                f.heads = change.heads.clone();
                f.conflicted = change.conflicted;
                f.versions.insert(change.version_id.clone(), change.seq);
                self.changes.push(change);
            }
        }
        Ok(())
    }

    /// The heads after a new version with `parents`: if the parents are exactly the current
    /// heads the new version is the sole head; otherwise the parents it names are replaced and
    /// the rest stay, so two heads or more mean a conflict (protocol page, "Files and
    /// versions"; which heads a partial merge replaces is the reference server's choice).
    pub fn next_heads(current: &[String], parents: &[String], new: &str) -> Vec<String> {
        let mut heads: Vec<String> = current
            .iter()
            .filter(|h| !parents.contains(h))
            .cloned()
            .collect();
        heads.push(new.to_owned());
        heads
    }

    /// Change entries with `since < seq <= visible`, at most `limit`.
    pub fn changes_after(&self, since: u64, visible: u64, limit: usize) -> &[Change] {
        let visible = visible.min(self.head_seq()) as usize;
        let start = (since as usize).min(visible);
        let end = visible.min(start.saturating_add(limit));
        &self.changes[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(seq: u64, file: &str, vid: &str, heads: &[&str]) -> Change {
        Change {
            seq,
            file_id: file.into(),
            domain_id: "d".into(),
            version_id: vid.into(),
            parents: vec![],
            sids: vec![],
            bytes: 0,
            manifest_ct: String::new(),
            manifest_nonce: "00".repeat(12),
            device_id: "dev".into(),
            ts: 0,
            deleted: false,
            heads: heads.iter().map(|s| s.to_string()).collect(),
            conflicted: heads.len() > 1,
        }
    }

    #[test]
    fn heads_follow_the_protocol_rule() {
        let a = vec!["a".to_string()];
        let ab = vec!["a".to_string(), "b".to_string()];
        assert_eq!(State::next_heads(&[], &[], "n"), vec!["n"]);
        assert_eq!(State::next_heads(&a, &a, "n"), vec!["n"]);
        // Parents not equal to the heads: the version is added and the file is conflicted.
        assert_eq!(State::next_heads(&a, &[], "n"), vec!["a", "n"]);
        assert_eq!(State::next_heads(&ab, &ab, "n"), vec!["n"]);
    }

    #[test]
    fn replay_rebuilds_and_checks_seq_order() {
        let recs: Vec<Vec<u8>> = [
            Record::Setup {
                account_id: "acc".into(),
                account_name: "n".into(),
                device_id: "dev".into(),
                secret: "11".repeat(32),
                name: "laptop".into(),
            },
            Record::Version(change(1, "f", "v1", &["v1"])),
            Record::Version(change(2, "f", "v2", &["v1", "v2"])),
        ]
        .iter()
        .map(|r| serde_json::to_vec(r).unwrap())
        .collect();
        let s = State::replay(&recs).unwrap();
        assert_eq!(s.head_seq(), 2);
        assert!(s.files["f"].conflicted);
        assert_eq!(s.devices["dev"].status, DeviceStatus::Active);
        assert_eq!(s.changes_after(0, 1, 10).len(), 1);
        assert_eq!(s.changes_after(1, 2, 10)[0].version_id, "v2");
        assert_eq!(s.changes_after(0, 2, 1).len(), 1);
        let bad = vec![serde_json::to_vec(&Record::Version(change(5, "f", "v", &["v"]))).unwrap()];
        assert!(matches!(
            State::replay(&bad),
            Err(ReplayError::Inconsistent { index: 0, .. })
        ));
        assert!(matches!(
            State::replay(&[b"{".to_vec()]),
            Err(ReplayError::Json { index: 0, .. })
        ));
    }
}

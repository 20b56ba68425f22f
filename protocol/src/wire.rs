//! JSON bodies of the protocol's requests and responses.
//!
//! `manifest_ct` travels as base64 on the wire; the server never reads it (it is ciphertext
//! on the real client). vaultbench's load generator puts a small JSON manifest there
//! ([`ClientManifest`]) so a pulling device can tell where a file goes.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub platform: String,
    pub app_version: String,
}

/// `POST /v1/setup`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupRequest {
    pub setup_token: String,
    pub account_name: String,
    pub device: DeviceInfo,
}

/// `201` answer to `POST /v1/setup`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupResponse {
    pub account_id: String,
    pub device_id: String,
    pub device_secret: String,
}

/// `201` answer to `POST /v1/pairing`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingResponse {
    pub pairing_id: String,
    pub enroll_token: String,
    /// Unix milliseconds.
    pub expires: i64,
}

/// `POST /v1/pairing/{id}/claim`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    pub enroll_token: String,
    pub name: String,
    pub platform: String,
    pub app_version: String,
}

/// `201` answer to a claim
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimResponse {
    pub device_id: String,
    pub device_secret: String,
}

/// `POST /v1/pairing/{id}/approve`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproveRequest {
    /// base64
    pub envelope: String,
    /// 24 hex
    pub nonce: String,
}

/// `GET /v1/pairing/{id}/envelope`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeResponse {
    pub envelope: String,
    pub nonce: String,
}

/// `POST /v1/chunks/exists` and `POST /v1/chunks/get`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SidsRequest {
    pub sids: Vec<String>,
}

/// Answer to `POST /v1/chunks/exists`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingResponse {
    pub missing: Vec<String>,
}

/// `POST /v1/files/{file_id}/versions`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionPost {
    pub version_id: String,
    pub parents: Vec<String>,
    pub sids: Vec<String>,
    pub bytes: u64,
    pub domain_id: String,
    /// base64 of the manifest ciphertext
    pub manifest_ct: String,
    /// 24 hex
    pub manifest_nonce: String,
    #[serde(default)]
    pub deleted: bool,
}

/// `201`/`200` answer to a version post
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionPostResponse {
    pub seq: u64,
    pub version_id: String,
    pub heads: Vec<String>,
    pub conflicted: bool,
}

/// One entry of the change feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub seq: u64,
    pub file_id: String,
    pub domain_id: String,
    pub version_id: String,
    pub parents: Vec<String>,
    pub sids: Vec<String>,
    pub bytes: u64,
    pub manifest_ct: String,
    pub manifest_nonce: String,
    pub device_id: String,
    /// Unix milliseconds when the server accepted the version.
    pub ts: i64,
    pub deleted: bool,
    pub heads: Vec<String>,
    pub conflicted: bool,
}

/// `GET /v1/changes`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesResponse {
    /// The last seq included (or `since` when nothing is).
    pub seq: u64,
    pub head_seq: u64,
    pub changes: Vec<Change>,
}

/// `GET /v1/files/{file_id}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileResponse {
    pub file_id: String,
    pub domain_id: String,
    pub heads: Vec<String>,
    pub conflicted: bool,
    /// The head versions, as change entries.
    pub versions: Vec<Change>,
}

/// `GET /readyz`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyResponse {
    pub ready: bool,
    pub seq: u64,
}

/// What vaultbench's load generator puts (base64-encoded, in the clear) in `manifest_ct`.
/// The server never reads it; a pulling vaultbench device uses it to place and check files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientManifest {
    /// Vault-relative path with `/` separators.
    pub path: String,
    /// `"file"` or `"dir"`.
    pub kind: String,
    pub size: u64,
    /// Hex SHA-256 of the whole file ("" for a directory or tombstone).
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_post_deleted_defaults_false() {
        let v: VersionPost = serde_json::from_str(
            r#"{"version_id":"a","parents":[],"sids":[],"bytes":0,"domain_id":"d","manifest_ct":"","manifest_nonce":"n"}"#,
        )
        .unwrap();
        assert!(!v.deleted);
    }
}

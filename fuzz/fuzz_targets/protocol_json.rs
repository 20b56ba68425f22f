//! The protocol's JSON bodies: every request and answer type reads arbitrary bytes without
//! panicking, and whatever it accepts writes back and reads again to the same value. A
//! parsed version post also goes through the server's `version_id` recomputation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::wire::*;
use serde::{Serialize, de::DeserializeOwned};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    data: &[u8],
) -> Option<T> {
    let v: T = serde_json::from_slice(data).ok()?;
    let json = serde_json::to_vec(&v).expect("a parsed body serialises");
    let back: T = serde_json::from_slice(&json).expect("a written body parses");
    assert_eq!(back, v);
    Some(v)
}

fuzz_target!(|data: &[u8]| {
    round_trip::<DeviceInfo>(data);
    round_trip::<SetupRequest>(data);
    round_trip::<SetupResponse>(data);
    round_trip::<PairingResponse>(data);
    round_trip::<ClaimRequest>(data);
    round_trip::<ClaimResponse>(data);
    round_trip::<ApproveRequest>(data);
    round_trip::<EnvelopeResponse>(data);
    round_trip::<SidsRequest>(data);
    round_trip::<MissingResponse>(data);
    round_trip::<VersionPostResponse>(data);
    round_trip::<Change>(data);
    round_trip::<ChangesResponse>(data);
    round_trip::<FileResponse>(data);
    round_trip::<ReadyResponse>(data);
    round_trip::<ClientManifest>(data);
    if let Some(e) = round_trip::<protocol::error::ErrorBody>(data)
        && let Some(code) = protocol::ErrorCode::parse(&e.error)
    {
        assert_eq!(code.as_str(), e.error);
        assert!((400..600).contains(&code.status()));
    }
    if let Some(v) = round_trip::<VersionPost>(data) {
        let file_id = v.domain_id.get(..32).unwrap_or(&v.domain_id);
        if let Ok(id) = protocol::version_id(file_id, &v.parents, v.manifest_ct.as_bytes(), &v.sids)
        {
            assert_eq!(id.len(), 64);
        }
        // Header-shaped strings: a device id and secret, and a signature to check.
        if let Some(creds) = protocol::DeviceCredentials::from_hex(&v.version_id, &v.domain_id) {
            let _ = protocol::sign::verify(&creds.secret, &v.manifest_ct, &v.manifest_nonce);
        }
    }
});

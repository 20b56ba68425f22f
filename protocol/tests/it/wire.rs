//! Every JSON body reads arbitrary bytes without panicking, and a value written reads back
//! equal; a version post's `version_id` inputs are validated, never trusted.

use proptest::prelude::*;
use protocol::wire::{Change, ChangesResponse, SidsRequest, VersionPost};
use serde::{Serialize, de::DeserializeOwned};

fn reads_back<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) -> bool {
    let json = serde_json::to_vec(v).expect("serialises");
    serde_json::from_slice::<T>(&json).ok().as_ref() == Some(v)
}

fn hex(n: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), n).prop_map(hex::encode)
}

fn any_text() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn change() -> impl Strategy<Value = Change> {
    (
        (any::<u64>(), hex(16), hex(16), hex(32)),
        (
            prop::collection::vec(hex(32), 0..3),
            prop::collection::vec(hex(32), 0..3),
        ),
        (any::<u64>(), any_text(), hex(12), hex(16)),
        (
            any::<i64>(),
            any::<bool>(),
            prop::collection::vec(hex(32), 0..3),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (seq, file_id, domain_id, version_id),
                (parents, sids),
                (bytes, manifest_ct, manifest_nonce, device_id),
                (ts, deleted, heads, conflicted),
            )| Change {
                seq,
                file_id,
                domain_id,
                version_id,
                parents,
                sids,
                bytes,
                manifest_ct,
                manifest_nonce,
                device_id,
                ts,
                deleted,
                heads,
                conflicted,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn changes_round_trip(changes in prop::collection::vec(change(), 0..4), seq in any::<u64>(), head in any::<u64>()) {
        let r = ChangesResponse { seq, head_seq: head, changes };
        prop_assert!(reads_back(&r));
    }

    #[test]
    fn version_posts_round_trip(
        version_id in any_text(),
        parents in prop::collection::vec(any_text(), 0..3),
        sids in prop::collection::vec(any_text(), 0..3),
        bytes in any::<u64>(),
        texts in (any_text(), any_text(), any_text()),
        deleted in any::<bool>(),
    ) {
        let v = VersionPost {
            version_id,
            parents,
            sids,
            bytes,
            domain_id: texts.0,
            manifest_ct: texts.1,
            manifest_nonce: texts.2,
            deleted,
        };
        prop_assert!(reads_back(&v));
        // Any hex-shaped or not inputs: an id, or an error naming the bad one.
        match protocol::version_id(&v.domain_id, &v.parents, v.manifest_ct.as_bytes(), &v.sids) {
            Ok(id) => prop_assert_eq!(id.len(), 64),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn garbage_bodies_are_errors_not_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = serde_json::from_slice::<VersionPost>(&bytes);
        let _ = serde_json::from_slice::<SidsRequest>(&bytes);
        let _ = serde_json::from_slice::<ChangesResponse>(&bytes);
        let _ = serde_json::from_slice::<protocol::error::ErrorBody>(&bytes);
    }

    #[test]
    fn json_shaped_garbage_is_an_error_not_a_panic(
        keys in prop::collection::vec(prop::sample::select(vec![
            "version_id", "parents", "sids", "bytes", "domain_id", "manifest_ct",
            "manifest_nonce", "deleted", "seq", "head_seq", "changes", "error", "detail",
        ]), 0..8),
        values in prop::collection::vec(prop::sample::select(vec![
            "0", "-1", "18446744073709551616", "1e400", "\"\"", "[]", "[\"a\"]", "{}", "null",
            "true", "\"\\ud800\"", "[[[[[]]]]]",
        ]), 0..8),
    ) {
        let body = format!(
            "{{{}}}",
            keys.iter().zip(&values).map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",")
        );
        if let Ok(v) = serde_json::from_str::<VersionPost>(&body) {
            prop_assert!(reads_back(&v));
        }
        if let Ok(v) = serde_json::from_str::<ChangesResponse>(&body) {
            prop_assert!(reads_back(&v));
        }
    }
}

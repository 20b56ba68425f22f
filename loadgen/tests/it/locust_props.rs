//! CI-sized property tests of the Locust master messages as a worker reads them (the fuzz
//! target `locust_message` in `fuzz/` runs the same properties for longer): arbitrary bytes
//! are a message or a one-line error, never a panic; a generated spawn or ack reads back as
//! what was generated, and a spawn over the user cap is refused.

use std::collections::BTreeMap;

use loadgen::locust::message::{FromMaster, MAX_USERS, decode, encode};
use proptest::prelude::*;

#[derive(serde::Serialize)]
struct Spawn {
    timestamp: f64,
    user_classes_count: BTreeMap<String, i64>,
    host: String,
    stop_timeout: Option<f64>,
    parsed_options: BTreeMap<String, Vec<i64>>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        match decode(&data) {
            Ok(FromMaster::Spawn { users, user_classes_count, .. }) => {
                prop_assert!(users <= MAX_USERS);
                prop_assert_eq!(users, user_classes_count.values().sum::<u64>());
            }
            Ok(_) => {}
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn mutated_real_messages_never_panic(
        at in 0usize..64,
        byte in any::<u8>(),
        users in 0i64..50,
    ) {
        let spawn = Spawn {
            timestamp: 1.0,
            user_classes_count: BTreeMap::from([("A".into(), users)]),
            host: String::new(),
            stop_timeout: None,
            parsed_options: BTreeMap::new(),
        };
        let mut bytes = encode("spawn", &spawn, "worker_1");
        let i = at % bytes.len();
        bytes[i] = byte;
        if let Err(e) = decode(&bytes) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn spawns_read_back(
        counts in proptest::collection::btree_map("[A-Za-z]{1,12}", 0i64..40_000, 0..4),
        ts in 0.0f64..2e9,
        options in proptest::collection::btree_map("[a-z_]{1,10}", proptest::collection::vec(any::<i64>(), 0..4), 0..6),
    ) {
        let total: i64 = counts.values().sum();
        let spawn = Spawn {
            timestamp: ts,
            user_classes_count: counts.clone(),
            host: "http://x".into(),
            stop_timeout: Some(0.0),
            parsed_options: options,
        };
        let got = decode(&encode("spawn", &spawn, "w"));
        if total as u64 > MAX_USERS {
            prop_assert!(got.is_err());
        } else {
            let Ok(FromMaster::Spawn { timestamp, users, user_classes_count }) = got else {
                return Err(TestCaseError::fail(format!("{got:?}")));
            };
            prop_assert_eq!(timestamp, ts);
            prop_assert_eq!(users, total as u64);
            prop_assert_eq!(user_classes_count.len(), counts.len());
        }
    }

    #[test]
    fn acks_read_back(index in 0u32..u32::MAX) {
        let got = decode(&encode("ack", &BTreeMap::from([("index", index)]), "w"));
        prop_assert_eq!(got, Ok(FromMaster::Ack { index: Some(index) }));
    }
}

//! A Locust master's message as a worker reads it (after ZeroMQ framing): arbitrary bytes go
//! through the msgpack decoder into a message the worker acts on, or a one-line error, never a
//! panic; a spawn never asks for more users than the cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::locust::message::{FromMaster, MAX_USERS, decode};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(FromMaster::Spawn {
            users,
            user_classes_count,
            ..
        }) => {
            assert!(users <= MAX_USERS, "{users} users");
            assert_eq!(users, user_classes_count.values().sum::<u64>());
        }
        Ok(_) => {}
        Err(e) => {
            let s = e.to_string();
            assert!(!s.contains('\n'), "errors are one line: {s:?}");
        }
    }
});

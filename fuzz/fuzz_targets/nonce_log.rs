//! The nonce-log codec on torn and garbage input: CRC frames of 40-byte
//! `(accepted_at_s, device ‖ nonce)` records. Input: a mode byte, then raw bytes (garbage) or
//! 40-byte records to encode, tear and decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use refserver::fuzzing::{encode_nonce_log, replay_nonce_log_bytes};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let (records, valid) = replay_nonce_log_bytes(rest);
        assert!(valid <= rest.len());
        assert_eq!(replay_nonce_log_bytes(&rest[..valid]), (records, valid));
        return;
    }
    // Records from the input, 40 bytes each, round-tripped; then a cut at the position the
    // last record's first byte names keeps exactly the whole records before it.
    let records: Vec<(i64, [u8; 32])> = rest
        .chunks_exact(40)
        .map(|c| {
            let at = i64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
            (at, c[8..].try_into().expect("32 bytes"))
        })
        .collect();
    let log = encode_nonce_log(&records);
    assert_eq!(replay_nonce_log_bytes(&log), (records.clone(), log.len()));
    let frame_len = 8 + 40;
    let cut = rest.first().map_or(0, |&b| usize::from(b) * 7) % (log.len() + 1);
    let (kept, valid) = replay_nonce_log_bytes(&log[..cut]);
    assert_eq!(kept.len(), cut / frame_len);
    assert_eq!(valid, (cut / frame_len) * frame_len);
    assert_eq!(kept[..], records[..kept.len()]);
});

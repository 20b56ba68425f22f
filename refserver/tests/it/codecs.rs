//! Property tests of the two on-disk codecs on round trips, torn tails and garbage: the
//! journal (CRC frames of JSON records replayed into the state) and the nonce log (CRC frames
//! of 40-byte records). The fuzz targets in `fuzz/` run the same properties for longer.

use proptest::prelude::*;
use protocol::wire::Change;
use refserver::fuzzing::{
    Record, encode_journal, encode_nonce_log, replay_journal_bytes, replay_log_file,
    replay_nonce_log_bytes,
};

const SECRET: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// A journal the server could have written: setup, then `n` versions of a few files.
fn journal(versions: &[(u8, bool)]) -> Vec<Record> {
    let mut recs = vec![Record::Setup {
        account_id: "a".repeat(32),
        account_name: "props".into(),
        device_id: "d".repeat(32),
        secret: SECRET.into(),
        name: "props".into(),
    }];
    for (i, &(file, deleted)) in versions.iter().enumerate() {
        let vid = format!("{:064x}", i + 1);
        recs.push(Record::Version(Change {
            seq: i as u64 + 1,
            file_id: format!("{file:032x}"),
            domain_id: "e".repeat(32),
            version_id: vid.clone(),
            parents: Vec::new(),
            sids: Vec::new(),
            bytes: 0,
            manifest_ct: String::new(),
            manifest_nonce: "0".repeat(24),
            device_id: "d".repeat(32),
            ts: 1_700_000_000_000 + i as i64,
            deleted,
            heads: vec![vid],
            conflicted: false,
        }));
    }
    recs
}

/// Byte offsets where each frame of `buf` ends (frames are `8 + payload` bytes).
fn frame_ends(buf: &[u8]) -> Vec<usize> {
    let mut ends = vec![0];
    let mut at = 0;
    while at + 8 <= buf.len() {
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
        ends.push(at);
    }
    ends
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_journal_replays_to_its_head_seq(versions in prop::collection::vec((0u8..4, any::<bool>()), 0..20)) {
        let buf = encode_journal(&journal(&versions));
        let r = replay_journal_bytes(&buf);
        prop_assert_eq!(r.frames, versions.len() + 1);
        prop_assert_eq!(r.valid_len, buf.len());
        prop_assert_eq!(r.head_seq, Ok(versions.len() as u64));
    }

    #[test]
    fn a_torn_journal_keeps_exactly_its_whole_records(
        versions in prop::collection::vec((0u8..4, any::<bool>()), 1..12),
        cut_frac in 0.0f64..=1.0,
    ) {
        let buf = encode_journal(&journal(&versions));
        let cut = ((buf.len() as f64) * cut_frac) as usize;
        let whole = frame_ends(&buf).iter().filter(|&&e| e <= cut).count() - 1;
        let r = replay_journal_bytes(&buf[..cut]);
        prop_assert_eq!(r.frames, whole);
        // The setup record is the first: every whole record after it is one version.
        prop_assert_eq!(r.head_seq, Ok(whole.saturating_sub(1) as u64));
    }

    #[test]
    fn garbage_is_never_a_panic_and_its_intact_prefix_decodes_alike(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        prefix in prop::collection::vec((0u8..4, any::<bool>()), 0..4),
    ) {
        // Garbage alone, and garbage after valid records (a bad sector in a tail).
        for buf in [bytes.clone(), [encode_journal(&journal(&prefix)), bytes.clone()].concat()] {
            let r = replay_journal_bytes(&buf);
            prop_assert!(r.valid_len <= buf.len());
            prop_assert_eq!(&replay_journal_bytes(&buf[..r.valid_len]), &r);
            let (nonces, valid) = replay_nonce_log_bytes(&buf);
            prop_assert!(valid <= buf.len());
            prop_assert!(nonces.len() <= r.frames);
        }
    }

    #[test]
    fn framed_json_garbage_is_a_one_line_replay_error(json in "\\PC{0,80}") {
        let mut buf = Vec::new();
        let len = json.len() as u32;
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(json.as_bytes()).to_le_bytes());
        buf.extend_from_slice(json.as_bytes());
        let r = replay_journal_bytes(&buf);
        prop_assert_eq!(r.frames, 1);
        if let Err(e) = r.head_seq {
            prop_assert!(e.starts_with("journal record 0 "), "{}", e);
            prop_assert!(!e.contains('\n'), "{}", e);
        }
    }

    #[test]
    fn nonce_records_round_trip_and_a_cut_keeps_the_whole_ones(
        records in prop::collection::vec((any::<i64>(), any::<[u8; 32]>()), 0..30),
        cut_frac in 0.0f64..=1.0,
    ) {
        let log = encode_nonce_log(&records);
        prop_assert_eq!(replay_nonce_log_bytes(&log), (records.clone(), log.len()));
        let cut = ((log.len() as f64) * cut_frac) as usize;
        let (kept, valid) = replay_nonce_log_bytes(&log[..cut]);
        prop_assert_eq!(kept.len(), cut / 48);
        prop_assert_eq!(valid, kept.len() * 48);
        prop_assert_eq!(&kept[..], &records[..kept.len()]);
    }
}

proptest! {
    // Each case writes and fsyncs a file: fewer of them.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_start_up_replay_truncates_exactly_the_torn_tail(
        versions in prop::collection::vec((0u8..4, any::<bool>()), 0..8),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let good = encode_journal(&journal(&versions));
        let bytes = [good.clone(), tail.clone()].concat();
        std::fs::write(&path, &bytes).unwrap();
        let expected = replay_journal_bytes(&bytes);
        let (records, dropped) = replay_log_file(&path).unwrap();
        prop_assert_eq!(records.len(), expected.frames);
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, expected.valid_len);
        let total = good.len() + tail.len();
        // A garbage tail never takes a whole record before it along.
        prop_assert!(expected.valid_len >= good.len());
        prop_assert_eq!(dropped as usize, total - expected.valid_len);
        let (again, dropped_again) = replay_log_file(&path).unwrap();
        prop_assert_eq!(again, records);
        prop_assert_eq!(dropped_again, 0);
    }
}

//! The journal codec on torn and garbage input: CRC frames of JSON records replayed into the
//! server's state, both from memory and through the start-up replay of a real file (which
//! truncates a torn tail). Input: a mode byte, then raw bytes or newline-separated records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use refserver::fuzzing::{replay_journal_bytes, replay_log_file};
use vaultbench_fuzz::{frame_lines, scratch_file, tear};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let buf = match mode % 3 {
        // Raw garbage, as a corrupted disk would give.
        0 => rest.to_vec(),
        // Well-framed records of arbitrary JSON: every frame must decode and the replay
        // must either rebuild a state or name the record that does not fit.
        1 => {
            let (buf, n) = frame_lines(rest);
            let r = replay_journal_bytes(&buf);
            assert_eq!(r.frames, n, "every well-framed record decodes");
            assert_eq!(r.valid_len, buf.len());
            buf
        }
        // Well-framed records, then torn at a point and with one bit flipped.
        _ => tear(rest),
    };
    let r = replay_journal_bytes(&buf);
    assert!(r.valid_len <= buf.len());
    // The intact prefix alone decodes to the same frames and the same verdict.
    assert_eq!(replay_journal_bytes(&buf[..r.valid_len]), r);
    // The start-up replay of the same bytes on disk keeps exactly that prefix.
    let path = scratch_file("journal", &buf);
    let (records, dropped) = replay_log_file(&path).expect("replaying a scratch file");
    assert_eq!(records.len(), r.frames);
    assert_eq!(dropped as usize, buf.len() - r.valid_len);
    let on_disk = std::fs::metadata(&path).expect("scratch file").len();
    assert_eq!(on_disk as usize, r.valid_len, "a torn tail is truncated");
    let (again, dropped_again) = replay_log_file(&path).expect("replaying it again");
    assert_eq!((again, dropped_again), (records, 0));
});

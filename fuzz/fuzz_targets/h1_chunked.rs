//! The lean HTTP/1.1 connection's chunked decoder: arbitrary bytes as the body of a
//! `Transfer-Encoding: chunked` answer (then a close) give a decoded length within the cap
//! or a one-line error, never a panic or a hang. The first byte picks the cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::internals::h1::read_answer;

fuzz_target!(init: vaultbench_fuzz::ignore_sigpipe(), |data: &[u8]| {
    let Some((&knob, body)) = data.split_first() else {
        return;
    };
    let max_body = if knob & 1 == 0 { 1 << 20 } else { 64 };
    let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    answer.extend_from_slice(body);
    match read_answer(&answer, false, max_body) {
        Ok((status, len)) => {
            assert_eq!(status, 200);
            assert!(len <= max_body, "decoded {len} bytes over the cap {max_body}");
        }
        Err(e) => {
            assert!(!e.starts_with("hang"), "{e}");
            assert!(!e.contains('\n'), "errors are one line: {e:?}");
        }
    }
});

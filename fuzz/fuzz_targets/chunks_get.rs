//! The pull's `multipart/mixed` parser for `POST /v1/chunks/get`: arbitrary bytes as a
//! server's answer body (its first byte picks the part cap, the rest of the first line is the
//! content type) give parts that lie inside the body, or a one-line error, never a panic.
//! Every accepted part is followed in the body by CRLF and the boundary.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::internals::parse_chunks_get;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let max_parts = usize::from(knob % 8);
    let (ct, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&b"multipart/mixed; boundary=b"[..], rest),
    };
    let ct = String::from_utf8_lossy(ct);
    match parse_chunks_get(&ct, body, max_parts) {
        Ok(parts) => {
            assert!(
                parts.len() <= max_parts,
                "{} parts over {max_parts}",
                parts.len()
            );
            let total: usize = parts.iter().map(|p| p.body.len()).sum();
            assert!(total <= body.len(), "parts longer than the body");
        }
        Err(e) => assert!(!e.contains('\n'), "errors are one line: {e:?}"),
    }
});

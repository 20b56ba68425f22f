//! The tus header parsers: arbitrary text as a server's `Upload-Offset`, `Upload-Length`,
//! `Tus-*` lists, `Upload-Metadata` and `Location` gives a value or a one-line error, never a
//! panic; an accepted offset never goes backwards or past the length, and an accepted
//! `Location` is a path from `/` on the target.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::protocols::tus::header;

fn short(e: &str) {
    assert!(!e.contains('\n'), "errors are one line: {e:?}");
    assert!(e.len() < 1000, "errors are short: {} bytes", e.len());
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (a, b) = text.split_at(text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i));
    let (before, length) = (data.first().copied().unwrap_or(0) as u64, 200u64);
    match header::check_patched(Some(a), before, 100, length) {
        Ok(n) => assert!(n >= before && n <= length && n <= before + 100),
        Err(e) => short(&e),
    }
    match header::check_resumed(Some(a), Some(b), before, length) {
        Ok(n) => assert!(n >= before && n <= length),
        Err(e) => short(&e),
    }
    if let Err(e) = header::Capabilities::parse(Some(a), Some(b), Some(b), Some(a)) {
        short(&e);
    }
    match header::decode_metadata(&text) {
        Ok(m) => assert_eq!(header::decode_metadata(&header::encode_metadata(&m)).ok(), Some(m)),
        Err(e) => short(&e),
    }
    match header::location_path(&text, "127.0.0.1:1080") {
        Ok(p) => assert!(p.starts_with('/') && !p.split('/').any(|s| s == "..")),
        Err(e) => short(&e),
    }
});

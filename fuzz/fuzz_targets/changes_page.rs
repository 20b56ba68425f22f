//! The change feed as a pull reads it: arbitrary bytes, cut at form feeds into a run of
//! pages, go through the page's JSON, its size check, each change's manifest and path check
//! and the feed cursor. The verdict is a cursor that never moves backwards, or a one-line
//! error, never a panic; a run of pages is never followed past its end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::internals::follow_feed;

fuzz_target!(|data: &[u8]| {
    let Some((since, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let since = u64::from_le_bytes(*since) % 1024;
    let pages: Vec<&[u8]> = rest.split(|&b| b == 0x0c).collect();
    match follow_feed(&pages, since) {
        Ok((seq, _ended)) => assert!(seq >= since, "the cursor went back from {since} to {seq}"),
        Err(e) => assert!(!e.contains('\n'), "errors are one line: {e:?}"),
    }
});

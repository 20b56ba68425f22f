//! CouchDB's messages as the LiveSync-shaped client reads them: arbitrary bytes go through
//! every message parser (`_changes` page, `_revs_diff`, `_bulk_get`, `_all_docs`,
//! `_bulk_docs`, the welcome), and, cut at form feeds into a run of `_changes` pages, through
//! the replicator's feed follower; and, read as a `_bulk_get` answer, through the pull's
//! assembly (each chunk checked against its id, each file's chunks against its size, then
//! decoded). The verdict is a position and a row count, a file length, or a one-line error,
//! never a panic; a feed that does not advance is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::protocols::couch::{
    ops::{assemble_answer, follow_pages},
    wire::parse_any,
};

fuzz_target!(|data: &[u8]| {
    parse_any(data);
    let pages: Vec<&[u8]> = data.split(|&b| b == 0x0c).collect();
    if let Err(e) = follow_pages(&pages, serde_json::Value::from(0)) {
        assert!(!e.contains('\n'), "errors are one line: {e:?}");
    }
    match assemble_answer(data) {
        Ok(n) => assert!(n <= loadgen::protocols::couch::chunk::MAX_FILE_BYTES * 1024, "{n}"),
        Err(e) => assert!(
            !e.contains('\n') && e.bytes().all(|b| b >= 0x20),
            "errors are one line of escaped text: {e:?}"
        ),
    }
});

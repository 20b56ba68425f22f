//! The reference server's request head and body parsing from raw bytes: whatever arrives on
//! a connection (then a half-close) is answered with a well-formed HTTP/1.x answer that is
//! not an internal error, or the connection is closed; the server never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vaultbench_fuzz::{Target, check_answer, exchange};

fuzz_target!(|data: &[u8]| {
    let t = Target::get();
    check_answer(&exchange(t.addr, data));
});

//! The WebDAV multistatus parser: arbitrary bytes as a PROPFIND answer's body give entries
//! or a one-line error, never a panic; an accepted answer parses to the same entries whether
//! it is read whole or handed on entry by entry, and every entry's path decodes from its href.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::protocols::webdav::multistatus::decode_href;
use loadgen::protocols::webdav::{parse_multistatus, parse_multistatus_each};

fuzz_target!(|data: &[u8]| {
    match parse_multistatus(data, "PROPFIND /") {
        Err(e) => {
            let m = e.to_string();
            assert!(!m.contains('\n'), "errors are one line: {m:?}");
            assert!(m.len() < 1000, "errors are short: {} bytes", m.len());
        }
        Ok(entries) => {
            let mut each = Vec::new();
            let n = parse_multistatus_each(data, "PROPFIND /", &mut |e| {
                each.push(e);
                Ok(())
            })
            .expect("the same bytes parse the same way");
            assert_eq!(n as usize, entries.len());
            assert_eq!(each, entries);
            for e in &entries {
                assert_eq!(decode_href(&e.href).as_deref(), Ok(e.path.as_str()));
                assert!(e.status >= 100 && e.status <= 999, "{}", e.status);
            }
        }
    }
});

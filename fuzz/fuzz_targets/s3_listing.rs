//! The S3 ListObjectsV2 parser: arbitrary bytes as a listing's body give objects and the
//! page's fields, or a one-line error, never a panic; an accepted listing hands on exactly as
//! many objects as it counts, each with a key within the text bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::protocols::s3::listing::MAX_TEXT_BYTES;
use loadgen::protocols::s3::parse_listing_each;

fuzz_target!(|data: &[u8]| {
    let mut objects = Vec::new();
    match parse_listing_each(data, "ListObjectsV2 of b/", &mut |o| {
        objects.push(o);
        Ok(())
    }) {
        Err(e) => {
            assert!(!e.contains('\n'), "errors are one line: {e:?}");
            assert!(e.len() < 1000, "errors are short: {} bytes", e.len());
        }
        Ok(end) => {
            assert_eq!(end.objects as usize, objects.len());
            for o in &objects {
                assert!(o.key.len() <= MAX_TEXT_BYTES, "{}", o.key.len());
            }
            if let Some(t) = &end.next_token {
                assert!(!t.is_empty() && t.len() <= MAX_TEXT_BYTES);
            }
        }
    }
});

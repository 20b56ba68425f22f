//! The HTTP/1.1 answer parser on garbage and on generated answers (the `h1_answer` fuzz
//! target in `fuzz/` runs the same properties for longer).

use loadgen::internals::h1::{parse_answer_head, parse_chunk_size_line, read_answer};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbage_heads_are_errors_not_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Some(Err(e)) = parse_answer_head(&bytes) {
            prop_assert!(!e.contains('\n'), "{}", e);
        }
        let _ = parse_chunk_size_line(&bytes);
    }

    #[test]
    fn generated_heads_parse_to_their_fields(
        status in 100u16..600,
        length in prop::option::of(any::<u64>()),
        close in any::<bool>(),
        lf_only in any::<bool>(),
        junk in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,20}"), 0..4),
    ) {
        let eol = if lf_only { "\n" } else { "\r\n" };
        let mut head = format!("HTTP/1.1 {status} Whatever{eol}");
        for (k, v) in &junk {
            if !matches!(k.as_str(), "content-length" | "transfer-encoding" | "connection") {
                head.push_str(&format!("{k}: {v}{eol}"));
            }
        }
        if let Some(n) = length {
            head.push_str(&format!("Content-Length: {n}{eol}"));
        }
        if close {
            head.push_str(&format!("Connection: close{eol}"));
        }
        head.push_str(eol);
        let parsed = parse_answer_head(format!("{head}body").as_bytes());
        let h = parsed.expect("complete").expect("valid");
        prop_assert_eq!(h.status, status);
        prop_assert_eq!(h.len, head.len());
        prop_assert_eq!(h.content_length, length);
        prop_assert_eq!(h.close, close);
        // Any cut before the blank line is an incomplete head, not an error.
        prop_assert!(parse_answer_head(&head.as_bytes()[..head.len() - eol.len()]).is_none());
    }
}

proptest! {
    // Each case is a loopback round trip: fewer of them.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn whole_answers_give_a_verdict_never_a_hang(
        answer in prop::collection::vec(any::<u8>(), 0..200),
        prefix in prop::sample::select(vec![
            "", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.0 204 No\r\ncontent-length: 5\r\n\r\n",
        ]),
    ) {
        let bytes = [prefix.as_bytes(), &answer].concat();
        if let Err(e) = read_answer(&bytes, false, 1 << 20) {
            prop_assert!(!e.starts_with("hang"), "{}", e);
        }
    }
}

#[test]
fn a_chunked_answer_is_read_to_its_end() {
    let answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    assert_eq!(read_answer(answer, false, 1 << 20), Ok((200, 5)));
    let short = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhello";
    assert!(read_answer(short, false, 1 << 20).is_err());
}

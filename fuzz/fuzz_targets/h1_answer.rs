//! The load generator's HTTP/1.1 answer parser: arbitrary bytes as a server's whole answer
//! (then a close) give a status and a body length or a one-line error, never a panic or a
//! hang. Thin on purpose (bytes in, the parser's verdict out) so it survives a rewrite of
//! the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::internals::h1::{parse_answer_head, read_answer};

fuzz_target!(init: vaultbench_fuzz::ignore_sigpipe(), |data: &[u8]| {
    let Some((&mode, answer)) = data.split_first() else {
        return;
    };
    let max_body = if mode & 1 == 0 { 1 << 20 } else { 64 };
    let verdict = read_answer(answer, mode & 2 != 0, max_body);
    if let Err(e) = &verdict {
        assert!(!e.starts_with("hang"), "{e}");
        assert!(!e.contains('\n'), "errors are one line: {e:?}");
    }
    // A well-formed final head that the connection accepted reports its own status.
    if let (Some(Ok(head)), Ok((status, body))) = (parse_answer_head(answer), &verdict)
        && head.status >= 200
    {
        assert_eq!(head.status, *status);
        if let (Some(n), false) = (head.content_length, head.chunked) {
            if mode & 2 == 0 && head.status != 204 && head.status != 304 {
                assert_eq!(n, *body);
            }
        }
    }
});

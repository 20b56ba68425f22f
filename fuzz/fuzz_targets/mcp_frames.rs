//! The MCP transports' framing: arbitrary bytes as a stdio server's stdout (the bounded line
//! reader) and as a Streamable HTTP answer's SSE stream (the bounded SSE parser), the SSE
//! stream fed whole and cut into chunks of a size the first byte picks. Neither panics; a
//! line is never longer than its bound nor holds a newline; an event's data is never larger
//! than its bound; and the chunks give the same events as the whole.
#![no_main]

use std::future::Future;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use loadgen::protocols::mcp::line::Lines;
use loadgen::protocols::mcp::sse::{Event, SseError, SseParser};

const MAX_LINE: usize = 64;
const MAX_EVENT: usize = 256;

/// Every line of `data` (a byte slice is always ready: one poll ends each read).
fn lines(data: &[u8]) {
    let mut l = Lines::new(data, MAX_LINE);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let next = std::pin::pin!(l.next()).poll(&mut cx);
        match next {
            Poll::Ready(Ok(Some(line))) => {
                assert!(line.len() <= MAX_LINE, "{} bytes", line.len());
                assert!(!line.contains(&b'\n'));
            }
            Poll::Ready(Ok(None)) => break,
            Poll::Ready(Err(e)) => {
                assert!(!e.to_string().contains('\n'));
                break;
            }
            Poll::Pending => panic!("a slice reader is never pending"),
        }
    }
    assert!(l.bytes <= data.len() as u64);
}

fn sse<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> Result<Vec<Event>, SseError> {
    let mut p = SseParser::new(MAX_LINE, MAX_EVENT);
    let mut out = Vec::new();
    for c in chunks {
        p.push(c, &mut out)?;
    }
    for e in &out {
        assert!(e.data.len() <= MAX_EVENT, "{} bytes", e.data.len());
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    lines(rest);
    let whole = sse(std::iter::once(rest));
    let cut = sse(rest.chunks(usize::from(size).max(1)));
    assert_eq!(whole, cut, "chunks of {size} read differently");
});

//! CI-sized property tests of the MCP stdio framing (`loadgen::protocols::mcp::line`):
//! whatever bytes a server writes, in whatever pieces they arrive, the reader gives back
//! exactly the input's lines while each fits the bound, refuses the first that does not, and
//! never holds more than the bound and one read beyond it. And of the Streamable HTTP
//! transport's SSE parser (`sse`): messages written as events in any line ending come back
//! as they were, however the stream is cut, and any bytes read the same cut or whole (the
//! `mcp_frames` fuzz target runs the same for longer).

use std::pin::Pin;
use std::task::{Context, Poll};

use loadgen::protocols::mcp::line::{LineError, Lines};
use loadgen::protocols::mcp::sse::{Event, SseError, SseParser};
use proptest::prelude::*;
use tokio::io::{AsyncRead, ReadBuf};

/// `data` handed out `piece` bytes at a time.
struct Pieces {
    data: Vec<u8>,
    at: usize,
    piece: usize,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self
            .piece
            .min(buf.remaining())
            .min(self.data.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

/// The lines the framing should give for `data` under `max`: `Err(i)` when line `i` is the
/// first one too long.
fn expected(data: &[u8], max: usize) -> (Vec<Vec<u8>>, bool) {
    let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let mut out = Vec::new();
    let n = parts.len();
    for (i, p) in parts.into_iter().enumerate() {
        let terminated = i + 1 < n || data.ends_with(b"\n");
        let mut l = p.to_vec();
        if terminated && l.last() == Some(&b'\r') {
            l.pop();
        }
        if l.len() > max {
            return (out, true);
        }
        out.push(l);
    }
    (out, false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lines_are_the_input_split_until_one_is_too_long(
        data in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), any::<u8>()], 0..600),
        max in 0usize..40,
        piece in 1usize..70,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (want, too_long) = expected(&data, max);
        let mut lines = Lines::new(Pieces { data: data.clone(), at: 0, piece }, max);
        let mut got = Vec::new();
        let end = rt.block_on(async {
            loop {
                match lines.next().await {
                    Ok(Some(l)) => got.push(l),
                    Ok(None) => return None,
                    Err(e) => return Some(e),
                }
            }
        });
        prop_assert_eq!(&got, &want);
        match end {
            None => prop_assert!(!too_long),
            Some(LineError::TooLong { max: m }) => {
                prop_assert!(too_long);
                prop_assert_eq!(m, max);
            }
            Some(e) => prop_assert!(false, "{e}"),
        }
    }

    #[test]
    fn sse_events_come_back_whatever_the_line_ends_and_the_cuts(
        messages in proptest::collection::vec(
            proptest::collection::vec("[a-z{}\":, ]{0,12}", 1..4), 0..6),
        ends in proptest::collection::vec(0usize..3, 1..8),
        piece in 1usize..40,
    ) {
        let mut stream = Vec::new();
        let (mut e, mut after_cr) = (0, false);
        // A CR end then an LF end would be one CRLF: after a CR, an LF end is a CRLF.
        let mut end = || {
            e += 1;
            let mut pick = ends[e % ends.len()];
            if after_cr && pick == 0 {
                pick = 1;
            }
            after_cr = pick == 2;
            [&b"\n"[..], b"\r\n", b"\r"][pick]
        };
        for lines in &messages {
            stream.extend_from_slice(b": keep-alive");
            stream.extend_from_slice(end());
            for l in lines {
                stream.extend_from_slice(b"data: ");
                stream.extend_from_slice(l.as_bytes());
                stream.extend_from_slice(end());
            }
            stream.extend_from_slice(end());
        }
        let got = sse(stream.chunks(piece), 64, 1 << 10).unwrap();
        let want: Vec<Vec<u8>> = messages.iter().map(|m| m.join("\n").into_bytes()).collect();
        prop_assert_eq!(got.into_iter().map(|e| e.data).collect::<Vec<_>>(), want);
    }

    #[test]
    fn any_bytes_read_the_same_cut_or_whole(
        data in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), any::<u8>()], 0..600),
        piece in 1usize..70,
    ) {
        let whole = sse(std::iter::once(&data[..]), 16, 40);
        let cut = sse(data.chunks(piece), 16, 40);
        if let Ok(events) = &whole {
            prop_assert!(events.iter().all(|e| e.data.len() <= 40));
        }
        prop_assert_eq!(whole, cut);
    }
}

fn sse<'a>(
    chunks: impl Iterator<Item = &'a [u8]>,
    max_line: usize,
    max_event: usize,
) -> Result<Vec<Event>, SseError> {
    let mut p = SseParser::new(max_line, max_event);
    let mut out = Vec::new();
    for c in chunks {
        p.push(c, &mut out)?;
    }
    Ok(out)
}

//! CI-sized property tests of the MCP stdio framing (`loadgen::protocols::mcp::line`):
//! whatever bytes a server writes, in whatever pieces they arrive, the reader gives back
//! exactly the input's lines while each fits the bound, refuses the first that does not, and
//! never holds more than the bound and one read beyond it.

use std::pin::Pin;
use std::task::{Context, Poll};

use loadgen::protocols::mcp::line::{LineError, Lines};
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
}

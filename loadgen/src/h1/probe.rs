//! The answer parser on arbitrary bytes, for the fuzz target in `fuzz/` and the benches:
//! bytes in, the parser's verdict out. Hidden from the docs; not the generator's API.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{BodyLen, H1Conn, parse_chunk_size, parse_head};

/// What the head parser made of an answer head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerHead {
    pub status: u16,
    /// Bytes of the head, including the blank line.
    pub len: usize,
    /// `Some(n)`: a `Content-Length` body; `None` with `chunked` false: runs to close.
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub close: bool,
}

/// Parses the answer head at the front of `buf`: `None` while the head is incomplete.
pub fn parse_answer_head(buf: &[u8]) -> Option<Result<AnswerHead, String>> {
    // `parse_head` (httparse) says `Ok(None)` while the head is incomplete.
    match parse_head(buf) {
        Ok(None) => None,
        Err(e) => Some(Err(e)),
        Ok(Some(h)) => Some(Ok(AnswerHead {
            status: h.status,
            len: h.len,
            content_length: match h.body {
                BodyLen::Known(n) => Some(n),
                _ => None,
            },
            chunked: h.body == BodyLen::Chunked,
            close: h.close,
        })),
    }
}

/// Parses one chunk-size line (without its line end).
pub fn parse_chunk_size_line(line: &[u8]) -> Result<u64, String> {
    parse_chunk_size(line)
}

/// One whole round trip of a keep-alive connection whose server answers `GET /livez` with
/// exactly `answer` and then closes: the status and body length the client read, or its
/// one-line error. Runs on a per-thread current-thread runtime over loopback; a client that
/// has not finished after 5 s is an error ("hang"), which a fuzz target treats as a defect.
pub fn read_answer(answer: &[u8], head_only: bool, max_body: u64) -> Result<(u16, u64), String> {
    thread_local! {
        static RT: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok();
    }
    RT.with(|rt| {
        let rt = rt.as_ref().ok_or("no tokio runtime")?;
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| format!("bind: {e}"))?;
            let addr = listener.local_addr().map_err(|e| format!("addr: {e}"))?;
            let answer = answer.to_vec();
            let server = tokio::spawn(async move {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let mut req = [0u8; 256];
                let _ = s.read(&mut req).await;
                let _ = s.write_all(&answer).await;
                let _ = s.shutdown().await;
            });
            let mut conn = H1Conn::new(addr);
            conn.request_buf()
                .extend_from_slice(b"GET /livez HTTP/1.1\r\nhost: fuzz\r\n\r\n");
            let out =
                tokio::time::timeout(Duration::from_secs(5), conn.roundtrip(head_only, max_body))
                    .await;
            server.abort();
            match out {
                Err(_) => Err("hang: no verdict within 5 s".to_owned()),
                Ok(Ok(r)) => Ok((r.status, r.body_bytes)),
                Ok(Err((kind, msg))) => Err(format!("{kind}: {msg}")),
            }
        })
    })
}

//! A long poll held on a connection of its own, without hyper: what each of thousands of
//! waiting devices holds. The signed request is written, and then the wait holds the socket
//! alone (no read buffer, no connection task) until the answer is readable; the answer is
//! read into a buffer that lives only until it is parsed. A held device costs its socket and
//! a small record, where a pooled hyper connection keeps some 16 KiB of buffers while it
//! waits.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::error::LoadError;
use crate::h1::probe::{AnswerHead, parse_answer_head, parse_chunk_size_line};
use crate::protocols::obsync::client::{
    Answer, Device, MAX_ANSWER_BYTES, Outgoing, TOO_LARGE, raw_head, status_label, timed_out,
    transport,
};
use crate::stats::{Recorder, Sample};

/// Largest answer head read (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// What one read asks for while the answer arrives.
const READ_STEP: usize = 4096;

/// A waiting device's connection: a socket kept alive between polls, or none.
#[derive(Debug, Default)]
pub struct HeldConn {
    stream: Option<TcpStream>,
}

/// Why an exchange failed: a transport kind (`connect`, `io`, [`TOO_LARGE`]) and the detail.
type Fail = (&'static str, String);

fn io(what: &str, e: std::io::Error) -> Fail {
    ("io", format!("{what}: {e}"))
}

impl Device {
    /// Sends `req` over `conn` (reconnecting when it has no socket, or once when a kept one
    /// turns out closed), reads the whole answer (at most [`MAX_ANSWER_BYTES`] of body) and
    /// counts the outcome in `rec`, as [`Device::send`] does over the pool.
    pub(crate) async fn send_held(
        &self,
        rec: &Recorder,
        conn: &mut HeldConn,
        req: &Outgoing<'_>,
    ) -> Result<Answer, LoadError> {
        let (builder, sign) = self.request_head(req);
        let head = raw_head(&builder, self.inner.target.authority(), req.body.len());
        drop(builder);
        let sent = Instant::now();
        let addr = self.inner.target.addr();
        let outcome = tokio::time::timeout(req.timeout, exchange(conn, addr, &head, &req.body));
        let outcome = outcome.await;
        let sample = Sample::done_now(sent, req.intended, req.body.len() as u64, sign);
        let label = req.route.label();
        match outcome {
            Ok(Ok((status, body))) => {
                rec.record(label, status_label(status), sample(body.len() as u64));
                Ok(Answer {
                    status,
                    headers: hyper::HeaderMap::new(),
                    body,
                })
            }
            Ok(Err((kind, detail))) => {
                conn.stream = None;
                rec.record(label, kind, sample(0));
                Err(if kind == TOO_LARGE {
                    LoadError::AnswerTooLarge {
                        route: label.to_owned(),
                        cap: MAX_ANSWER_BYTES as u64,
                        detail,
                    }
                } else {
                    transport(req.route, kind, detail)
                })
            }
            Err(_) => {
                conn.stream = None;
                rec.record(label, "timeout", sample(0));
                Err(timed_out(req.route, req.timeout))
            }
        }
    }
}

/// One exchange over `conn`; a kept socket the server has closed meanwhile fails at once,
/// and the request goes once more over a new one.
async fn exchange(
    conn: &mut HeldConn,
    addr: SocketAddr,
    head: &[u8],
    body: &[u8],
) -> Result<(u16, Bytes), Fail> {
    let reused = conn.stream.is_some();
    match once(conn, addr, head, body).await {
        Err(("io", _)) if reused => once(conn, addr, head, body).await,
        r => r,
    }
}

async fn once(
    conn: &mut HeldConn,
    addr: SocketAddr,
    head: &[u8],
    body: &[u8],
) -> Result<(u16, Bytes), Fail> {
    let mut s = match conn.stream.take() {
        Some(s) => s,
        None => {
            let s = TcpStream::connect(addr)
                .await
                .map_err(|e| ("connect", e.to_string()))?;
            let _ = s.set_nodelay(true);
            s
        }
    };
    s.write_all(head)
        .await
        .map_err(|e| io("sending the request", e))?;
    if !body.is_empty() {
        s.write_all(body)
            .await
            .map_err(|e| io("sending the body", e))?;
    }
    // The wait: the socket alone until the answer starts.
    s.readable()
        .await
        .map_err(|e| io("waiting for the answer", e))?;
    let (answer, keep) = read_answer(&mut s).await?;
    if keep {
        conn.stream = Some(s);
    }
    Ok(answer)
}

/// Reads one answer from `s`: its status and body, and whether the connection may carry
/// another request.
async fn read_answer(s: &mut TcpStream) -> Result<((u16, Bytes), bool), Fail> {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_STEP);
    let head: AnswerHead = loop {
        if let Some(h) = parse_answer_head(&buf) {
            break h.map_err(|e| ("io", format!("a malformed answer head: {e}")))?;
        }
        if buf.len() > MAX_HEAD {
            return Err(("io", format!("an answer head over {MAX_HEAD} bytes")));
        }
        if read_more(s, &mut buf).await? == 0 {
            return Err(("io", "the connection closed before an answer".to_owned()));
        }
    };
    if head.status < 200 {
        return Err((
            "io",
            format!(
                "an interim answer {} to a request that asked for none",
                head.status
            ),
        ));
    }
    let rest = buf.split_off(head.len);
    drop(buf);
    let cap = MAX_ANSWER_BYTES as u64;
    let (body, keep) = match (head.content_length, head.chunked) {
        (Some(n), _) if n > cap => return Err((TOO_LARGE, format!("Content-Length {n}"))),
        (Some(n), _) => {
            let mut body = rest;
            while (body.len() as u64) < n {
                body.reserve(((n - body.len() as u64) as usize).min(64 * 1024));
                if read_more(s, &mut body).await? == 0 {
                    return Err(("io", "the connection closed inside the body".to_owned()));
                }
            }
            // Bytes past the body would be an answer nobody asked for: the socket goes.
            let extra = body.len() as u64 > n;
            body.truncate(n as usize);
            (body, !head.close && !extra)
        }
        (None, true) => (read_chunked(s, rest).await?, !head.close),
        (None, false) => {
            let mut body = rest;
            while read_more(s, &mut body).await? > 0 {
                if body.len() as u64 > cap {
                    return Err((TOO_LARGE, "the body ran past the cap".to_owned()));
                }
            }
            (body, false)
        }
    };
    Ok(((head.status, Bytes::from(body)), keep))
}

/// One read into `buf`'s spare capacity (at least [`READ_STEP`] of it); `Ok(0)` at the end.
async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<usize, Fail> {
    buf.reserve(READ_STEP);
    s.read_buf(buf)
        .await
        .map_err(|e| io("reading the answer", e))
}

/// Decodes a chunked body whose first bytes are `raw`, reading the rest from `s`, up to the
/// last chunk and its trailers.
async fn read_chunked(s: &mut TcpStream, mut raw: Vec<u8>) -> Result<Vec<u8>, Fail> {
    let cap = MAX_ANSWER_BYTES as u64;
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        // The size line.
        let line_end = loop {
            if let Some(i) = raw[pos..].windows(2).position(|w| w == b"\r\n") {
                break pos + i;
            }
            if raw.len() - pos > 1024 {
                return Err(("io", "a chunk-size line over 1 KiB".to_owned()));
            }
            if read_more(s, &mut raw).await? == 0 {
                return Err((
                    "io",
                    "the connection closed inside a chunked body".to_owned(),
                ));
            }
        };
        let size = parse_chunk_size_line(&raw[pos..line_end])
            .map_err(|e| ("io", format!("a malformed chunk size: {e}")))?;
        pos = line_end + 2;
        if size == 0 {
            // Trailers, each a line, to the empty one.
            loop {
                if let Some(i) = raw[pos..].windows(2).position(|w| w == b"\r\n") {
                    if i == 0 {
                        return Ok(body);
                    }
                    pos += i + 2;
                    continue;
                }
                if raw.len() - pos > MAX_HEAD {
                    return Err(("io", format!("trailers over {MAX_HEAD} bytes")));
                }
                if read_more(s, &mut raw).await? == 0 {
                    return Err(("io", "the connection closed inside the trailers".to_owned()));
                }
            }
        }
        if body.len() as u64 + size > cap {
            return Err((TOO_LARGE, "the chunked body ran past the cap".to_owned()));
        }
        let end = pos + size as usize + 2;
        while raw.len() < end {
            if read_more(s, &mut raw).await? == 0 {
                return Err(("io", "the connection closed inside a chunk".to_owned()));
            }
        }
        if &raw[end - 2..end] != b"\r\n" {
            return Err(("io", "a chunk not followed by CRLF".to_owned()));
        }
        body.extend_from_slice(&raw[pos..end - 2]);
        // What is consumed goes, so the buffer holds one chunk at a time.
        raw.drain(..end);
        pos = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::net::TcpListener;

    /// A server that answers each request (a head ending in a blank line) with the next of
    /// `answers`, then closes after the last.
    async fn serve(answers: Vec<Vec<u8>>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            for a in answers {
                let mut got = Vec::new();
                let mut b = [0u8; 1024];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = c.read(&mut b).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&b[..n]);
                }
                c.write_all(&a).await.unwrap();
            }
        });
        addr
    }

    async fn ask(conn: &mut HeldConn, addr: SocketAddr) -> Result<(u16, Bytes), Fail> {
        exchange(
            conn,
            addr,
            b"GET /v1/changes HTTP/1.1\r\nhost: x\r\n\r\n",
            b"",
        )
        .await
    }

    #[tokio::test]
    async fn answers_are_read_by_length_and_by_chunks_on_one_kept_connection() {
        let addr = serve(vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_vec(),
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nt: 1\r\n\r\n".to_vec(),
            b"HTTP/1.1 503 Busy\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_vec(),
        ])
        .await;
        let mut conn = HeldConn::default();
        assert_eq!(
            ask(&mut conn, addr).await.unwrap(),
            (200, Bytes::from("hello"))
        );
        assert!(conn.stream.is_some(), "kept alive");
        assert_eq!(
            ask(&mut conn, addr).await.unwrap(),
            (200, Bytes::from("abcde"))
        );
        assert_eq!(
            ask(&mut conn, addr).await.unwrap(),
            (503, Bytes::from("{}"))
        );
        assert!(conn.stream.is_none(), "closed as the server said");
    }

    #[tokio::test]
    async fn broken_answers_are_one_line_errors() {
        for (answer, want) in [
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n"[..],
                TOO_LARGE,
            ),
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"[..],
                "io",
            ),
            (&b"NOT HTTP\r\n\r\n"[..], "io"),
            (&b"HTTP/1.1 100 Continue\r\n\r\n"[..], "io"),
            (
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"[..],
                "io",
            ),
        ] {
            let addr = serve(vec![answer.to_vec()]).await;
            let mut conn = HeldConn::default();
            let (kind, detail) = ask(&mut conn, addr).await.unwrap_err();
            assert_eq!(kind, want, "{detail}");
            assert!(!detail.contains('\n'), "{detail}");
        }
    }

    #[tokio::test]
    async fn a_kept_connection_the_server_closed_is_replaced_once() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            for _ in 0..2 {
                let (mut c, _) = l.accept().await.unwrap();
                let mut b = [0u8; 1024];
                let _ = c.read(&mut b).await.unwrap();
                c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await
                    .unwrap();
                // Closed after one answer, though the answer did not say so.
            }
        });
        let mut conn = HeldConn::default();
        assert_eq!(ask(&mut conn, addr).await.unwrap().0, 200);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(ask(&mut conn, addr).await.unwrap().0, 200);
    }
}

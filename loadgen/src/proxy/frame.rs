//! HTTP/1.1 framing as the recording proxy needs it: a request's or an answer's head parsed
//! with `httparse` (what follows it and how it ends), a body's end found in its bytes as they
//! stream by (a `Content-Length`, a chunked body with its extensions and trailers, or until
//! the connection closes), and WebSocket frames counted in a tunnel. Nothing is buffered: each
//! parser takes the bytes at hand and says how many belong to what it frames. Pure.

/// The most header fields a head may have (Apache's `LimitRequestFields` default is 100).
pub const MAX_HEADERS: usize = 128;
/// The longest chunk-size line or trailer line of a chunked body.
const MAX_CHUNK_LINE: usize = 4096;
/// The most trailer bytes after a chunked body's last chunk.
const MAX_TRAILERS: usize = 64 * 1024;

/// Why a head or a body could not be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("malformed head: {0}")]
    Head(String),
    #[error(
        "both Content-Length and Transfer-Encoding, or a Content-Length that is not one number"
    )]
    Length,
    #[error("malformed chunked body: {0}")]
    Chunked(&'static str),
}

/// How a body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLen {
    None,
    Known(u64),
    Chunked,
    /// An answer without a length: until the server closes (RFC 9112 §6.3, rule 8).
    UntilClose,
}

/// A request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub target: String,
    /// Bytes of the head, the blank line included.
    pub len: usize,
    pub body: BodyLen,
    pub expect_continue: bool,
    /// An `Upgrade` asked for (with `Connection: upgrade`).
    pub upgrade: bool,
    pub close: bool,
    /// The body is JSON (`Content-Type` says so): a GraphQL operation may be in it.
    pub json: bool,
}

/// An answer head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerHead {
    pub status: u16,
    pub len: usize,
    pub body: BodyLen,
    pub close: bool,
}

fn header_has(value: &[u8], token: &str) -> bool {
    String::from_utf8_lossy(value)
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// `Content-Length` and `Transfer-Encoding` into a body length; `default` when neither.
fn body_len(headers: &[httparse::Header<'_>], default: BodyLen) -> Result<BodyLen, FrameError> {
    let mut len: Option<u64> = None;
    let mut chunked = false;
    let mut te = false;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(FrameError::Length)?;
            if len.is_some_and(|l| l != v) {
                return Err(FrameError::Length);
            }
            len = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
            // Chunked must be the last coding (RFC 9112 §6.1).
            chunked = String::from_utf8_lossy(h.value)
                .rsplit(',')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"));
        }
    }
    match (te, len) {
        (true, Some(_)) => Err(FrameError::Length),
        (true, None) if chunked => Ok(BodyLen::Chunked),
        (true, None) => Ok(BodyLen::UntilClose),
        (false, Some(0)) => Ok(BodyLen::None),
        (false, Some(n)) => Ok(BodyLen::Known(n)),
        (false, None) => Ok(default),
    }
}

/// The request head at the start of `buf`, `None` while it is incomplete.
pub fn parse_request(buf: &[u8]) -> Result<Option<RequestHead>, FrameError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(FrameError::Head(e.to_string())),
    };
    let method = req.method.unwrap_or("").to_owned();
    let target = req.path.unwrap_or("/").to_owned();
    let http10 = req.version == Some(0);
    let body = body_len(req.headers, BodyLen::None)?;
    // A request without a length has no body; one "until close" cannot be framed.
    let body = if body == BodyLen::UntilClose {
        return Err(FrameError::Length);
    } else {
        body
    };
    let (mut expect, mut upgrade, mut conn_upgrade, mut close, mut keep, mut json) =
        (false, false, false, false, false, false);
    for h in req.headers.iter() {
        let n = h.name;
        if n.eq_ignore_ascii_case("expect") {
            expect = header_has(h.value, "100-continue");
        } else if n.eq_ignore_ascii_case("upgrade") {
            upgrade = true;
        } else if n.eq_ignore_ascii_case("connection") {
            conn_upgrade |= header_has(h.value, "upgrade");
            close |= header_has(h.value, "close");
            keep |= header_has(h.value, "keep-alive");
        } else if n.eq_ignore_ascii_case("content-type") {
            json = String::from_utf8_lossy(h.value)
                .to_ascii_lowercase()
                .contains("json");
        }
    }
    Ok(Some(RequestHead {
        method,
        target,
        len,
        body,
        expect_continue: expect,
        upgrade: upgrade && conn_upgrade,
        close: close || (http10 && !keep),
        json,
    }))
}

/// The answer head at the start of `buf` to a request of `method`, `None` while incomplete.
pub fn parse_answer(buf: &[u8], method: &str) -> Result<Option<AnswerHead>, FrameError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut ans = httparse::Response::new(&mut headers);
    let len = match ans.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(FrameError::Head(e.to_string())),
    };
    let status = ans.code.unwrap_or(0);
    let http10 = ans.version == Some(0);
    let (mut close, mut keep) = (false, false);
    for h in ans.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            close |= header_has(h.value, "close");
            keep |= header_has(h.value, "keep-alive");
        }
    }
    // No body: an interim answer, 204, 304, a HEAD's answer, a CONNECT's 2xx (RFC 9112 §6.3).
    let body = if (100..200).contains(&status)
        || status == 204
        || status == 304
        || method == "HEAD"
        || (method == "CONNECT" && (200..300).contains(&status))
    {
        BodyLen::None
    } else {
        body_len(ans.headers, BodyLen::UntilClose)?
    };
    Ok(Some(AnswerHead {
        status,
        len,
        body,
        close: close || (http10 && !keep) || body == BodyLen::UntilClose,
    }))
}

/// Where a body ends, found in its bytes as they come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Known(u64),
    Chunked(Chunked),
    UntilClose,
    Done,
}

impl Body {
    pub fn new(len: BodyLen) -> Body {
        match len {
            BodyLen::None | BodyLen::Known(0) => Body::Done,
            BodyLen::Known(n) => Body::Known(n),
            BodyLen::Chunked => Body::Chunked(Chunked::default()),
            BodyLen::UntilClose => Body::UntilClose,
        }
    }

    pub fn is_done(&self) -> bool {
        *self == Body::Done
    }

    /// How many of `data`'s first bytes belong to the body; after them the body may be done.
    pub fn feed(&mut self, data: &[u8]) -> Result<usize, FrameError> {
        match self {
            Body::Done => Ok(0),
            Body::UntilClose => Ok(data.len()),
            Body::Known(left) => {
                let n = (*left).min(data.len() as u64);
                *left -= n;
                if *left == 0 {
                    *self = Body::Done;
                }
                Ok(n as usize)
            }
            Body::Chunked(c) => {
                let n = c.feed(data)?;
                if c.state == ChunkState::Done {
                    *self = Body::Done;
                }
                Ok(n)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// In a chunk-size line: the size so far, digits seen, and whether past them (an
    /// extension).
    Size {
        size: u64,
        digits: u32,
        ext: bool,
    },
    SizeLf {
        size: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// At the start of a trailer line, or of the blank line that ends the body.
    TrailerStart,
    TrailerLine,
    EndLf,
    Done,
}

/// A chunked body's framing (RFC 9112 §7.1), byte by byte outside the chunks' data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunked {
    state: ChunkState,
    /// Bytes of the current size or trailer line, and of all trailers.
    line: usize,
    trailers: usize,
}

impl Default for Chunked {
    fn default() -> Chunked {
        Chunked {
            state: ChunkState::Size {
                size: 0,
                digits: 0,
                ext: false,
            },
            line: 0,
            trailers: 0,
        }
    }
}

impl Chunked {
    /// How many of `data`'s first bytes belong to the body (all of them unless it ended).
    pub fn feed(&mut self, data: &[u8]) -> Result<usize, FrameError> {
        use ChunkState as S;
        let mut i = 0;
        while i < data.len() {
            match self.state {
                S::Done => return Ok(i),
                S::Data(left) => {
                    let n = left.min((data.len() - i) as u64);
                    i += n as usize;
                    self.state = if left == n {
                        S::DataCr
                    } else {
                        S::Data(left - n)
                    };
                    continue;
                }
                _ => {}
            }
            let b = data[i];
            i += 1;
            self.state = match self.state {
                S::Size { size, digits, ext } => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return Err(FrameError::Chunked("a chunk-size line over 4096 bytes"));
                    }
                    match b {
                        b'\r' | b'\n' if digits == 0 => {
                            return Err(FrameError::Chunked("a chunk without a size"));
                        }
                        b'\r' => S::SizeLf { size },
                        b'\n' => self.after_size(size),
                        _ if ext => S::Size { size, digits, ext },
                        b';' | b' ' | b'\t' => S::Size {
                            size,
                            digits,
                            ext: true,
                        },
                        _ => {
                            let d = (b as char)
                                .to_digit(16)
                                .ok_or(FrameError::Chunked("a chunk size that is not hex"))?;
                            if digits >= 15 {
                                return Err(FrameError::Chunked("a chunk size over 15 hex digits"));
                            }
                            S::Size {
                                size: size * 16 + u64::from(d),
                                digits: digits + 1,
                                ext,
                            }
                        }
                    }
                }
                S::SizeLf { size } => {
                    if b != b'\n' {
                        return Err(FrameError::Chunked("a chunk-size line without LF"));
                    }
                    self.after_size(size)
                }
                S::DataCr => match b {
                    b'\r' => S::DataLf,
                    b'\n' => self.next_size(),
                    _ => return Err(FrameError::Chunked("a chunk longer than its size")),
                },
                S::DataLf => {
                    if b != b'\n' {
                        return Err(FrameError::Chunked("a chunk's CR without LF"));
                    }
                    self.next_size()
                }
                S::TrailerStart => match b {
                    b'\r' => S::EndLf,
                    b'\n' => S::Done,
                    _ => self.trailer_byte()?,
                },
                S::TrailerLine => {
                    if b == b'\n' {
                        S::TrailerStart
                    } else {
                        self.trailer_byte()?
                    }
                }
                S::EndLf => {
                    if b != b'\n' {
                        return Err(FrameError::Chunked("the last blank line without LF"));
                    }
                    S::Done
                }
                S::Data(_) | S::Done => unreachable_state(),
            };
        }
        Ok(i)
    }

    fn after_size(&mut self, size: u64) -> ChunkState {
        self.line = 0;
        if size == 0 {
            ChunkState::TrailerStart
        } else {
            ChunkState::Data(size)
        }
    }

    fn next_size(&mut self) -> ChunkState {
        self.line = 0;
        ChunkState::Size {
            size: 0,
            digits: 0,
            ext: false,
        }
    }

    fn trailer_byte(&mut self) -> Result<ChunkState, FrameError> {
        self.trailers += 1;
        if self.trailers > MAX_TRAILERS {
            return Err(FrameError::Chunked("trailers over 64 KiB"));
        }
        Ok(ChunkState::TrailerLine)
    }
}

/// The states handled before the byte match: never reached there.
fn unreachable_state() -> ChunkState {
    ChunkState::Done
}

/// Counts WebSocket frames (RFC 6455 §5.2) in one direction of a tunnel, header by header,
/// the payloads skipped.
#[derive(Debug, Clone, Default)]
pub struct WsFrames {
    pub frames: u64,
    head: [u8; 14],
    have: usize,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

impl WsFrames {
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len() as u64);
                self.skip -= n;
                data = &data[n as usize..];
                continue;
            }
            self.head[self.have] = data[0];
            self.have += 1;
            data = &data[1..];
            if self.have < 2 {
                continue;
            }
            let masked = self.head[1] & 0x80 != 0;
            let len7 = self.head[1] & 0x7f;
            let ext = match len7 {
                126 => 2,
                127 => 8,
                _ => 0,
            };
            let need = 2 + ext + if masked { 4 } else { 0 };
            if self.have < need {
                continue;
            }
            let len = match ext {
                2 => u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
                8 => u64::from_be_bytes(self.head[2..10].try_into().unwrap_or([0; 8])),
                _ => u64::from(len7),
            };
            self.frames += 1;
            self.skip = len;
            self.have = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `data` to a fresh body `split` bytes at a time: the bytes it took and whether
    /// it ended.
    fn frame(len: BodyLen, data: &[u8], split: usize) -> (usize, bool) {
        let mut b = Body::new(len);
        let mut taken = 0;
        for part in data.chunks(split) {
            let n = b.feed(part).unwrap();
            taken += n;
            if n < part.len() {
                break;
            }
        }
        (taken, b.is_done())
    }

    #[test]
    fn a_chunked_body_ends_where_its_last_chunk_and_trailers_do() {
        let body =
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Sum: 1\r\n\r\n";
        let next = b"GET / HTTP/1.1\r\n\r\n";
        let all = [&body[..], &next[..]].concat();
        for split in [1, 2, 3, 7, 64, 1000] {
            assert_eq!(
                frame(BodyLen::Chunked, &all, split),
                (body.len(), true),
                "{split}"
            );
        }
        // Without trailers, and with bare LFs.
        let lf = b"3\nabc\n0\n\n";
        assert_eq!(frame(BodyLen::Chunked, lf, 1), (lf.len(), true));
        // Not yet ended.
        assert_eq!(frame(BodyLen::Chunked, b"3\r\nab", 1), (5, false));
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"3\r\nabcd\r\n",
            b"11111111111111111\r\n",
        ] {
            assert!(Body::new(BodyLen::Chunked).feed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_known_length_body_takes_its_bytes_only() {
        assert_eq!(frame(BodyLen::Known(5), b"helloGET", 3), (5, true));
        assert_eq!(frame(BodyLen::Known(5), b"hel", 1), (3, false));
        assert_eq!(frame(BodyLen::None, b"GET", 1), (0, true));
        let mut u = Body::new(BodyLen::UntilClose);
        assert_eq!(u.feed(b"everything").unwrap(), 10);
        assert!(!u.is_done());
    }

    #[test]
    fn heads_say_how_their_bodies_end() {
        let r = parse_request(
            b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.body, BodyLen::Known(12));
        assert!(r.expect_continue && r.json && !r.upgrade && !r.close);
        let r = parse_request(b"POST /u HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.body, BodyLen::Chunked);
        let r = parse_request(
            b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert!(r.upgrade);
        assert_eq!(r.body, BodyLen::None);
        assert!(
            parse_request(b"GET / HTTP/1.0\r\n\r\n")
                .unwrap()
                .unwrap()
                .close
        );
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\nHost").unwrap(), None);
        for bad in [
            &b"PUT / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"PUT / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"PUT / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"\x00garbage\r\n\r\n",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let a = parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", "GET")
            .unwrap()
            .unwrap();
        assert_eq!((a.status, a.body, a.close), (200, BodyLen::Known(3), false));
        let a = parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD")
            .unwrap()
            .unwrap();
        assert_eq!(a.body, BodyLen::None);
        let a = parse_answer(b"HTTP/1.1 100 Continue\r\n\r\n", "PUT")
            .unwrap()
            .unwrap();
        assert_eq!((a.status, a.body), (100, BodyLen::None));
        let a = parse_answer(b"HTTP/1.1 200 OK\r\n\r\n", "GET")
            .unwrap()
            .unwrap();
        assert_eq!((a.body, a.close), (BodyLen::UntilClose, true));
        let a = parse_answer(b"HTTP/1.1 204 No Content\r\n\r\n", "DELETE")
            .unwrap()
            .unwrap();
        assert_eq!((a.body, a.close), (BodyLen::None, false));
        let a = parse_answer(
            b"HTTP/1.1 207 Multi-Status\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            "PROPFIND",
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.body, a.close), (BodyLen::Chunked, true));
    }

    #[test]
    fn websocket_frames_are_counted_across_splits() {
        // A masked 5-byte text frame, an unmasked 300-byte binary frame (16-bit length), an
        // empty ping.
        let mut s = vec![0x81, 0x85, 1, 2, 3, 4, b'h', b'e', b'l', b'l', b'o'];
        s.extend([0x82, 126, 0x01, 0x2c]);
        s.extend(std::iter::repeat_n(7u8, 300));
        s.extend([0x89, 0x00]);
        for split in [1, 2, 5, 13, 400] {
            let mut w = WsFrames::default();
            for part in s.chunks(split) {
                w.feed(part);
            }
            assert_eq!(w.frames, 3, "{split}");
            assert_eq!((w.have, w.skip), (0, 0));
        }
    }
}

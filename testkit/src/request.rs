//! Reading one HTTP/1.1 request on a fake server's connection: the fakes of the hostile-target
//! tests answer requests by hand, so that they can answer badly.

use std::io::Read;

/// One request as a fake server read it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, as text (lossy UTF-8), up to the blank line.
    pub head: String,
    /// The method (`GET`), empty if the request line has none.
    pub method: String,
    /// The request target: the path with its query (`/v1/changes?since=3`), empty if the
    /// request line has none.
    pub target: String,
    /// The `content-length` body (empty without one).
    pub body: Vec<u8>,
}

impl Request {
    /// The target's path, without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// Reads one request from `s`, starting with the bytes `buf` already holds (what an earlier
/// call read past its request on a kept-alive connection): the request, and the bytes read
/// past its `content-length` body (the next request's start). `None` when the connection
/// ends, fails or times out first, or declares a length that is not a number.
pub fn read_request(s: &mut impl Read, mut buf: Vec<u8>) -> Option<(Request, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        fill(s, &mut buf)?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut len = 0;
    for l in head.lines() {
        if let Some((k, v)) = l.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse::<usize>().ok()?;
        }
    }
    while buf.len() < head_end + len {
        fill(s, &mut buf)?;
    }
    let rest = buf.split_off(head_end + len);
    let body = buf.split_off(head_end);
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or("").to_owned();
    let target = words.next().unwrap_or("").to_owned();
    let req = Request {
        head,
        method,
        target,
        body,
    };
    Some((req, rest))
}

fn fill(s: &mut impl Read, buf: &mut Vec<u8>) -> Option<()> {
    let mut b = [0u8; 4096];
    match s.read(&mut b) {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&b[..n]);
            Some(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_its_body_and_the_next_ones_start() {
        let wire = b"PUT /a?b=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzGET / HTTP/1.1\r\n";
        let (req, rest) = read_request(&mut &wire[..], Vec::new()).unwrap();
        assert_eq!(
            (req.method.as_str(), req.target.as_str()),
            ("PUT", "/a?b=1")
        );
        assert_eq!(req.path(), "/a");
        assert_eq!(req.body, b"xyz");
        assert_eq!(rest, b"GET / HTTP/1.1\r\n");
        // The rest starts the next request; the connection then ends before its head does.
        assert!(read_request(&mut &b""[..], rest).is_none());
    }

    #[test]
    fn a_connection_that_ends_inside_the_body_or_a_bad_length_is_none() {
        let short = b"POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\nabc";
        assert!(read_request(&mut &short[..], Vec::new()).is_none());
        let bad = b"POST / HTTP/1.1\r\ncontent-length: ten\r\n\r\n";
        assert!(read_request(&mut &bad[..], Vec::new()).is_none());
    }
}

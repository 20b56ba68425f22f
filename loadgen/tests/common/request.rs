//! Reading one HTTP/1.1 request on a fake server's connection (the fakes of the hostile-target
//! tests answer requests by hand, so that they can answer badly).

use std::io::Read;
use std::net::TcpStream;

/// Reads one request from `s`, starting with the bytes `buf` already holds: its head (as
/// text), and the bytes read past its `content-length` body (the next request's start).
/// `None` when the connection ends or fails first.
#[allow(dead_code)] // each test binary that has this module uses one of the two readers
pub fn read_request(s: &mut TcpStream, buf: Vec<u8>) -> Option<(String, Vec<u8>)> {
    read_request_body(s, buf).map(|(head, _, rest)| (head, rest))
}

/// [`read_request`], with the request's body: head, body, and the bytes read past it.
pub fn read_request_body(
    s: &mut TcpStream,
    mut buf: Vec<u8>,
) -> Option<(String, Vec<u8>, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        fill(s, &mut buf)?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        fill(s, &mut buf)?;
    }
    let rest = buf.split_off(head_end + len);
    let body = buf.split_off(head_end);
    Some((head, body, rest))
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut b = [0u8; 4096];
    match s.read(&mut b) {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&b[..n]);
            Some(())
        }
    }
}

//! Bounded line framing for a stdio transport: one JSON-RPC message per line, the line never
//! longer than a bound. A line over the bound is refused once the bound is passed, so a
//! server that writes a gigabyte without a newline costs at most the bound plus one read
//! buffer, never the gigabyte.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// How much one read asks for.
const READ_CHUNK: usize = 64 * 1024;

/// Why no line came.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// More than `max` bytes without a newline.
    #[error("wrote a line longer than {max} bytes")]
    TooLong { max: usize },
    #[error("reading its stdout: {0}")]
    Io(#[from] io::Error),
}

/// Reads newline-terminated lines of at most `max` bytes (the newline and a `\r` before it
/// not counted) from `r`.
pub struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    max: usize,
    /// Bytes read so far, lines and all.
    pub bytes: u64,
    /// When the first byte was read.
    pub first_byte: Option<std::time::Instant>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub fn new(r: R, max: usize) -> Lines<R> {
        Lines {
            r,
            buf: Vec::new(),
            max,
            bytes: 0,
            first_byte: None,
        }
    }

    /// The next line without its terminator; `Ok(None)` at the end of the stream. Bytes
    /// after the last newline at the end are returned as a last line.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        let mut scanned = 0;
        loop {
            if let Some(i) = self.buf[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i;
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > self.max {
                    return Err(LineError::TooLong { max: self.max });
                }
                return Ok(Some(line));
            }
            scanned = self.buf.len();
            if self.buf.len() > self.max + 1 {
                return Err(LineError::TooLong { max: self.max });
            }
            let old = self.buf.len();
            self.buf.resize(old + READ_CHUNK, 0);
            let n = match self.r.read(&mut self.buf[old..]).await {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(e.into());
                }
            };
            self.buf.truncate(old + n);
            if n > 0 && self.first_byte.is_none() {
                self.first_byte = Some(std::time::Instant::now());
            }
            self.bytes += n as u64;
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.buf);
                if line.len() > self.max {
                    return Err(LineError::TooLong { max: self.max });
                }
                return Ok(Some(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> (Vec<Vec<u8>>, Option<String>) {
        let mut l = Lines::new(input, max);
        let mut out = Vec::new();
        loop {
            match l.next().await {
                Ok(Some(line)) => out.push(line),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    #[tokio::test]
    async fn lines_split_on_newlines_and_drop_a_carriage_return() {
        let (lines, err) = all(b"{\"a\":1}\r\n{}\nlast", 16).await;
        assert_eq!(
            lines,
            vec![b"{\"a\":1}".to_vec(), b"{}".to_vec(), b"last".to_vec()]
        );
        assert_eq!(err, None);
    }

    #[tokio::test]
    async fn a_line_over_the_bound_is_refused_without_reading_it_all() {
        let long = vec![b'x'; 300_000];
        let mut l = Lines::new(&long[..], 1000);
        let e = l.next().await.unwrap_err().to_string();
        assert_eq!(e, "wrote a line longer than 1000 bytes");
        // One read past the bound at most.
        assert!(l.bytes <= (1000 + 2 * READ_CHUNK) as u64, "{}", l.bytes);
        let (lines, err) = all(b"12345\n123456\n", 5).await;
        assert_eq!(lines, vec![b"12345".to_vec()]);
        assert!(err.unwrap().contains("longer than 5"));
    }
}

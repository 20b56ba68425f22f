//! A bounded Server-Sent Events parser for the Streamable HTTP transport's answers: bytes in,
//! whole events out, as the HTML standard's event-stream interpretation reads them (lines end
//! in CRLF, LF or CR; `data` lines joined with LF; `event` and `id` kept; comments and `retry`
//! ignored; an event is dispatched at a blank line, and one with no data is dropped). A line
//! is never longer than `max_line` and an event's data never larger than `max_event`: past
//! either the stream is refused, so a server that sends a gigabyte without a line end costs
//! at most the bound plus one chunk.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event` field (`message` when none was given).
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: Vec<u8>,
    /// The `id` field, if the event had one.
    pub id: Option<String>,
}

/// Why the stream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("sent an SSE line longer than {max} bytes")]
    LineTooLong { max: usize },
    #[error("sent an SSE event larger than {max} bytes")]
    EventTooLarge { max: usize },
}

/// The parser's state between chunks.
#[derive(Debug)]
pub struct SseParser {
    max_line: usize,
    max_event: usize,
    line: Vec<u8>,
    /// The last chunk ended in CR: a LF starting the next one belongs to that line end.
    after_cr: bool,
    data: Vec<u8>,
    has_data: bool,
    event: String,
    id: Option<String>,
    /// Bytes fed so far.
    pub bytes: u64,
}

impl SseParser {
    pub fn new(max_line: usize, max_event: usize) -> SseParser {
        SseParser {
            max_line,
            max_event,
            line: Vec::new(),
            after_cr: false,
            data: Vec::new(),
            has_data: false,
            event: String::new(),
            id: None,
            bytes: 0,
        }
    }

    /// Feeds `chunk`; every event it completes is pushed to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        self.bytes += chunk.len() as u64;
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.extend_line(&chunk[..i])?;
                    let cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    if cr {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                    let line = std::mem::take(&mut self.line);
                    self.field(&line, out)?;
                }
                None => {
                    self.extend_line(chunk)?;
                    chunk = &[];
                }
            }
        }
        Ok(())
    }

    fn extend_line(&mut self, part: &[u8]) -> Result<(), SseError> {
        if self.line.len() + part.len() > self.max_line {
            return Err(SseError::LineTooLong { max: self.max_line });
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    /// One complete line.
    fn field(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > self.max_event {
                    return Err(SseError::EventTooLarge {
                        max: self.max_event,
                    });
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            // An id holding NUL is ignored, as the standard says.
            b"id" if !value.contains(&0) => {
                self.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        out.push(Event {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]], max_line: usize, max_event: usize) -> Result<Vec<Event>, SseError> {
        let mut p = SseParser::new(max_line, max_event);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn events_split_on_blank_lines_in_every_line_ending() {
        let whole: &[u8] =
            b": comment\nid: 1\ndata:\n\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nretry: 5\rdata: x\r\r";
        let want = vec![
            Event {
                event: "message".into(),
                data: b"".to_vec(),
                id: Some("1".into()),
            },
            Event {
                event: "message".into(),
                data: b"{\"a\":\n1}".to_vec(),
                id: Some("1".into()),
            },
            Event {
                event: "message".into(),
                data: b"x".to_vec(),
                id: Some("1".into()),
            },
        ];
        assert_eq!(parse(&[whole], 100, 100).unwrap(), want);
        // The same bytes one at a time give the same events (a CRLF split across chunks).
        let ones: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(parse(&ones, 100, 100).unwrap(), want);
        // An event without a closing blank line is not dispatched.
        assert_eq!(parse(&[b"data: x\n"], 100, 100).unwrap(), vec![]);
    }

    #[test]
    fn a_long_line_or_a_large_event_is_refused_at_its_bound() {
        let long = vec![b'x'; 1000];
        assert_eq!(
            parse(&[&long], 64, 1 << 20),
            Err(SseError::LineTooLong { max: 64 })
        );
        assert_eq!(
            parse(&[b"data: 12345\ndata: 12345\n\n"], 64, 10),
            Err(SseError::EventTooLarge { max: 10 })
        );
        assert_eq!(
            parse(&[b"data: 12345\ndata: 1234\n\n"], 64, 10).unwrap()[0].data,
            b"12345\n1234".to_vec()
        );
    }
}

//! Reading a server's XML answer as a stream, whatever the protocol: a multistatus or
//! S3's listings are grammars ([`Grammar`]) over the events of `quick-xml`'s
//! namespace-resolving pull parser, driven here over a body held in memory ([`parse_each`])
//! or over an HTTP body frame by frame ([`read_each`]).
//!
//! What this module holds at once is bounded by design: the current body frame, one XML token
//! (at most [`MAX_TOKEN_BYTES`]), and what the grammar keeps. A DTD is refused (an answer
//! cannot define entities, so it cannot expand them without bound), and so is any entity but
//! XML's five and character references ([`resolve_ref`]).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use quick_xml::NsReader;
use quick_xml::events::{BytesRef, Event};
use quick_xml::name::ResolveResult;

/// Longest single XML token (a tag with its attributes, a run of text, a comment) read. A
/// real answer's longest token is one field's text (an href, a key); a server that
/// sends one unbroken token of hundreds of MB is refused when it passes this, before it is
/// held.
pub const MAX_TOKEN_BYTES: u64 = 1024 * 1024;

/// What a grammar made of one event.
pub(crate) enum Step<T> {
    More,
    Item(T),
    Done,
}

/// One answer's grammar: its elements in order, an item handed on as soon as it is whole.
pub(crate) trait Grammar {
    type Item;
    /// One event; an `Err` is why the answer is refused (one line).
    fn event(&mut self, ns: &ResolveResult, ev: Event) -> Result<Step<Self::Item>, String>;
}

/// Why a read stopped.
#[derive(Debug)]
pub(crate) enum Stop<E> {
    /// The body could not be read (the connection failed mid-answer): a transport failure.
    Read(String),
    /// The body passed the size cap (the detail names it).
    TooLarge(String),
    /// The answer was malformed (the grammar's reason, or the XML's).
    Bad(String),
    /// The caller's visitor refused an item.
    Visit(E),
}

/// Parses an answer held in memory with `g`, handing each item to `visit`.
pub(crate) fn parse_each<G: Grammar, E>(
    body: &[u8],
    g: &mut G,
    visit: &mut dyn FnMut(G::Item) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let mut reader = NsReader::from_reader(Counted::new(body));
    let mut buf = Vec::new();
    loop {
        buf.clear();
        reader.get_mut().mark();
        let (ns, ev) = reader
            .read_resolved_event_into(&mut buf)
            .map_err(|e| Stop::Bad(xml_error(&e)))?;
        match g.event(&ns, ev).map_err(Stop::Bad)? {
            Step::More => {}
            Step::Item(i) => visit(i).map_err(Stop::Visit)?,
            Step::Done => return Ok(()),
        }
    }
}

/// Reads an answer's body frame by frame, at most `cap` bytes of it (`cap_name` names the cap
/// in messages), with `g`, handing each item to `visit` as soon as it is whole. Returns the
/// body bytes read.
pub(crate) async fn read_each<B, G: Grammar, E>(
    body: B,
    cap: u64,
    cap_name: &'static str,
    g: &mut G,
    visit: &mut (dyn FnMut(G::Item) -> Result<(), E> + Send),
) -> Result<u64, Stop<E>>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut reader = NsReader::from_reader(BodyReader {
        body,
        frame: Bytes::new(),
        cap,
        cap_name,
        count: Counter::default(),
        failure: None,
        done: false,
    });
    let mut buf = Vec::new();
    loop {
        buf.clear();
        reader.get_mut().count.mark();
        let res = reader.read_resolved_event_into_async(&mut buf).await;
        let (ns, ev) = match res {
            Ok(x) => x,
            Err(e) => {
                // A failure of the body itself (or the cap) is the reader's, not the XML's.
                return Err(match reader.get_mut().failure.take() {
                    Some(Failure::Read(d)) => Stop::Read(d),
                    Some(Failure::TooLarge(d)) => Stop::TooLarge(d),
                    Some(Failure::Token(d)) => Stop::Bad(d),
                    None => Stop::Bad(xml_error(&e)),
                });
            }
        };
        match g.event(&ns, ev).map_err(Stop::Bad)? {
            Step::More => {}
            Step::Item(i) => visit(i).map_err(Stop::Visit)?,
            Step::Done => return Ok(reader.get_ref().count.total),
        }
    }
}

/// The character an entity reference stands for: a character reference, or one of XML's
/// five; any other entity is refused (an answer has no DTD to define it).
pub(crate) fn resolve_ref(r: &BytesRef) -> Result<char, String> {
    match r.resolve_char_ref() {
        Ok(Some(c)) => Ok(c),
        Ok(None) => match r.as_ref() {
            "amp" => Ok('&'),
            "lt" => Ok('<'),
            "gt" => Ok('>'),
            "apos" => Ok('\''),
            "quot" => Ok('"'),
            other => Err(format!("undefined entity &{};", clip(other, 40))),
        },
        Err(_) => Err(format!("bad character reference &{};", clip(r, 40))),
    }
}

/// The refusal of a document type declaration, for every grammar.
pub(crate) const DTD_REFUSED: &str = "has a DTD (refused: an answer may not define entities)";

/// Bytes consumed in total, and since the current token began.
#[derive(Default)]
struct Counter {
    total: u64,
    at_mark: u64,
}

impl Counter {
    fn mark(&mut self) {
        self.at_mark = self.total;
    }

    /// An error when the current token has passed [`MAX_TOKEN_BYTES`].
    fn check(&self) -> Result<(), String> {
        if self.total.saturating_sub(self.at_mark) > MAX_TOKEN_BYTES {
            return Err(format!(
                "one XML token is over {MAX_TOKEN_BYTES} bytes (MAX_TOKEN_BYTES)"
            ));
        }
        Ok(())
    }
}

/// A `BufRead` over a slice that refuses a token over [`MAX_TOKEN_BYTES`] (the in-memory
/// parse applies the same bounds as the streamed one).
struct Counted<'a> {
    rest: &'a [u8],
    count: Counter,
}

impl<'a> Counted<'a> {
    fn new(rest: &'a [u8]) -> Counted<'a> {
        Counted {
            rest,
            count: Counter::default(),
        }
    }

    fn mark(&mut self) {
        self.count.mark();
    }
}

impl std::io::Read for Counted<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = std::io::BufRead::fill_buf(self)?.len().min(out.len());
        out[..n].copy_from_slice(&self.rest[..n]);
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for Counted<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.count.check().map_err(std::io::Error::other)?;
        // Hand out at most 64 KiB at a time, so a long token is noticed near the bound.
        Ok(&self.rest[..self.rest.len().min(64 * 1024)])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.rest.len());
        self.rest = &self.rest[amt..];
        self.count.total = self.count.total.saturating_add(amt as u64);
    }
}

/// A tokio `AsyncBufRead` over an HTTP body's data frames: holds one frame at a time, stops
/// at `cap` bytes and at a token over [`MAX_TOKEN_BYTES`]. Why it stopped is kept in
/// `failure`, since the XML reader only passes an `io::Error` on.
struct BodyReader<B> {
    body: B,
    frame: Bytes,
    cap: u64,
    cap_name: &'static str,
    count: Counter,
    failure: Option<Failure>,
    done: bool,
}

/// Why a [`BodyReader`] stopped.
enum Failure {
    Read(String),
    TooLarge(String),
    Token(String),
}

impl<B> tokio::io::AsyncRead for BodyReader<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let data = ready!(tokio::io::AsyncBufRead::poll_fill_buf(self.as_mut(), cx))?;
        let n = data.len().min(out.remaining());
        out.put_slice(&data[..n]);
        tokio::io::AsyncBufRead::consume(self, n);
        Poll::Ready(Ok(()))
    }
}

impl<B> tokio::io::AsyncBufRead for BodyReader<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        if let Err(e) = this.count.check() {
            this.failure = Some(Failure::Token(e.clone()));
            return Poll::Ready(Err(std::io::Error::other(e)));
        }
        while this.frame.is_empty() && !this.done {
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                None => this.done = true,
                Some(Err(e)) => {
                    let detail = format!("reading the answer: {e}");
                    this.failure = Some(Failure::Read(detail.clone()));
                    return Poll::Ready(Err(std::io::Error::other(detail)));
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers
                    };
                    let seen = this.count.total.saturating_add(data.len() as u64);
                    if seen > this.cap {
                        let detail = format!(
                            "the answer's body passed the {} cap ({})",
                            crate::http::fmt_bytes(this.cap),
                            this.cap_name
                        );
                        this.failure = Some(Failure::TooLarge(detail.clone()));
                        return Poll::Ready(Err(std::io::Error::other(detail)));
                    }
                    this.frame = data;
                }
            }
        }
        Poll::Ready(Ok(&this.frame[..]))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        let amt = amt.min(this.frame.len());
        this.frame.advance(amt);
        this.count.total = this.count.total.saturating_add(amt as u64);
    }
}

/// quick-xml's error on one line, without its byte position when it has none to say.
pub(crate) fn xml_error(e: &quick_xml::Error) -> String {
    let s = e.to_string().replace(['\n', '\r'], " ");
    format!("not well-formed XML: {}", clip(&s, 200))
}

/// `s` on one line, escaped, and at most `max` bytes of it with the count left out
/// ([`contract::quote::text_within`]): a server's text in a message must not make the
/// message long, nor reach the terminal as control characters.
pub fn clip(s: &str, max: usize) -> String {
    contract::quote::text_within(s, max)
}

/// A server's string (an href, a key, a path) for a message: quoted, escaped, at most `max`
/// bytes of it ([`contract::quote::quote_within`]).
pub(crate) fn quoted(s: &str, max: usize) -> String {
    contract::quote::quote_within(s, max)
}

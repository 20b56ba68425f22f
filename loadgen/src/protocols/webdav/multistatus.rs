//! PROPFIND answers: a `207 Multi-Status` body (RFC 4918 §13, §14.16) read as a stream, one
//! [`DavEntry`] per `<response>` handed to the caller as soon as its end tag is read.
//!
//! The XML is read with `quick-xml`'s namespace-resolving pull parser, never as a tree: a
//! roxmltree DOM of a 250 MB answer of empty elements was 18× the body, and even a well-formed
//! 2,000,000-entry listing was 1.4 GB. What this module holds at once is bounded by design:
//! the current body frame, one XML token (at most [`MAX_TOKEN_BYTES`]), the open elements (at
//! most [`MAX_NESTING`]), the text of one field (at most [`MAX_TEXT_BYTES`]) and the entry
//! being built — about 2 MiB whatever the answer's size; what the caller keeps of the entries
//! is the caller's (the walk bounds it, `ops::WalkBounds`).
//!
//! Namespaces are resolved, not spelled: servers write the `DAV:` prefix differently (`D:`
//! from Apache, nginx and rclone, `d:`, `lp1:`, or a default namespace elsewhere), and only the
//! namespace decides. A DTD is refused (an answer cannot define entities, so it cannot expand
//! them without bound), and so is any entity but XML's five and character references.
//!
//! Hrefs are percent-decoded to bytes and then read as UTF-8, nothing more: an NFD name stays
//! NFD, so two names that differ only in normalisation stay two entries (a sync client that
//! normalised would merge them).

use std::borrow::Cow;

use bytes::Bytes;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

use super::error::DavError;
pub use crate::xml::MAX_TOKEN_BYTES;
use crate::xml::{self, Grammar, Step, Stop};
pub(crate) use crate::xml::{clip, quoted};

const DAV: &str = "DAV:";

/// Deepest element nesting read. A multistatus is six levels deep
/// (`multistatus/response/propstat/prop/resourcetype/collection`) and the deepest live
/// property RFC 4918 defines (`lockdiscovery/activelock/owner/href`) about nine; 64 leaves
/// room for any dead property a client stored, and stops a server's endless nesting before
/// the parser's stack of open names grows with it.
pub const MAX_NESTING: usize = 64;
/// Longest text kept for one field (an href, a status line, a length, an ETag, a date). The
/// longest vault path a pull can write is 4,096 bytes (`PATH_MAX`), at most 12 KiB once
/// percent-encoded; 64 KiB leaves room for a long server prefix.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// One resource in a multistatus answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavEntry {
    /// The `<href>` as the server sent it (after XML unescaping).
    pub href: String,
    /// The href's path, percent-decoded (scheme and authority removed if the server sent an
    /// absolute URL). Collections keep the trailing `/` if the server sent one.
    pub path: String,
    pub is_collection: bool,
    /// `getcontentlength`, when the server sent it (servers omit it for collections).
    pub size: Option<u64>,
    /// `getetag`, quotes kept.
    pub etag: Option<String>,
    /// `getlastmodified` (an HTTP date), as sent.
    pub last_modified: Option<String>,
    /// The status the properties came with (200), or the response's own status when it
    /// carried no properties.
    pub status: u16,
}

impl DavEntry {
    /// The path without a trailing slash (except for the root, `/`).
    pub fn path_trimmed(&self) -> &str {
        match self.path.strip_suffix('/') {
            Some("") | None => &self.path,
            Some(p) => p,
        }
    }
}

/// Parses a whole `207 Multi-Status` body held in memory. `what` names the request in
/// errors.
pub fn parse_multistatus(body: &[u8], what: &str) -> Result<Vec<DavEntry>, DavError> {
    let mut out = Vec::new();
    parse_multistatus_each(body, what, &mut |e| {
        out.push(e);
        Ok(())
    })?;
    Ok(out)
}

/// Parses a `207 Multi-Status` body held in memory, handing each entry to `visit` as it is
/// read (an error from `visit` stops the parse and is returned). Returns the entries read.
pub fn parse_multistatus_each(
    body: &[u8],
    what: &str,
    visit: &mut dyn FnMut(DavEntry) -> Result<(), DavError>,
) -> Result<u64, DavError> {
    let mut machine = Machine::default();
    xml::parse_each(body, &mut machine, &mut |e: Box<DavEntry>| visit(*e)).map_err(
        |s| match s {
            Stop::Visit(e) => e,
            Stop::Bad(reason) | Stop::Read(reason) | Stop::TooLarge(reason) => {
                DavError::BadMultistatus {
                    what: what.to_owned(),
                    reason,
                }
            }
        },
    )?;
    Ok(machine.entries)
}

/// Reads a `207 Multi-Status` answer's body frame by frame, at most `cap` bytes of it, handing
/// each entry to `visit` as its `</response>` arrives. Returns the body bytes read and the
/// entries read.
pub(crate) async fn read_multistatus<B>(
    body: B,
    cap: u64,
    what: &str,
    visit: &mut (dyn FnMut(DavEntry) -> Result<(), DavError> + Send),
) -> Result<(u64, u64), StreamError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut machine = Machine::default();
    let n = xml::read_each(
        body,
        cap,
        "MAX_ANSWER_BYTES",
        &mut machine,
        &mut |e: Box<DavEntry>| visit(*e),
    )
    .await
    .map_err(|s| match s {
        Stop::Read(d) => StreamError::Read(d),
        Stop::TooLarge(d) => StreamError::TooLarge(d),
        Stop::Bad(reason) => StreamError::Answer(DavError::BadMultistatus {
            what: what.to_owned(),
            reason,
        }),
        Stop::Visit(e) => StreamError::Answer(e),
    })?;
    Ok((n, machine.entries))
}

/// Why a streamed multistatus stopped.
#[derive(Debug)]
pub(crate) enum StreamError {
    /// The body could not be read (the connection failed mid-answer): a transport failure.
    Read(String),
    /// The body passed the size cap (the detail names it).
    TooLarge(String),
    /// The answer was malformed, or the caller's visitor refused an entry.
    Answer(DavError),
}

/// What one element is, by its place in the answer (only the `DAV:` names matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Multistatus,
    Response,
    Href,
    /// A `<status>` of a `<response>` (one without propstats).
    RespStatus,
    Propstat,
    PsStatus,
    Prop,
    ResourceType,
    Collection,
    ContentLength,
    Etag,
    LastModified,
    /// Anything else (other namespaces, other properties, `responsedescription`).
    Other,
}

impl Tag {
    /// Whether the element's text is kept.
    fn keeps_text(self) -> bool {
        matches!(
            self,
            Tag::Href
                | Tag::RespStatus
                | Tag::PsStatus
                | Tag::ContentLength
                | Tag::Etag
                | Tag::LastModified
        )
    }

    fn name(self) -> &'static str {
        match self {
            Tag::Href => "href",
            Tag::RespStatus | Tag::PsStatus => "status",
            Tag::ContentLength => "getcontentlength",
            Tag::Etag => "getetag",
            Tag::LastModified => "getlastmodified",
            _ => "element",
        }
    }
}

/// The properties of one `<propstat>`, kept until its status is known (it may come last).
#[derive(Default)]
struct Props {
    status: Option<u16>,
    is_collection: bool,
    size: Option<u64>,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// The `<response>` being read.
#[derive(Default)]
struct Resp {
    href: Option<String>,
    own_status: Option<u16>,
    status: u16,
    ok_props: bool,
    is_collection: bool,
    size: Option<u64>,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// The multistatus grammar over the reader's events: a stack of the open elements' roles,
/// the text of the field being read, the response and propstat being built.
#[derive(Default)]
struct Machine {
    stack: Vec<Tag>,
    text: String,
    resp: Option<Resp>,
    props: Option<Props>,
    root_seen: bool,
    root_closed: bool,
    entries: u64,
}

impl Grammar for Machine {
    type Item = Box<DavEntry>;

    fn event(&mut self, ns: &ResolveResult, ev: Event) -> Result<Step<Box<DavEntry>>, String> {
        let dav = matches!(ns, ResolveResult::Bound(n) if n.as_ref() == DAV);
        match ev {
            Event::Start(e) => {
                let local = e.local_name();
                self.open(dav, local.as_ref())?;
            }
            Event::Empty(e) => {
                let local = e.local_name();
                self.open(dav, local.as_ref())?;
                return self.close();
            }
            Event::End(_) => return self.close(),
            Event::Text(t) => self.push_text(&t.xml10_content())?,
            Event::CData(t) => self.push_text(&t.xml10_content())?,
            Event::GeneralRef(r) => {
                let c = xml::resolve_ref(&r)?;
                self.push_text(c.encode_utf8(&mut [0; 4]))?;
            }
            Event::DocType(_) => return Err(xml::DTD_REFUSED.into()),
            Event::Eof => {
                return match self.stack.last() {
                    None if self.root_closed => Ok(Step::Done),
                    Some(_) => Err("truncated: the body ended inside the root element".into()),
                    None => Err("no root element".into()),
                };
            }
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
        }
        Ok(Step::More)
    }
}

impl Machine {
    fn open(&mut self, dav: bool, local: &str) -> Result<(), String> {
        if self.stack.len() >= MAX_NESTING {
            return Err(format!(
                "elements nested deeper than {MAX_NESTING} (MAX_NESTING)"
            ));
        }
        let tag = match self.stack.last() {
            None if self.root_seen => return Err("a second root element".into()),
            None if dav && local == "multistatus" => {
                self.root_seen = true;
                Tag::Multistatus
            }
            None => {
                return Err(format!(
                    "root element is <{}>, not DAV: multistatus",
                    clip(local, 60)
                ));
            }
            Some(Tag::Multistatus) if dav && local == "response" => {
                self.resp = Some(Resp::default());
                Tag::Response
            }
            Some(Tag::Response) if dav => match local {
                "href" if self.resp.as_ref().is_some_and(|r| r.href.is_none()) => Tag::Href,
                "propstat" => {
                    self.props = Some(Props::default());
                    Tag::Propstat
                }
                "status" => Tag::RespStatus,
                _ => Tag::Other,
            },
            Some(Tag::Propstat) if dav && local == "prop" => Tag::Prop,
            Some(Tag::Propstat) if dav && local == "status" => Tag::PsStatus,
            Some(Tag::Prop) if dav => match local {
                "resourcetype" => Tag::ResourceType,
                "getcontentlength" => Tag::ContentLength,
                "getetag" => Tag::Etag,
                "getlastmodified" => Tag::LastModified,
                _ => Tag::Other,
            },
            Some(Tag::ResourceType) if dav && local == "collection" => Tag::Collection,
            _ => Tag::Other,
        };
        if tag.keeps_text() {
            self.text.clear();
        }
        self.stack.push(tag);
        Ok(())
    }

    fn push_text(&mut self, s: &str) -> Result<(), String> {
        let Some(&tag) = self.stack.last() else {
            return Ok(());
        };
        if !tag.keeps_text() {
            return Ok(());
        }
        if self.text.len().saturating_add(s.len()) > MAX_TEXT_BYTES {
            return Err(format!(
                "a <{}> over {MAX_TEXT_BYTES} bytes (MAX_TEXT_BYTES)",
                tag.name()
            ));
        }
        self.text.push_str(s);
        Ok(())
    }

    fn close(&mut self) -> Result<Step<Box<DavEntry>>, String> {
        let Some(tag) = self.stack.pop() else {
            return Err("an end tag without a start".into());
        };
        let text = || self.text.trim().to_owned();
        match tag {
            Tag::Multistatus => self.root_closed = true,
            Tag::Href => {
                let t = text();
                if let Some(r) = self.resp.as_mut() {
                    r.href = Some(t);
                }
            }
            Tag::RespStatus => {
                let s = parse_status_line(&text())?;
                if let Some(r) = self.resp.as_mut() {
                    r.own_status = Some(s);
                }
            }
            Tag::PsStatus => {
                let s = parse_status_line(&text())?;
                if let Some(p) = self.props.as_mut() {
                    p.status = Some(s);
                }
            }
            Tag::Collection => {
                if let Some(p) = self.props.as_mut() {
                    p.is_collection = true;
                }
            }
            Tag::ContentLength => {
                let t = text();
                if !t.is_empty() {
                    let n = t.parse::<u64>().map_err(|_| {
                        format!(
                            "bad getcontentlength {:?} for {}",
                            clip(&t, 40),
                            self.href_for_errors()
                        )
                    })?;
                    if let Some(p) = self.props.as_mut() {
                        p.size = Some(n);
                    }
                }
            }
            Tag::Etag => {
                let t = text();
                if let Some(p) = self.props.as_mut() {
                    p.etag = Some(t).filter(|t| !t.is_empty());
                }
            }
            Tag::LastModified => {
                let t = text();
                if let Some(p) = self.props.as_mut() {
                    p.last_modified = Some(t).filter(|t| !t.is_empty());
                }
            }
            Tag::Propstat => {
                if let (Some(p), Some(r)) = (self.props.take(), self.resp.as_mut()) {
                    let status = p.status.unwrap_or(200);
                    if (200..300).contains(&status) {
                        r.ok_props = true;
                        r.status = status;
                        r.is_collection = p.is_collection;
                        r.size = p.size.or(r.size);
                        r.etag = p.etag.or(r.etag.take());
                        r.last_modified = p.last_modified.or(r.last_modified.take());
                    } else if r.status == 0 {
                        r.status = status;
                    }
                }
            }
            Tag::Response => {
                let r = self.resp.take().unwrap_or_default();
                let entry = finish(r)?;
                self.entries = self.entries.saturating_add(1);
                return Ok(Step::Item(Box::new(entry)));
            }
            Tag::Prop | Tag::ResourceType | Tag::Other => {}
        }
        Ok(Step::More)
    }

    fn href_for_errors(&self) -> String {
        self.resp
            .as_ref()
            .and_then(|r| r.href.as_deref())
            .map_or_else(|| "(no href yet)".to_owned(), |h| clip(h, 120))
    }
}

fn finish(r: Resp) -> Result<DavEntry, String> {
    let href = r.href.ok_or("a <response> without an <href>")?;
    let path = decode_href(&href)?;
    let mut status = r.status;
    if !r.ok_props
        && let Some(s) = r.own_status
    {
        status = s;
    }
    if status == 0 {
        return Err(format!("no status for {}", clip(&href, 120)));
    }
    Ok(DavEntry {
        href,
        path,
        is_collection: r.is_collection,
        size: r.size,
        etag: r.etag,
        last_modified: r.last_modified,
        status,
    })
}

/// `HTTP/1.1 200 OK` → 200.
fn parse_status_line(line: &str) -> Result<u16, String> {
    line.split_ascii_whitespace()
        .nth(1)
        // Three digits, the first 1 to 5 (RFC 9110 §15): `020` and `+20` are not statuses.
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|c| c.parse().ok())
        .filter(|s: &u16| (100..=599).contains(s))
        .ok_or_else(|| format!("bad status line {}", quoted(line, 80)))
}

/// The path of an href: scheme and authority dropped, query and fragment refused,
/// percent-decoded, read as UTF-8 without normalising.
pub fn decode_href(href: &str) -> Result<String, String> {
    let path = match href.find("://") {
        Some(i) if href[..i].bytes().all(|b| b.is_ascii_alphabetic()) => {
            let after = &href[i + 3..];
            &after[after.find('/').unwrap_or(after.len())..]
        }
        _ => href,
    };
    if !path.starts_with('/') {
        return Err(format!(
            "href {} is not an absolute path",
            quoted(href, 120)
        ));
    }
    if path.contains(['?', '#']) {
        return Err(format!(
            "href {} has a query or fragment",
            quoted(href, 120)
        ));
    }
    let bytes: Cow<[u8]> = percent_encoding::percent_decode_str(path).into();
    String::from_utf8(bytes.into_owned())
        .map_err(|_| format!("href {} does not decode to UTF-8", quoted(href, 120)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_decode_to_bytes_without_normalising() {
        assert_eq!(decode_href("/a%20b/c.md").unwrap(), "/a b/c.md");
        assert_eq!(
            decode_href("http://127.0.0.1:8080/W/Caf%C3%A9.md").unwrap(),
            "/W/Caf\u{e9}.md"
        );
        // NFD: e + combining acute stays two code points.
        assert_eq!(
            decode_href("/W/Cafe%CC%81.md").unwrap(),
            "/W/Cafe\u{301}.md"
        );
        // Raw UTF-8 in an href (some servers send it unescaped) is kept too.
        assert_eq!(decode_href("/📚 x/").unwrap(), "/📚 x/");
        assert_eq!(decode_href("/100%25.md").unwrap(), "/100%.md");
        assert!(decode_href("relative/x").is_err());
        assert!(decode_href("/x%FF").is_err());
        assert!(decode_href("/x?y=1").is_err());
    }

    #[test]
    fn minimal_answers_and_namespaces() {
        let xml = br#"<?xml version="1.0"?>
            <multistatus xmlns="DAV:" xmlns:x="urn:x">
              <response><href>/d/</href>
                <propstat><prop><resourcetype><collection/></resourcetype></prop>
                  <status>HTTP/1.1 200 OK</status></propstat>
                <propstat><prop><getcontentlength/></prop>
                  <status>HTTP/1.1 404 Not Found</status></propstat>
              </response>
              <response><href>/d/f%20&amp;.md</href>
                <propstat><prop><resourcetype/><getcontentlength> 12 </getcontentlength>
                  <x:getcontentlength>99</x:getcontentlength>
                  <getetag>"e1"</getetag></prop>
                  <status>HTTP/1.1 200 OK</status></propstat>
              </response>
              <response><href>/d/gone</href><status>HTTP/1.1 404 Not Found</status></response>
            </multistatus>"#;
        let e = parse_multistatus(xml, "t").unwrap();
        assert_eq!(e.len(), 3);
        assert!(e[0].is_collection);
        assert_eq!((e[0].size, e[0].status), (None, 200));
        assert_eq!(e[0].path_trimmed(), "/d");
        assert_eq!(e[1].path, "/d/f &.md");
        assert_eq!(e[1].size, Some(12), "the DAV: one, not urn:x's");
        assert_eq!(e[1].etag.as_deref(), Some("\"e1\""));
        assert!(!e[1].is_collection);
        assert_eq!(e[2].status, 404);
    }

    #[test]
    fn any_prefix_and_redeclared_namespaces_resolve() {
        // `lp1:` for DAV:, a `D:` that is not DAV:, and DAV: as a default namespace inside.
        let xml = br#"<lp1:multistatus xmlns:lp1="DAV:" xmlns:D="urn:not-dav">
              <lp1:response><lp1:href>/a&#x20;b</lp1:href>
                <lp1:propstat><lp1:prop>
                  <D:getcontentlength>7</D:getcontentlength>
                  <getcontentlength xmlns="DAV:">5</getcontentlength>
                  <lp1:resourcetype><D:collection/></lp1:resourcetype>
                </lp1:prop></lp1:propstat>
              </lp1:response>
              <D:response><D:href>/not-dav</D:href></D:response>
            </lp1:multistatus>"#;
        let e = parse_multistatus(xml, "t").unwrap();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path, "/a b");
        assert_eq!(e[0].size, Some(5));
        assert!(
            !e[0].is_collection,
            "urn:not-dav's collection is not DAV:'s"
        );
        assert_eq!(e[0].status, 200);
    }

    #[test]
    fn malformed_answers_are_errors_naming_the_request() {
        let deep = format!(
            "<D:multistatus xmlns:D=\"DAV:\">{}",
            "<D:x>".repeat(MAX_NESTING + 1)
        );
        let long = format!(
            "<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/{}</D:href></D:response></D:multistatus>",
            "a".repeat(MAX_TEXT_BYTES)
        );
        let token = format!(
            "<D:multistatus xmlns:D=\"DAV:\"><!--{}-->",
            "a".repeat(MAX_TOKEN_BYTES as usize + 10)
        );
        for (body, want) in [
            (&b"<html/>"[..], "not DAV: multistatus"),
            (b"<D:multistatus xmlns:D=\"DAV:\"><D:response>", "truncated"),
            (b"<D:multistatus xmlns:D=\"DAV:\"></D:x>", "not well-formed"),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:status>HTTP/1.1 200 OK</D:status></D:response></D:multistatus>",
                "without an <href>",
            ),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/a</D:href><D:propstat><D:prop><D:getcontentlength>x</D:getcontentlength></D:prop></D:propstat></D:response></D:multistatus>",
                "bad getcontentlength",
            ),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/a</D:href><D:propstat><D:prop><D:getcontentlength>99999999999999999999999</D:getcontentlength></D:prop></D:propstat></D:response></D:multistatus>",
                "bad getcontentlength",
            ),
            (b"\xff\xfe", "not well-formed"),
            (
                b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><D:multistatus xmlns:D=\"DAV:\"/>",
                "DTD",
            ),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>&a;</D:href></D:response></D:multistatus>",
                "undefined entity",
            ),
            (b"<D:multistatus xmlns:D=\"DAV:\"/><D:multistatus xmlns:D=\"DAV:\"/>", "second root"),
            (deep.as_bytes(), "MAX_NESTING"),
            (long.as_bytes(), "MAX_TEXT_BYTES"),
            (token.as_bytes(), "MAX_TOKEN_BYTES"),
            (b"", "no root element"),
        ] {
            let e = parse_multistatus(body, "PROPFIND /x").unwrap_err().to_string();
            assert!(e.starts_with("PROPFIND /x: "), "{e}");
            assert!(e.contains(want), "{e} lacks {want}");
            assert!(!e.contains('\n') && e.len() < 400, "one short line: {e}");
        }
    }

    /// Found by `scripts/fuzz.sh` (multistatus): a status line `HTTP/1.1 020` was read as 20.
    #[test]
    fn status_lines_need_three_digits_of_a_real_class() {
        assert_eq!(parse_status_line("HTTP/1.1 207 Multi-Status"), Ok(207));
        for bad in [
            "HTTP/1.1 020",
            "HTTP/1.1 +20",
            "HTTP/1.1 999",
            "HTTP/1.1 2x7",
            "HTTP/1.1",
        ] {
            assert!(parse_status_line(bad).is_err(), "{bad}");
        }
    }
}

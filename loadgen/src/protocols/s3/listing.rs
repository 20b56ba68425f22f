//! ListObjectsV2 answers (`<ListBucketResult>`) read as a stream: each `<Contents>` handed to
//! the caller as an [`Object`] as soon as its end tag is read, and the page's own fields
//! (`IsTruncated`, `NextContinuationToken`, `KeyCount`) kept for the end, since servers put
//! them before the objects (AWS) or after them. The XML goes through the shared streamed
//! reader (`crate::xml`): one token, one field's text and the object being built are held
//! at once, a DTD and any entity but XML's own are refused. Element names are matched by
//! their local name: the answer's namespace (`http://s3.amazonaws.com/doc/2006-03-01/`) is
//! optional in practice (s3rver omits it).

use bytes::Bytes;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

use crate::xml::{self, Grammar, Step, Stop, clip, quoted};

/// Deepest element nesting read: a listing is three levels deep
/// (`ListBucketResult/Contents/Owner/ID` is the deepest); 16 stops a server's endless
/// nesting long before the parser's stack of open names grows with it.
pub const MAX_NESTING: usize = 16;
/// Longest text kept for one field. An S3 key is at most 1,024 bytes of UTF-8 (S3's own
/// limit), six times that once every byte is an XML character reference; a continuation
/// token is opaque but servers keep it under 1 KiB. 8 KiB leaves room for both.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The key as listed (XML unescaped), never normalised.
    pub key: String,
    pub size: u64,
    /// `ETag`, quotes kept.
    pub etag: Option<String>,
    /// `LastModified` as sent (ISO 8601).
    pub last_modified: Option<String>,
}

/// A page's own fields, known once the answer has been read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageEnd {
    pub is_truncated: bool,
    pub next_token: Option<String>,
    /// `KeyCount`, when the server sent it.
    pub key_count: Option<u64>,
    /// Objects handed on.
    pub objects: u64,
}

/// Parses a whole ListObjectsV2 answer held in memory, handing each object to `visit`.
/// `what` names the request in errors.
pub fn parse_listing_each(
    body: &[u8],
    what: &str,
    visit: &mut dyn FnMut(Object) -> Result<(), String>,
) -> Result<PageEnd, String> {
    let mut g = Listing::default();
    xml::parse_each(body, &mut g, visit).map_err(|s| match s {
        Stop::Visit(e) | Stop::Bad(e) | Stop::Read(e) | Stop::TooLarge(e) => {
            format!("{what}: {e}")
        }
    })?;
    Ok(g.end)
}

/// Reads a ListObjectsV2 answer's body frame by frame, at most `cap` bytes of it. Returns the
/// body bytes read and the page's fields.
pub(crate) async fn read_listing<B>(
    body: B,
    cap: u64,
    visit: &mut (dyn FnMut(Object) -> Result<(), String> + Send),
) -> Result<(u64, PageEnd), Stop<String>>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut g = Listing::default();
    let n = xml::read_each(body, cap, "MAX_ANSWER_BYTES", &mut g, visit).await?;
    Ok((n, g.end))
}

/// What one element is, by its place in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Root,
    Truncated,
    NextToken,
    KeyCount,
    Contents,
    Key,
    Size,
    Etag,
    LastModified,
    Other,
}

impl Tag {
    fn keeps_text(self) -> bool {
        !matches!(self, Tag::Root | Tag::Contents | Tag::Other)
    }

    fn name(self) -> &'static str {
        match self {
            Tag::Truncated => "IsTruncated",
            Tag::NextToken => "NextContinuationToken",
            Tag::KeyCount => "KeyCount",
            Tag::Key => "Key",
            Tag::Size => "Size",
            Tag::Etag => "ETag",
            Tag::LastModified => "LastModified",
            _ => "element",
        }
    }
}

#[derive(Default)]
struct Building {
    key: Option<String>,
    size: Option<u64>,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// The `ListBucketResult` grammar.
#[derive(Default)]
struct Listing {
    stack: Vec<Tag>,
    text: String,
    obj: Option<Building>,
    root_seen: bool,
    root_closed: bool,
    end: PageEnd,
}

impl Grammar for Listing {
    type Item = Object;

    fn event(&mut self, _ns: &ResolveResult, ev: Event) -> Result<Step<Object>, String> {
        match ev {
            Event::Start(e) => self.open(e.local_name().as_ref())?,
            Event::Empty(e) => {
                self.open(e.local_name().as_ref())?;
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

impl Listing {
    fn open(&mut self, local: &str) -> Result<(), String> {
        if self.stack.len() >= MAX_NESTING {
            return Err(format!(
                "elements nested deeper than {MAX_NESTING} (MAX_NESTING)"
            ));
        }
        let tag = match self.stack.last() {
            None if self.root_seen => return Err("a second root element".into()),
            None if local == "ListBucketResult" => {
                self.root_seen = true;
                Tag::Root
            }
            None => {
                return Err(format!(
                    "root element is <{}>, not ListBucketResult",
                    clip(local, 60)
                ));
            }
            Some(Tag::Root) => match local {
                "IsTruncated" => Tag::Truncated,
                "NextContinuationToken" => Tag::NextToken,
                "KeyCount" => Tag::KeyCount,
                "Contents" => {
                    self.obj = Some(Building::default());
                    Tag::Contents
                }
                _ => Tag::Other,
            },
            Some(Tag::Contents) => match local {
                "Key" => Tag::Key,
                "Size" => Tag::Size,
                "ETag" => Tag::Etag,
                "LastModified" => Tag::LastModified,
                _ => Tag::Other,
            },
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

    fn number(&self, tag: Tag) -> Result<u64, String> {
        let t = self.text.trim();
        t.parse::<u64>()
            .map_err(|_| format!("bad <{}> {}", tag.name(), quoted(t, 40)))
    }

    fn close(&mut self) -> Result<Step<Object>, String> {
        let Some(tag) = self.stack.pop() else {
            return Err("an end tag without a start".into());
        };
        match tag {
            Tag::Root => self.root_closed = true,
            Tag::Truncated => {
                self.end.is_truncated = match self.text.trim() {
                    "true" => true,
                    "false" => false,
                    other => return Err(format!("bad <IsTruncated> {}", quoted(other, 40))),
                }
            }
            Tag::NextToken => {
                let t = self.text.trim();
                self.end.next_token = (!t.is_empty()).then(|| t.to_owned());
            }
            Tag::KeyCount => self.end.key_count = Some(self.number(tag)?),
            Tag::Key => {
                // A key is taken as listed: spaces at either end are part of it.
                let key = std::mem::take(&mut self.text);
                if let Some(o) = self.obj.as_mut() {
                    o.key = Some(key);
                }
            }
            Tag::Size => {
                let n = self.number(tag)?;
                if let Some(o) = self.obj.as_mut() {
                    o.size = Some(n);
                }
            }
            Tag::Etag => {
                let t = self.text.trim().to_owned();
                if let Some(o) = self.obj.as_mut() {
                    o.etag = Some(t).filter(|t| !t.is_empty());
                }
            }
            Tag::LastModified => {
                let t = self.text.trim().to_owned();
                if let Some(o) = self.obj.as_mut() {
                    o.last_modified = Some(t).filter(|t| !t.is_empty());
                }
            }
            Tag::Contents => {
                let b = self.obj.take().unwrap_or_default();
                let key = b.key.ok_or("a <Contents> without a <Key>")?;
                let size = b
                    .size
                    .ok_or_else(|| format!("no <Size> for {}", quoted(&key, 120)))?;
                self.end.objects = self.end.objects.saturating_add(1);
                return Ok(Step::Item(Object {
                    key,
                    size,
                    etag: b.etag,
                    last_modified: b.last_modified,
                }));
            }
            Tag::Other => {}
        }
        Ok(Step::More)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &[u8]) -> Result<(Vec<Object>, PageEnd), String> {
        let mut out = Vec::new();
        let end = parse_listing_each(body, "LIST", &mut |o| {
            out.push(o);
            Ok(())
        })?;
        Ok((out, end))
    }

    #[test]
    fn aws_and_s3rver_shapes() {
        // AWS puts the page's fields first, with its namespace.
        let aws = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix>
<KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>
<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
<Contents><Key>Wiki/ a &amp; b.md</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>Wiki/</Key><Size>0</Size><Owner><ID>x</ID></Owner></Contents>
</ListBucketResult>"#;
        let (o, end) = parse(aws).unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].key, "Wiki/ a & b.md");
        assert_eq!(o[0].size, 12);
        assert_eq!(
            o[0].etag.as_deref(),
            Some("\"9b2cf535f27731c974343645a3985328\"")
        );
        assert_eq!(o[1].key, "Wiki/");
        assert!(end.is_truncated);
        assert_eq!(
            end.next_token.as_deref(),
            Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        );
        assert_eq!((end.key_count, end.objects), (Some(2), 2));
        // s3rver: no namespace, the page's fields after the objects.
        let s3rver = b"<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents><IsTruncated>false</IsTruncated></ListBucketResult>";
        let (o, end) = parse(s3rver).unwrap();
        assert_eq!(
            (o.len(), end.is_truncated, end.next_token),
            (1, false, None)
        );
    }

    #[test]
    fn malformed_answers_are_one_line_errors_naming_the_request() {
        let deep = format!("<ListBucketResult>{}", "<x>".repeat(MAX_NESTING + 1));
        let long = format!(
            "<ListBucketResult><Contents><Key>{}</Key></Contents></ListBucketResult>",
            "a".repeat(MAX_TEXT_BYTES + 1)
        );
        for (body, want) in [
            (&b"<Error><Code>NoSuchBucket</Code></Error>"[..], "not ListBucketResult"),
            (b"<ListBucketResult><Contents>", "truncated"),
            (
                b"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
                "without a <Key>",
            ),
            (
                b"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
                "no <Size>",
            ),
            (
                b"<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
                "bad <Size>",
            ),
            (
                b"<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
                "bad <IsTruncated>",
            ),
            (
                b"<!DOCTYPE l [<!ENTITY a \"aaaa\">]><ListBucketResult/>",
                "DTD",
            ),
            (
                b"<ListBucketResult><Contents><Key>&a;</Key></Contents></ListBucketResult>",
                "undefined entity",
            ),
            (b"<ListBucketResult/><ListBucketResult/>", "second root"),
            (deep.as_bytes(), "MAX_NESTING"),
            (long.as_bytes(), "MAX_TEXT_BYTES"),
            (b"", "no root element"),
        ] {
            let e = parse(body).unwrap_err();
            assert!(e.starts_with("LIST: "), "{e}");
            assert!(e.contains(want), "{e} lacks {want}");
            assert!(!e.contains('\n') && e.len() < 400, "one short line: {e}");
        }
    }
}

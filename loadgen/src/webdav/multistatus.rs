//! PROPFIND answers: a `207 Multi-Status` body (RFC 4918 §13, §14.16) parsed into one
//! [`DavEntry`] per `<response>`.
//!
//! The XML is read with `roxmltree`, a read-only DOM with no dependencies of its own: a
//! multistatus is small enough to hold whole (a Depth 1 listing of a 10,000-note folder is a
//! few MB), and roxmltree resolves namespaces itself, which matters because servers spell the
//! `DAV:` prefix differently (`D:` from Apache, nginx and rclone, `d:` or a default namespace
//! elsewhere). It refuses DTDs by default, so an answer cannot expand entities without bound.
//!
//! Hrefs are percent-decoded to bytes and then read as UTF-8, nothing more: an NFD name stays
//! NFD, so two names that differ only in normalisation stay two entries (a sync client that
//! normalised would merge them).

use std::borrow::Cow;

use roxmltree::{Document, Node};

use super::error::DavError;

const DAV: &str = "DAV:";

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

/// Parses a `207 Multi-Status` body. `what` names the request in errors.
pub fn parse_multistatus(body: &[u8], what: &str) -> Result<Vec<DavEntry>, DavError> {
    let bad = |reason: String| DavError::BadMultistatus {
        what: what.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(body)
        .map_err(|e| bad(format!("not UTF-8 at byte {}", e.valid_up_to())))?;
    let doc = Document::parse(text).map_err(|e| bad(format!("not XML: {e}")))?;
    let root = doc.root_element();
    if !is_dav(root, "multistatus") {
        return Err(bad(format!(
            "root element is <{}>, not DAV: multistatus",
            root.tag_name().name()
        )));
    }
    let mut out = Vec::new();
    for resp in root.children().filter(|n| is_dav(*n, "response")) {
        out.push(parse_response(resp).map_err(bad)?);
    }
    Ok(out)
}

fn is_dav(n: Node, local: &str) -> bool {
    n.is_element() && n.tag_name().name() == local && n.tag_name().namespace() == Some(DAV)
}

fn dav_child<'a, 'i>(n: Node<'a, 'i>, local: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| is_dav(*c, local))
}

/// All text inside `n`, trimmed.
fn text_of(n: Node) -> String {
    let mut s = String::new();
    for d in n.descendants().filter(|d| d.is_text()) {
        s.push_str(d.text().unwrap_or_default());
    }
    s.trim().to_owned()
}

fn parse_response(resp: Node) -> Result<DavEntry, String> {
    let href_node = dav_child(resp, "href").ok_or("a <response> without an <href>")?;
    let href = text_of(href_node);
    let path = decode_href(&href)?;
    let mut entry = DavEntry {
        href,
        path,
        is_collection: false,
        size: None,
        etag: None,
        last_modified: None,
        status: 0,
    };
    // Either propstats (one per status) or a bare status (RFC 4918 §14.24).
    let mut ok_props = false;
    for ps in resp.children().filter(|n| is_dav(*n, "propstat")) {
        let status = dav_child(ps, "status")
            .map(|s| parse_status_line(&text_of(s)))
            .transpose()?
            .unwrap_or(200);
        if !(200..300).contains(&status) {
            if entry.status == 0 {
                entry.status = status;
            }
            continue;
        }
        ok_props = true;
        entry.status = status;
        let Some(prop) = dav_child(ps, "prop") else {
            continue;
        };
        for p in prop.children().filter(|n| n.is_element()) {
            if p.tag_name().namespace() != Some(DAV) {
                continue;
            }
            match p.tag_name().name() {
                "resourcetype" => entry.is_collection = dav_child(p, "collection").is_some(),
                "getcontentlength" => {
                    let t = text_of(p);
                    if !t.is_empty() {
                        entry.size = Some(t.parse().map_err(|_| {
                            format!("bad getcontentlength {t:?} for {}", entry.href)
                        })?);
                    }
                }
                "getetag" => entry.etag = Some(text_of(p)).filter(|t| !t.is_empty()),
                "getlastmodified" => {
                    entry.last_modified = Some(text_of(p)).filter(|t| !t.is_empty())
                }
                _ => {}
            }
        }
    }
    if !ok_props && let Some(s) = dav_child(resp, "status") {
        entry.status = parse_status_line(&text_of(s))?;
    }
    if entry.status == 0 {
        return Err(format!("no status for {}", entry.href));
    }
    Ok(entry)
}

/// `HTTP/1.1 200 OK` → 200.
fn parse_status_line(line: &str) -> Result<u16, String> {
    line.split_ascii_whitespace()
        .nth(1)
        .filter(|c| c.len() == 3)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))
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
        return Err(format!("href {href:?} is not an absolute path"));
    }
    if path.contains(['?', '#']) {
        return Err(format!("href {href:?} has a query or fragment"));
    }
    let bytes: Cow<[u8]> = percent_encoding::percent_decode_str(path).into();
    String::from_utf8(bytes.into_owned())
        .map_err(|_| format!("href {href:?} does not decode to UTF-8"))
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
    fn malformed_answers_are_errors_naming_the_request() {
        for (body, want) in [
            (&b"<html/>"[..], "not DAV: multistatus"),
            (b"<D:multistatus xmlns:D=\"DAV:\"><D:response/>", "not XML"),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:status>HTTP/1.1 200 OK</D:status></D:response></D:multistatus>",
                "without an <href>",
            ),
            (
                b"<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/a</D:href><D:propstat><D:prop><D:getcontentlength>x</D:getcontentlength></D:prop></D:propstat></D:response></D:multistatus>",
                "bad getcontentlength",
            ),
            (b"\xff\xfe", "not UTF-8"),
            (
                b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><D:multistatus xmlns:D=\"DAV:\"/>",
                "not XML",
            ),
        ] {
            let e = parse_multistatus(body, "PROPFIND /x").unwrap_err().to_string();
            assert!(e.starts_with("PROPFIND /x: "), "{e}");
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}

//! The tus 1.0.0 headers, parsed strictly and pure (no I/O): a server's `Upload-Offset`,
//! `Upload-Length` and `Tus-Max-Size` (non-negative decimal integers), its `Tus-Version`,
//! `Tus-Extension` and `Tus-Checksum-Algorithm` lists, its `Location` for a new upload, and
//! the `Upload-Metadata` this client writes and reads back. Each `Err` is a reason a message
//! can end with; the caller names the exchange. The same parsers run under the fuzz target
//! `tus_headers` and the property tests of `tests/it/hostile_tus.rs`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The protocol version this client speaks (`Tus-Resumable` on every request but OPTIONS).
pub const VERSION: &str = "1.0.0";

/// The largest offset or length accepted: 2^53 - 1, the largest integer a JavaScript server
/// (`@tus/server` keeps offsets as numbers) holds exactly. A vault file is far smaller; a
/// value above it is a server's garbage, refused before any arithmetic.
pub const MAX_OFFSET: u64 = (1 << 53) - 1;

/// A header value for a message: escaped and clipped.
fn shown(v: &str) -> String {
    contract::quote::quote_within(v, 60)
}

/// A non-negative decimal integer header (`Upload-Offset`, `Upload-Length`, `Tus-Max-Size`):
/// ASCII digits only (no sign, no space, no exponent), at most [`MAX_OFFSET`].
pub fn parse_count(name: &str, v: &str) -> Result<u64, String> {
    let t = v.trim_matches([' ', '\t']);
    if t.is_empty() {
        return Err(format!("{name} is empty"));
    }
    if t.starts_with('-') {
        return Err(format!("{name} {} is negative", shown(v)));
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name} {} is not a decimal integer", shown(v)));
    }
    match t.parse::<u64>() {
        Ok(n) if n <= MAX_OFFSET => Ok(n),
        _ => Err(format!(
            "{name} {} is over 2^53 - 1 (no upload is that large)",
            shown(v)
        )),
    }
}

/// The offset a `PATCH` (or a creation with upload) answered, checked against what was sent:
/// `before` the offset it was sent at, `sent` its body's length, `length` the upload's. The
/// offset may not go backwards, past the length, or past what the request carried; it may
/// stay where it was (a server that kept nothing: the caller bounds the retries).
pub fn check_patched(v: Option<&str>, before: u64, sent: u64, length: u64) -> Result<u64, String> {
    let v = v.ok_or("the answer has no Upload-Offset")?;
    let n = parse_count("Upload-Offset", v)?;
    if n < before {
        return Err(format!(
            "Upload-Offset went backwards, from {before} to {n}"
        ));
    }
    if n > length {
        return Err(format!(
            "Upload-Offset {n} is beyond the upload's length {length}"
        ));
    }
    if n > before.saturating_add(sent) {
        return Err(format!(
            "Upload-Offset {n} is past the {sent} bytes sent at offset {before}"
        ));
    }
    Ok(n)
}

/// The offset a `HEAD` answered when resuming: at most the upload's `length`, never below
/// `acked` (an offset the server acknowledged before: bytes it said it stored cannot vanish);
/// an `Upload-Length`, when given, must be the upload's.
pub fn check_resumed(
    offset: Option<&str>,
    upload_length: Option<&str>,
    acked: u64,
    length: u64,
) -> Result<u64, String> {
    let v = offset.ok_or("the HEAD answer has no Upload-Offset")?;
    let n = parse_count("Upload-Offset", v)?;
    if let Some(l) = upload_length {
        let l = parse_count("Upload-Length", l)?;
        if l != length {
            return Err(format!(
                "Upload-Length {l} is not the upload's length {length}"
            ));
        }
    }
    if n > length {
        return Err(format!(
            "Upload-Offset {n} is beyond the upload's length {length}"
        ));
    }
    if n < acked {
        return Err(format!(
            "Upload-Offset went backwards, from {acked} (acknowledged) to {n}"
        ));
    }
    Ok(n)
}

/// A comma-separated token list (`Tus-Version`, `Tus-Extension`, `Tus-Checksum-Algorithm`):
/// its items trimmed, empty items dropped; at most 64 items of at most 64 bytes of
/// visible ASCII each.
pub fn parse_list(name: &str, v: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in v.split(',').map(|s| s.trim_matches([' ', '\t'])) {
        if item.is_empty() {
            continue;
        }
        if item.len() > 64 || !item.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "{name} holds an item that is not a token: {}",
                shown(item)
            ));
        }
        out.push(item.to_owned());
        if out.len() > 64 {
            return Err(format!("{name} lists more than 64 items"));
        }
    }
    Ok(out)
}

/// What an `OPTIONS` answer says the server supports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `Tus-Version`, in the server's order of preference.
    pub versions: Vec<String>,
    /// `Tus-Extension` (`creation`, `creation-with-upload`, `termination`, `checksum`, …).
    pub extensions: Vec<String>,
    /// `Tus-Max-Size`, when given.
    pub max_size: Option<u64>,
    /// `Tus-Checksum-Algorithm`, lower case as the protocol requires.
    pub checksums: Vec<String>,
}

impl Capabilities {
    /// Reads the headers of an `OPTIONS` answer; a server that does not list 1.0.0 or has no
    /// `creation` (this client cannot make an upload without it) is refused.
    pub fn parse(
        version: Option<&str>,
        extension: Option<&str>,
        max_size: Option<&str>,
        checksum: Option<&str>,
    ) -> Result<Capabilities, String> {
        let versions = parse_list(
            "Tus-Version",
            version.ok_or("the OPTIONS answer has no Tus-Version (is it a tus server?)")?,
        )?;
        if !versions.iter().any(|v| v == VERSION) {
            return Err(format!(
                "Tus-Version {} does not list {VERSION}",
                shown(version.unwrap_or_default())
            ));
        }
        let extensions = match extension {
            Some(e) => parse_list("Tus-Extension", e)?,
            None => Vec::new(),
        };
        if !extensions.iter().any(|e| e == "creation") {
            return Err(format!(
                "Tus-Extension {} has no `creation`: uploads cannot be made",
                shown(extension.unwrap_or("(none)"))
            ));
        }
        let max_size = max_size
            .map(|v| parse_count("Tus-Max-Size", v))
            .transpose()?;
        let checksums = match checksum {
            Some(c) => parse_list("Tus-Checksum-Algorithm", c)?,
            None => Vec::new(),
        };
        Ok(Capabilities {
            versions,
            extensions,
            max_size,
            checksums,
        })
    }

    /// Whether the server lists extension `name`.
    pub fn has(&self, name: &str) -> bool {
        self.extensions.iter().any(|e| e == name)
    }

    /// Whether PATCH bodies carry `Upload-Checksum: sha1 …`: the server lists `checksum` and
    /// `sha1` among its algorithms (which the protocol makes every checksum server support).
    pub fn sha1(&self) -> bool {
        self.has("checksum") && self.checksums.iter().any(|a| a == "sha1")
    }
}

/// The `Upload-Checksum` value of `body`: `sha1 ` and the Base64 of its SHA-1.
pub fn sha1_checksum(body: &[u8]) -> String {
    use sha1::Digest;
    format!("sha1 {}", STANDARD.encode(sha1::Sha1::digest(body)))
}

/// `Upload-Metadata` of `pairs`: `key base64(value)` joined by commas, in key order.
pub fn encode_metadata(pairs: &BTreeMap<String, String>) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k} {}", STANDARD.encode(v.as_bytes())))
        .collect::<Vec<_>>()
        .join(",")
}

/// An `Upload-Metadata` value read back: each pair a key and the UTF-8 text of its Base64
/// value (a key without a value maps to ""); a key twice, a key that is not a token, Base64
/// that does not decode or text that is not UTF-8 is refused.
pub fn decode_metadata(v: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in v.split(',').map(|s| s.trim_matches([' ', '\t'])) {
        if pair.is_empty() {
            continue;
        }
        let (k, val) = pair.split_once(' ').unwrap_or((pair, ""));
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("Upload-Metadata key {} is not a token", shown(k)));
        }
        let bytes = STANDARD
            .decode(val.trim())
            .map_err(|e| format!("Upload-Metadata value of {} is not Base64: {e}", shown(k)))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("Upload-Metadata value of {} is not UTF-8", shown(k)))?;
        if out.insert(k.to_owned(), text).is_some() {
            return Err(format!("Upload-Metadata names {} twice", shown(k)));
        }
    }
    Ok(out)
}

/// The path on the target of a new upload's `Location`: an absolute `http://` URL whose
/// authority is the target's (`authority`, `host:port` as the client sends it), or a path
/// from `/`. A URL elsewhere (off loopback, or another port), any other scheme, a relative
/// reference (there is no base this client resolves it against) and characters a request
/// line cannot carry are refused.
pub fn location_path(v: &str, authority: &str) -> Result<String, String> {
    let t = v.trim_matches([' ', '\t']);
    if t.is_empty() {
        return Err("Location is empty".into());
    }
    if t.len() > 2048 {
        return Err(format!("Location is {} bytes long, over 2048", t.len()));
    }
    if let Some(bad) = t.bytes().find(|b| !b.is_ascii_graphic()) {
        return Err(format!(
            "Location {} holds byte 0x{bad:02x}, which a request line cannot carry",
            shown(t)
        ));
    }
    let path = if let Some(rest) = t.strip_prefix("http://") {
        let (auth, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if auth != authority {
            let host = host_of(auth);
            let loopback = host == "localhost"
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            return Err(if loopback {
                format!(
                    "Location {} is another address on loopback, not the target's {authority}",
                    shown(t)
                )
            } else {
                format!("Location {} points off loopback", shown(t))
            });
        }
        if path.is_empty() { "/" } else { path }
    } else if t.starts_with("//") {
        return Err(format!(
            "Location {} names another host (a scheme-relative URL)",
            shown(t)
        ));
    } else if t.starts_with('/') {
        t
    } else if t.contains("://") || t.split_once(':').is_some_and(|(s, _)| !s.contains('/')) {
        return Err(format!(
            "Location {} is not an http:// URL on the target",
            shown(t)
        ));
    } else {
        return Err(format!(
            "Location {} is relative to nowhere (expected an absolute URL or a path from /)",
            shown(t)
        ));
    };
    let path = path.split('#').next().unwrap_or_default();
    if !path.starts_with('/') {
        return Err(format!("Location {} has no path", shown(t)));
    }
    if path
        .split(['/', '?'])
        .any(|s| s == ".." || s.eq_ignore_ascii_case("%2e%2e"))
    {
        return Err(format!("Location {} climbs with `..`", shown(t)));
    }
    Ok(path.to_owned())
}

/// The host of an authority (`127.0.0.1:9`, `[::1]:9`, `example.org`).
fn host_of(auth: &str) -> &str {
    let auth = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    if auth.starts_with('[') {
        return auth
            .split_once(']')
            .map_or(auth, |(h, _)| h)
            .trim_start_matches('[');
    }
    auth.rsplit_once(':').map_or(auth, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plain_non_negative_integers() {
        assert_eq!(parse_count("Upload-Offset", "0"), Ok(0));
        assert_eq!(parse_count("Upload-Offset", " 12 "), Ok(12));
        assert_eq!(
            parse_count("Upload-Offset", "9007199254740991"),
            Ok(MAX_OFFSET)
        );
        for (v, want) in [
            ("-1", "is negative"),
            ("+1", "not a decimal integer"),
            ("1e3", "not a decimal integer"),
            ("0x10", "not a decimal integer"),
            ("", "is empty"),
            ("9007199254740992", "over 2^53 - 1"),
            ("99999999999999999999999999999", "over 2^53 - 1"),
            ("１", "not a decimal integer"),
        ] {
            let e = parse_count("Upload-Offset", v).unwrap_err();
            assert!(e.contains(want), "{v:?}: {e}");
        }
    }

    #[test]
    fn a_patched_offset_moves_forward_within_what_was_sent() {
        assert_eq!(check_patched(Some("10"), 0, 10, 20), Ok(10));
        assert_eq!(check_patched(Some("4"), 0, 10, 20), Ok(4));
        assert_eq!(check_patched(Some("0"), 0, 10, 20), Ok(0));
        let e = |v, b, s, l| check_patched(Some(v), b, s, l).unwrap_err();
        assert!(e("5", 10, 10, 30).contains("went backwards, from 10 to 5"));
        assert!(e("31", 10, 30, 30).contains("beyond the upload's length 30"));
        assert!(e("25", 10, 10, 30).contains("past the 10 bytes sent at offset 10"));
        assert!(e("-3", 0, 10, 30).contains("negative"));
        assert!(
            check_patched(None, 0, 1, 1)
                .unwrap_err()
                .contains("no Upload-Offset")
        );
    }

    #[test]
    fn a_resumed_offset_keeps_what_was_acknowledged() {
        assert_eq!(check_resumed(Some("7"), Some("20"), 5, 20), Ok(7));
        assert_eq!(check_resumed(Some("20"), None, 20, 20), Ok(20));
        let e = check_resumed(Some("4"), None, 5, 20).unwrap_err();
        assert!(e.contains("backwards, from 5 (acknowledged) to 4"), "{e}");
        let e = check_resumed(Some("21"), None, 0, 20).unwrap_err();
        assert!(e.contains("beyond"), "{e}");
        let e = check_resumed(Some("1"), Some("19"), 0, 20).unwrap_err();
        assert!(e.contains("Upload-Length 19"), "{e}");
    }

    #[test]
    fn options_name_the_version_the_extensions_and_the_checksums() {
        let c = Capabilities::parse(
            Some("1.0.0,0.2.2"),
            Some("creation, creation-with-upload,termination,checksum"),
            Some("1073741824"),
            Some("md5,sha1,crc32"),
        )
        .unwrap();
        assert!(c.has("creation-with-upload") && c.has("termination") && c.sha1());
        assert_eq!(c.max_size, Some(1 << 30));
        let plain = Capabilities::parse(Some("1.0.0"), Some("creation"), None, None).unwrap();
        assert!(!plain.sha1() && !plain.has("termination"));
        for (v, e, want) in [
            (None, Some("creation"), "no Tus-Version"),
            (Some("0.2.2"), Some("creation"), "does not list 1.0.0"),
            (Some("1.0.0"), None, "has no `creation`"),
            (Some("1.0.0"), Some("creation,\u{1b}[2J"), "not a token"),
        ] {
            let err = Capabilities::parse(v, e, None, None).unwrap_err();
            assert!(err.contains(want), "{v:?} {e:?}: {err}");
            assert!(!err.contains('\u{1b}'), "{err}");
        }
        let err = Capabilities::parse(Some("1.0.0"), Some("creation"), Some("-5"), None);
        assert!(err.unwrap_err().contains("Tus-Max-Size"));
    }

    #[test]
    fn the_checksum_is_the_protocols_example() {
        // The protocol's example body and header (its Checksum section).
        assert_eq!(
            sha1_checksum(b"hello world"),
            "sha1 Kq5sNclPz7QV2+lfQIuc6R7oRu0="
        );
    }

    #[test]
    fn metadata_round_trips_and_refuses_garbage() {
        let mut m = BTreeMap::new();
        m.insert("filename".to_owned(), "Wiki/Café crème.md".to_owned());
        m.insert("filetype".to_owned(), "text/markdown".to_owned());
        let v = encode_metadata(&m);
        assert!(
            v.starts_with("filename V2lraS9DYWbDqSBjcsOobWUubWQ=,filetype "),
            "{v}"
        );
        assert_eq!(decode_metadata(&v).unwrap(), m);
        assert_eq!(
            decode_metadata("is_confidential").unwrap()["is_confidential"],
            ""
        );
        for (v, want) in [
            ("a !!!", "not Base64"),
            ("a /w==", "not UTF-8"),
            ("a YQ==,a YQ==", "twice"),
        ] {
            let e = decode_metadata(v).unwrap_err();
            assert!(e.contains(want), "{v:?}: {e}");
        }
    }

    #[test]
    fn a_location_is_on_the_target_or_refused() {
        let a = "127.0.0.1:1080";
        assert_eq!(
            location_path("http://127.0.0.1:1080/files/abc", a).unwrap(),
            "/files/abc"
        );
        assert_eq!(location_path("/files/abc", a).unwrap(), "/files/abc");
        assert_eq!(
            location_path("http://127.0.0.1:1080/files/abc?x=1#f", a).unwrap(),
            "/files/abc?x=1"
        );
        for (v, want) in [
            ("http://203.0.113.9/files/abc", "points off loopback"),
            ("http://example.org:1080/files/abc", "points off loopback"),
            (
                "http://127.0.0.1:1081/files/abc",
                "another address on loopback",
            ),
            ("http://[::1]:1080/files/abc", "another address on loopback"),
            ("https://127.0.0.1:1080/files/abc", "not an http:// URL"),
            ("//example.org/files/abc", "scheme-relative"),
            ("abc", "relative to nowhere"),
            ("../abc", "relative to nowhere"),
            ("", "is empty"),
            ("/files/a b", "byte 0x20"),
            ("/files/../../etc", "climbs"),
            ("http://127.0.0.1:1080", "ok"),
        ] {
            match location_path(v, a) {
                Ok(p) => assert_eq!((want, p.as_str()), ("ok", "/"), "{v:?}"),
                Err(e) => assert!(e.contains(want), "{v:?}: {e}"),
            }
        }
    }
}

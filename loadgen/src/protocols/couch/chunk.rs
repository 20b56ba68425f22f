//! Self-hosted LiveSync's document model for one file, as its `livesync-commonlib` writes it
//! with the settings its set-up wizard recommends (`chunkSplitterVersion: "v3-rabin-karp"`,
//! `hashAlg: "xxhash64"`, `customChunkSize: 50` (`PREFERRED_SETTING_SELF_HOSTED`),
//! `minimumChunkSize: 20`,
//! `handleFilenameCaseSensitive: false`, no encryption, no path obfuscation):
//!
//! - **Text or binary.** `.md`, `.txt` and `.canvas` files are text (`shouldSplitAsPlainText`):
//!   their document's `type` is `"plain"` and their chunks hold the text itself. Every other
//!   file is `"newnote"`, and its chunks hold base64 of the bytes.
//! - **Chunk boundaries** (`splitPiecesRabinKarp`): a Rabin–Karp rolling hash over a 48-byte
//!   window (prime 31, 32-bit arithmetic) marks a boundary where `hash % avg == 1`, with
//!   `avg = max(128, size / 20)` for text and `max(4096, size / 12)` for binary, pieces
//!   between `max(avg / 4, 20)` and `avg * 5` bytes; text never splits inside a UTF-8
//!   sequence. The hash is not reset at a boundary; the window restarts with the piece.
//! - **Chunk id** (`XXHash64HashManager`): `h:` + base 36 of XXH64 (seed 0) of the UTF-8 of
//!   `` `${piece}-${piece.length}` ``, where the length counts UTF-16 code units as JavaScript
//!   does. Equal pieces have equal ids, so duplicate bodies share chunks.
//! - **Document id** (`path2id_base`): the path lower-cased (case-insensitive handling), with
//!   `/` put in front of a path that starts with `_` (CouchDB reserves ids starting with `_`).
//!
//! Text that is not valid UTF-8 cannot be a LiveSync text chunk (the plugin would decode it
//! lossily): such a file is carried as binary, so the bytes survive.

use base64::Engine as _;

use super::xxh64::{base36, xxh64};

/// The prefix of a chunk document's id.
pub const CHUNK_PREFIX: &str = "h:";
/// LiveSync's `MAX_DOC_SIZE_BIN` (102,400) times `customChunkSize + 1` (51): the largest piece.
pub const ABSOLUTE_MAX_PIECE: usize = 102_400 * 51;
/// LiveSync's `minimumChunkSize` setting.
pub const MINIMUM_CHUNK: usize = 20;
/// The rolling hash's window, prime and boundary value (`splitPiecesRabinKarp`).
const WINDOW: usize = 48;
const PRIME: u32 = 31;
const BOUNDARY: u64 = 1;

/// Whether LiveSync splits `path` as text (`shouldSplitAsPlainText`).
pub fn is_plain_path(path: &str) -> bool {
    path.ends_with(".md") || path.ends_with(".txt") || path.ends_with(".canvas")
}

/// How a file's bytes are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `type: "plain"`: chunks hold UTF-8 text.
    Plain,
    /// `type: "newnote"`: chunks hold base64.
    Binary,
}

impl Kind {
    /// The kind of `path` holding `bytes`.
    pub fn of(path: &str, bytes: &[u8]) -> Kind {
        if is_plain_path(path) && std::str::from_utf8(bytes).is_ok() {
            Kind::Plain
        } else {
            Kind::Binary
        }
    }

    /// The metadata document's `type`.
    pub fn doc_type(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Binary => "newnote",
        }
    }
}

/// One chunk: its id and its `data` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub id: String,
    pub data: String,
}

/// The chunk id of a piece's `data` (see the module's notes).
pub fn chunk_id(data: &str) -> String {
    let units = data.encode_utf16().count();
    let keyed = format!("{data}-{units}");
    format!("{CHUNK_PREFIX}{}", base36(xxh64(keyed.as_bytes())))
}

/// The boundaries (exclusive ends) `splitPiecesRabinKarp` puts in `buf`.
pub fn boundaries(buf: &[u8], text: bool) -> Vec<usize> {
    let (min_piece, count) = if text { (128, 20) } else { (4096, 12) };
    let avg = (buf.len() / count).max(min_piece);
    let max = ABSOLUTE_MAX_PIECE.min(avg.saturating_mul(5));
    let min = (avg / 4).max(MINIMUM_CHUNK).min(max);
    // JavaScript's `(hash >>> 0) % avg`: the unsigned hash, modulo the average piece size.
    let modulus = avg as u64;
    let mut p_pow_w: u32 = 1;
    for _ in 0..WINDOW - 1 {
        p_pow_w = p_pow_w.wrapping_mul(PRIME);
    }
    let mut out = Vec::new();
    let (mut hash, mut start) = (0u32, 0usize);
    for pos in 0..buf.len() {
        let byte = u32::from(buf[pos]);
        if pos >= start + WINDOW {
            let old = u32::from(buf[pos - WINDOW]);
            hash = hash.wrapping_sub(old.wrapping_mul(p_pow_w));
        }
        hash = hash.wrapping_mul(PRIME).wrapping_add(byte);
        let size = pos - start + 1;
        let candidate = (size >= min && u64::from(hash) % modulus == BOUNDARY) || size >= max;
        if candidate {
            // Text: never end a piece before a UTF-8 continuation byte.
            let safe = !text || buf.get(pos + 1).is_none_or(|b| b & 0xC0 != 0x80);
            if safe {
                out.push(pos + 1);
                start = pos + 1;
            }
        }
    }
    if start < buf.len() {
        out.push(buf.len());
    }
    out
}

/// The chunks of a file, in order (an empty file has none).
pub fn split(kind: Kind, bytes: &[u8]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut from = 0;
    for end in boundaries(bytes, kind == Kind::Plain) {
        let part = &bytes[from..end];
        let data = match kind {
            // Boundaries never split a UTF-8 sequence, so each piece of valid text is valid.
            Kind::Plain => String::from_utf8_lossy(part).into_owned(),
            Kind::Binary => base64::engine::general_purpose::STANDARD.encode(part),
        };
        out.push(Piece {
            id: chunk_id(&data),
            data,
        });
        from = end;
    }
    out
}

/// A chunk's `data` back to bytes.
pub fn decode(kind: Kind, data: &str) -> Option<Vec<u8>> {
    match kind {
        Kind::Plain => Some(data.as_bytes().to_vec()),
        Kind::Binary => base64::engine::general_purpose::STANDARD.decode(data).ok(),
    }
}

/// The metadata document's id for a vault path (`path2id_base`, case-insensitive).
pub fn doc_id(path: &str) -> String {
    let lower = path.to_lowercase();
    if lower.starts_with('_') {
        format!("/{lower}")
    } else {
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_file_and_equal_bodies_share_ids() {
        let text: String = (0..400)
            .map(|i| format!("line {i} of a note with some words in it\n"))
            .collect();
        let pieces = split(Kind::Plain, text.as_bytes());
        assert!(pieces.len() > 1, "{}", pieces.len());
        let joined: String = pieces.iter().map(|p| p.data.as_str()).collect();
        assert_eq!(joined, text);
        assert_eq!(split(Kind::Plain, text.as_bytes()), pieces);
        for p in &pieces {
            assert!(p.id.starts_with("h:"), "{}", p.id);
            assert_eq!(p.id, chunk_id(&p.data));
        }
        assert!(split(Kind::Plain, b"").is_empty());
    }

    #[test]
    fn text_never_splits_inside_a_character() {
        let text = "é漢字🙂".repeat(2000);
        for p in split(Kind::Plain, text.as_bytes()) {
            assert!(!p.data.contains('\u{fffd}'));
        }
        let joined: String = split(Kind::Plain, text.as_bytes())
            .into_iter()
            .map(|p| p.data)
            .collect();
        assert_eq!(joined, text);
    }

    #[test]
    fn binary_round_trips_through_base64() {
        let bytes: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let pieces = split(Kind::Binary, &bytes);
        let mut back = Vec::new();
        for p in &pieces {
            back.extend(decode(Kind::Binary, &p.data).unwrap());
        }
        assert_eq!(back, bytes);
    }

    #[test]
    fn ids_follow_path2id() {
        assert_eq!(doc_id("Wiki/Note.md"), "wiki/note.md");
        assert_eq!(doc_id("_private/a.md"), "/_private/a.md");
        assert_eq!(doc_id("A.md"), doc_id("a.md"));
        assert_eq!(Kind::of("a.md", b"x"), Kind::Plain);
        assert_eq!(Kind::of("a.md", &[0xff]), Kind::Binary);
        assert_eq!(Kind::of("a.png", b"x"), Kind::Binary);
    }
}

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

/// The largest file a pull assembles: the largest note or attachment a vault profile may
/// name (`scenarios`' `shape::MAX_FILE_BYTES`, 1 GiB). A metadata document whose chunks
/// would make more, with or without a `size`, is refused before anything is written.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// Why a chunk's data cannot be taken for its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// The id is LiveSync's XXH64 form, and the data does not hash to it: corrupt, or written
    /// with another hash algorithm whose ids look the same (`xxhash32`).
    Mismatch,
    /// The id is not LiveSync's XXH64 form (`h:` and base 36): an encrypted chunk (`h:+…`)
    /// or another hash algorithm (`sha1`), whose data cannot be checked here.
    Unverifiable,
    /// The chunk document has no `data`.
    NoData,
}

impl Flaw {
    /// What is wrong, for a message naming the chunk and its file.
    pub fn reason(self) -> &'static str {
        match self {
            Flaw::Mismatch => {
                "its data does not hash to its id (XXH64 of the data, as LiveSync names chunks)"
            }
            Flaw::Unverifiable => {
                "its id is not LiveSync's unencrypted XXH64 id (h: and base 36), so its data cannot be verified (encryption, or another hash algorithm)"
            }
            Flaw::NoData => "the chunk document has no data",
        }
    }
}

/// Whether `id` is an id [`chunk_id`] can make: `h:` and 1 to 13 base-36 digits.
pub fn is_derivable(id: &str) -> bool {
    id.strip_prefix(CHUNK_PREFIX).is_some_and(|d| {
        (1..=13).contains(&d.len())
            && d.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

/// Checks a chunk's `data` against its `id`: the id must be LiveSync's unencrypted XXH64 id
/// of exactly this data.
pub fn check(id: &str, data: &str) -> Result<(), Flaw> {
    if !is_derivable(id) {
        return Err(Flaw::Unverifiable);
    }
    if chunk_id(data) != id {
        return Err(Flaw::Mismatch);
    }
    Ok(())
}

/// The bytes a chunk's `data` decodes to, without decoding it; `None` when it is not valid
/// (binary data whose length is not base64's).
pub fn decoded_len(kind: Kind, data: &str) -> Option<u64> {
    match kind {
        Kind::Plain => Some(data.len() as u64),
        Kind::Binary => {
            let b = data.as_bytes();
            if !b.len().is_multiple_of(4) {
                return None;
            }
            let pad = b.iter().rev().take(2).take_while(|&&c| c == b'=').count();
            Some((b.len() / 4 * 3 - pad) as u64)
        }
    }
}

/// Why a file could not be assembled: one line naming the file and, where one is to blame,
/// the chunk (server text quoted).
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    #[error("chunk {} of {} is missing", quote(.chunk), quote(.path))]
    Missing { path: String, chunk: String },
    #[error("chunk {} of {}: {}; nothing was written for the file", quote(.chunk), quote(.path), .flaw.reason())]
    Flawed {
        path: String,
        chunk: String,
        flaw: Flaw,
    },
    #[error("chunk {} of {} is not valid base64; nothing was written for the file", quote(.chunk), quote(.path))]
    BadBase64 { path: String, chunk: String },
    #[error("{}: its {children} chunks make {made}, {bound}; nothing was written for the file", quote(.path))]
    Size {
        path: String,
        children: usize,
        made: String,
        bound: String,
    },
    #[error("{}: writing it: {err}", quote(.path))]
    Io { path: String, err: std::io::Error },
}

fn quote(s: &str) -> String {
    contract::quote::quote(s)
}

/// Checks a file's chunks before any is written: every child present, verified against its
/// id, decodable, and their total equal to the metadata's `size` (at most
/// [`MAX_FILE_BYTES`], which also bounds a file without a `size`). `get` gives a chunk's
/// data as held, or its flaw. Returns the file's length.
pub fn check_file<'h>(
    path: &str,
    kind: Kind,
    children: &[String],
    size: Option<u64>,
    get: &dyn Fn(&str) -> Option<Result<&'h str, Flaw>>,
) -> Result<u64, AssemblyError> {
    let limit = size.unwrap_or(MAX_FILE_BYTES).min(MAX_FILE_BYTES);
    let mut total: u64 = 0;
    let mut over = false;
    for c in children {
        let data = match get(c) {
            None => {
                return Err(AssemblyError::Missing {
                    path: path.to_owned(),
                    chunk: c.clone(),
                });
            }
            Some(Err(flaw)) => {
                return Err(AssemblyError::Flawed {
                    path: path.to_owned(),
                    chunk: c.clone(),
                    flaw,
                });
            }
            Some(Ok(d)) => d,
        };
        let n = decoded_len(kind, data).ok_or_else(|| AssemblyError::BadBase64 {
            path: path.to_owned(),
            chunk: c.clone(),
        })?;
        total = total.saturating_add(n);
        if total > limit {
            over = true;
            break;
        }
    }
    if over || size.is_some_and(|s| s != total) {
        let made = if over {
            format!("more than {limit} bytes")
        } else {
            format!("{total} bytes")
        };
        let bound = match size {
            Some(s) if s <= MAX_FILE_BYTES => format!("its metadata says {s} bytes"),
            Some(s) => {
                format!("its metadata says {s} bytes, over the {MAX_FILE_BYTES} a file may have")
            }
            None => format!(
                "over the {MAX_FILE_BYTES} bytes a file may have (its metadata gives no size)"
            ),
        };
        return Err(AssemblyError::Size {
            path: path.to_owned(),
            children: children.len(),
            made,
            bound,
        });
    }
    Ok(total)
}

/// Assembles a file from its chunks into `out`: [`check_file`] first, so nothing is written
/// unless every chunk is sound and their total is the file's; then each chunk decoded and
/// written in turn (one in memory at a time). Returns the bytes written.
pub fn assemble<'h>(
    path: &str,
    kind: Kind,
    children: &[String],
    size: Option<u64>,
    get: &dyn Fn(&str) -> Option<Result<&'h str, Flaw>>,
    out: &mut dyn std::io::Write,
) -> Result<u64, AssemblyError> {
    check_file(path, kind, children, size, get)?;
    let mut written = 0u64;
    for c in children {
        let Some(Ok(data)) = get(c) else {
            return Err(AssemblyError::Missing {
                path: path.to_owned(),
                chunk: c.clone(),
            });
        };
        let part = decode(kind, data).ok_or_else(|| AssemblyError::BadBase64 {
            path: path.to_owned(),
            chunk: c.clone(),
        })?;
        out.write_all(&part).map_err(|err| AssemblyError::Io {
            path: path.to_owned(),
            err,
        })?;
        written += part.len() as u64;
    }
    Ok(written)
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

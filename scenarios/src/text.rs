//! Words, names and Markdown blocks: the raw material of generated notes.
//!
//! Every non-ASCII literal here is written in NFC; the hazards profile adds NFD spellings on
//! purpose with explicit escapes.

use crate::rng::{below, chance, pick};
use rand_chacha::ChaCha8Rng;

/// English words; the first 124 are nouns, which titles, folders and tags draw from.
#[rustfmt::skip]
pub(crate) const WORDS: &[&str] = &[
    "project", "meeting", "notes", "idea", "research", "draft", "review", "plan", "weekly",
    "daily", "reading", "book", "paper", "summary", "design", "system", "sync", "server",
    "client", "vault", "journal", "garden", "recipe", "travel", "budget", "health", "habit",
    "goal", "question", "answer", "theory", "practice", "lecture", "course", "chapter",
    "history", "language", "music", "film", "article", "podcast", "quote", "person", "team",
    "company", "product", "release", "feature", "bug", "fix", "test", "benchmark", "latency",
    "storage", "network", "protocol", "index", "search", "cache", "memory", "thread", "queue",
    "backup", "archive", "inbox", "outline", "template", "workflow", "review", "retro",
    "sprint", "roadmap", "strategy", "market", "customer", "interview", "feedback", "metric",
    "report", "analysis", "data", "model", "graph", "link", "tag", "folder", "file", "image",
    "table", "list", "task", "deadline", "morning", "evening", "weekend", "spring", "summer",
    "autumn", "winter", "city", "river", "mountain", "garden", "kitchen", "office", "home",
    "family", "friend", "letter", "story", "poem", "sketch", "diagram", "formula", "proof",
    "lemma", "experiment", "result", "method", "source", "reference", "concept", "principle",
    "pattern", "the", "of", "and", "to", "in", "with", "for", "on", "about", "from", "is",
    "was", "are", "a", "an", "this", "that", "it", "we", "they", "not", "but", "or", "as", "by",
    "at",
];

/// Non-ASCII words (NFC): Latin accents, Cyrillic, Greek, CJK, emoji.
#[rustfmt::skip]
pub(crate) const NON_ASCII_WORDS: &[&str] = &[
    "café", "naïve", "über", "Zürich", "résumé", "Ångström", "façade", "jalapeño",
    "smörgåsbord", "Straße", "crème", "déjà", "São", "Kraków", "Ærø", "привет", "заметка",
    "Москва", "λόγος", "θεωρία", "東京", "日記", "会議", "メモ", "笔记", "한국어", "🚀", "📚", "✅", "💡",
];

/// Fenced-code languages with lines in that language.
const CODE: &[(&str, &[&str])] = &[
    (
        "rust",
        &[
            "let total = items.iter().map(|x| x.size).sum::<u64>();",
            "assert_eq!(digest(&a), digest(&b));",
        ],
    ),
    (
        "python",
        &[
            "for entry in entries:\n    print(entry.path, entry.size)",
            "data = json.loads(path.read_text())",
        ],
    ),
    (
        "js",
        &[
            "const res = await fetch(url, { method: \"POST\", body });",
            "export default class SyncPlugin extends Plugin {}",
        ],
    ),
    (
        "bash",
        &[
            "cargo run --release -- vault gen small --out /tmp/v",
            "git log --oneline | head -n 20",
        ],
    ),
    ("json", &["{ \"path\": \"notes/a.md\", \"size\": 1536 }"]),
    (
        "sql",
        &["SELECT path, size FROM files WHERE size > 4096 ORDER BY size DESC;"],
    ),
    ("yaml", &["retries: 3\ntimeout_ms: 2500"]),
    (
        "go",
        &["if err != nil {\n\treturn fmt.Errorf(\"sync: %w\", err)\n}"],
    ),
];

/// One word; non-ASCII with probability `non_ascii`.
pub(crate) fn word(rng: &mut ChaCha8Rng, non_ascii: f64) -> &'static str {
    if non_ascii > 0.0 && chance(rng, non_ascii) {
        pick(rng, NON_ASCII_WORDS)
    } else {
        pick(rng, WORDS)
    }
}

fn noun(rng: &mut ChaCha8Rng, non_ascii: bool) -> &'static str {
    if non_ascii && chance(rng, 0.5) {
        pick(rng, &NON_ASCII_WORDS[..26])
    } else {
        pick(rng, &WORDS[..124])
    }
}

fn push_capitalised(out: &mut String, w: &str) {
    let mut chars = w.chars();
    if let Some(c) = chars.next() {
        out.extend(c.to_uppercase());
        out.push_str(chars.as_str());
    }
}

/// A note title (also its file stem): 1-4 words, ~75 % with spaces, some non-ASCII
/// (docs/src/vaults/real-vaults.md: median 20 characters, ~76 % with spaces, up to 36 % non-ASCII).
pub(crate) fn title(rng: &mut ChaCha8Rng, non_ascii_share: f64) -> String {
    let words = match below(rng, 100) {
        0..=23 => 1,
        24..=48 => 2,
        49..=78 => 3,
        _ => 4,
    };
    let non_ascii = chance(rng, non_ascii_share);
    let mut t = String::with_capacity(32);
    for i in 0..words {
        let w = noun(rng, non_ascii);
        if i == 0 {
            push_capitalised(&mut t, w);
        } else {
            t.push(' ');
            t.push_str(w);
        }
    }
    if words == 1 {
        // Single-word titles alone would collide often; real vaults date or number them.
        t.push_str(&format!("-{}", below(rng, 1000)));
    }
    t
}

/// The longest title a twin writes, in bytes: far from the 240-byte long-name class, whose
/// count a twin holds exactly.
pub(crate) const TITLE_MAX_BYTES: usize = 180;

/// What one twin title is to be: its script, its length in characters, and whether its words
/// are separated by spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TitleSpec {
    pub script: &'static str,
    pub chars: usize,
    pub spaces: bool,
}

/// A twin's note title: words of `spec.script` (the first capitalised) until it is
/// `spec.chars` characters long, cut there. Words are joined by a space, or else by `-`
/// (nothing in Chinese and Japanese, an en dash in `punct`); the cut never leaves a
/// separator at the end, and the title stays under [`TITLE_MAX_BYTES`].
pub(crate) fn title_in(rng: &mut ChaCha8Rng, spec: TitleSpec) -> String {
    let words = match spec.script {
        "ascii" | "punct" => &WORDS[..124],
        s => crate::script::words(s),
    };
    let sep = match spec.script {
        "punct" => "\u{2013}",
        s if !crate::script::spaced(s) => "",
        _ if spec.spaces => " ",
        _ => "-",
    };
    let want = spec.chars.max(1);
    let mut t = String::with_capacity(want * 2);
    let mut len = 0usize;
    while len < want {
        if !t.is_empty() {
            t.push_str(sep);
        }
        let w = pick(rng, words);
        if t.is_empty() {
            push_capitalised(&mut t, w);
        } else {
            t.push_str(w);
        }
        len = t.chars().count();
    }
    let mut out: String = t.chars().take(want).collect();
    while out.len() > TITLE_MAX_BYTES {
        out.pop();
    }
    let trimmed = out.trim_end_matches([' ', '-', '\u{2013}']).len();
    if trimmed > 0 {
        out.truncate(trimmed);
    }
    if spec.script == "punct" && out.is_ascii() {
        // Too short to reach a separator: the dash ends it instead.
        out.pop();
        out.push('\u{2013}');
    }
    if spec.spaces && !out.contains(' ') && out.chars().count() >= 3 {
        // One word filled it: two words fit only if the space is made inside it.
        let at = out
            .char_indices()
            .nth(out.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        out.replace_range(
            at..at + out[at..].chars().next().map_or(0, char::len_utf8),
            " ",
        );
    }
    out
}

/// A folder name: one or two capitalised words.
pub(crate) fn folder_name(rng: &mut ChaCha8Rng) -> String {
    let mut t = String::new();
    push_capitalised(&mut t, noun(rng, false));
    if chance(rng, 0.4) {
        t.push(' ');
        t.push_str(noun(rng, false));
    }
    t
}

/// A sentence of 6-16 words ending in a period.
pub(crate) fn sentence(rng: &mut ChaCha8Rng, out: &mut String, non_ascii: f64) {
    let n = 6 + below(rng, 11);
    for i in 0..n {
        let w = word(rng, non_ascii);
        if i == 0 {
            push_capitalised(out, w);
        } else {
            out.push(' ');
            out.push_str(w);
        }
    }
    out.push('.');
}

/// A paragraph of 1-5 sentences followed by a blank line.
pub(crate) fn paragraph(rng: &mut ChaCha8Rng, out: &mut String, non_ascii: f64) {
    let n = 1 + below(rng, 5);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        sentence(rng, out, non_ascii);
    }
    out.push_str("\n\n");
}

/// A bullet list of 2-6 items; task items (`- [ ]`, `- [x]`) when `tasks`.
pub(crate) fn list(rng: &mut ChaCha8Rng, out: &mut String, non_ascii: f64, tasks: bool) {
    let n = 2 + below(rng, 5);
    let numbered = !tasks && chance(rng, 0.25);
    for i in 0..n {
        if tasks {
            out.push_str(if chance(rng, 0.4) { "- [x] " } else { "- [ ] " });
        } else if numbered {
            out.push_str(&format!("{}. ", i + 1));
        } else {
            out.push_str("- ");
        }
        let words = 2 + below(rng, 7);
        for j in 0..words {
            if j > 0 {
                out.push(' ');
            }
            out.push_str(word(rng, non_ascii));
        }
        out.push('\n');
    }
    out.push('\n');
}

/// A fenced code block with a language tag.
pub(crate) fn code_block(rng: &mut ChaCha8Rng, out: &mut String) {
    let (lang, lines) = pick(rng, CODE);
    out.push_str("```");
    out.push_str(lang);
    out.push('\n');
    for _ in 0..1 + below(rng, 3) {
        out.push_str(pick(rng, lines));
        out.push('\n');
    }
    out.push_str("```\n\n");
}

/// A heading text of 1-4 words (unique within a note when `n` is appended by the caller).
pub(crate) fn heading_text(rng: &mut ChaCha8Rng, non_ascii: f64) -> String {
    let mut t = String::new();
    for i in 0..1 + below(rng, 4) {
        let w = word(rng, non_ascii);
        if i == 0 {
            push_capitalised(&mut t, w);
        } else {
            t.push(' ');
            t.push_str(w);
        }
    }
    t
}

/// Percent-encodes a vault path for a Markdown link target (keeps unreserved and `/`).
pub(crate) fn percent_encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (the inverse of the generator's link encoding); `None` on a malformed escape or non-UTF-8 result.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_round_trip() {
        let p = "Ärger/Meeting notes 🚀.md";
        let e = percent_encode(p);
        assert!(!e.contains(' '));
        assert_eq!(percent_decode(&e).as_deref(), Some(p));
        assert_eq!(percent_decode("%ZZ"), None);
    }

    #[test]
    fn literals_are_nfc() {
        // NFD would show as a combining mark (U+0300-U+036F) after a base letter.
        for w in WORDS.iter().chain(NON_ASCII_WORDS) {
            assert!(
                !w.chars().any(|c| ('\u{300}'..='\u{36f}').contains(&c)),
                "{w}"
            );
        }
    }

    #[test]
    fn noun_ranges_hold_nouns() {
        assert_eq!(WORDS[123], "pattern");
        assert_eq!(NON_ASCII_WORDS[25], "한국어");
    }
}

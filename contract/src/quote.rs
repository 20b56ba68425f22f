//! Text a server supplied, made fit for an error line on a user's terminal: every protocol
//! and the harness put a server's ids, paths, positions and error bodies into their messages
//! through these functions, never raw.
//!
//! - **Escaped.** Control characters (C0, DEL, C1), the Unicode bidirectional controls and
//!   the line and paragraph separators are written as escapes: a newline as `\n`, ESC as
//!   `\x1b`, the others as `\xNN` or `\u{NNNN}`, and the backslash as `\\` so that an escape
//!   in the output always means one in the input. A server cannot set the terminal's title,
//!   clear its screen, colour a line or start a second one.
//! - **Clipped.** At most [`MAX_QUOTED_BYTES`] of escaped text, then the count of the input's
//!   bytes left out: a 30 MiB document id is one short line, and says how long it was.
//!
//! [`fn@line`] is the last guard on a whole error line (the CLI's `vaultbench: …`): the same
//! escapes and at most [`MAX_LINE_BYTES`]. [`duration`] rounds a duration for a message
//! (`35s`, not `34.999990897s`).
//!
//! Pure: strings in, strings out.

use std::fmt::Write as _;
use std::time::Duration;

/// How much escaped text one quoted value keeps.
pub const MAX_QUOTED_BYTES: usize = 200;
/// The longest error line the CLI prints, in bytes.
pub const MAX_LINE_BYTES: usize = 4096;

/// Whether `c` is written as an escape.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// How a string is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// In double quotes: `"` and `\` escaped too.
    Quoted,
    /// Free text: `\` escaped too, so an escape always means one.
    Text,
    /// A whole line whose server text is escaped already: control characters only.
    Line,
}

/// Appends `c` to `out`, escaped when it must be in `mode`.
fn push_escaped(out: &mut String, c: char, mode: Mode) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' if mode != Mode::Line => out.push_str("\\\\"),
        '"' if mode == Mode::Quoted => out.push_str("\\\""),
        c if needs_escape(c) && (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// `s` escaped, at most `max` bytes of output before the note of what was left out.
fn escape(s: &str, max: usize, mode: Mode) -> String {
    let quotes = mode == Mode::Quoted;
    let mut out = String::with_capacity(s.len().min(max) + 2);
    let mut one = String::new();
    for (i, c) in s.char_indices() {
        one.clear();
        push_escaped(&mut one, c, mode);
        if out.len() + one.len() > max {
            let left = s.len() - i;
            if quotes {
                return format!("\"{out}\"… ({left} more bytes)");
            }
            return format!("{out}… ({left} more bytes)");
        }
        out.push_str(&one);
    }
    if quotes { format!("\"{out}\"") } else { out }
}

/// A server's string as a double-quoted value for a message: escaped, and clipped after
/// [`MAX_QUOTED_BYTES`] with the count of bytes left out (`"h:abc"`, `"aaaa…"… (31457080
/// more bytes)`).
pub fn quote(s: &str) -> String {
    escape(s, MAX_QUOTED_BYTES, Mode::Quoted)
}

/// [`quote`] keeping at most `max` bytes of escaped text.
pub fn quote_within(s: &str, max: usize) -> String {
    escape(s, max, Mode::Quoted)
}

/// [`text`] keeping at most `max` bytes of escaped text.
pub fn text_within(s: &str, max: usize) -> String {
    escape(s, max, Mode::Text)
}

/// A server's free text (an error body's line, an `error` field) for a message, without
/// quotes: escaped and clipped as [`quote`] does.
pub fn text(s: &str) -> String {
    escape(s, MAX_QUOTED_BYTES, Mode::Text)
}

/// [`text`] of bytes that may not be UTF-8 (invalid sequences become U+FFFD); only the
/// first bytes are looked at, the rest counted.
pub fn bytes(b: &[u8]) -> String {
    let head = &b[..b.len().min(MAX_QUOTED_BYTES * 4)];
    let s = String::from_utf8_lossy(head);
    let out = escape(&s, MAX_QUOTED_BYTES, Mode::Text);
    let rest = b.len() - head.len();
    if rest == 0 {
        out
    } else if out.ends_with("more bytes)") {
        // Already clipped inside the head: count the tail too.
        let cut = out.rfind("… (").unwrap_or(out.len());
        let left: usize = out[cut..]
            .trim_start_matches("… (")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        format!("{}… ({} more bytes)", &out[..cut], left + rest)
    } else {
        format!("{out}… ({rest} more bytes)")
    }
}

/// A whole error line, the last guard before a terminal: every control character escaped
/// (so it is one line), at most [`MAX_LINE_BYTES`] bytes with the note of what was left out.
/// A backslash is left as it is: the server's text in the line was quoted already, and its
/// escapes are not escaped twice.
pub fn line(s: &str) -> String {
    // The note takes at most 40 bytes.
    escape(s, MAX_LINE_BYTES - 40, Mode::Line)
}

/// A duration for a message, rounded: to the second from one second up (`35s`, `2m 5s`),
/// to the millisecond below (`250ms`).
pub fn duration(d: Duration) -> String {
    let rounded = if d >= Duration::from_secs(1) {
        Duration::from_secs(d.as_secs() + u64::from(d.subsec_millis() >= 500))
    } else {
        Duration::from_millis(
            (d.as_micros() as u64)
                .div_ceil(1000)
                .min(999)
                .max(u64::from(!d.is_zero())),
        )
    };
    humantime::format_duration(rounded).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escapes_and_nothing_under_0x20_survives() {
        let hostile = "not_found\nFAKE: pull finished, 0 errors\x1b]0;title\x07\x1b[2J\x1b[32mpull ok\r\u{202e}\u{85}\\";
        for out in [
            quote(hostile),
            text(hostile),
            line(hostile),
            bytes(hostile.as_bytes()),
        ] {
            assert!(out.bytes().all(|b| b >= 0x20 && b != 0x7f), "{out:?}");
            assert!(
                !out.contains('\u{202e}') && !out.contains('\u{85}'),
                "{out:?}"
            );
            assert!(out.contains("not_found\\nFAKE"), "{out}");
            assert!(out.contains("\\x1b]0;title\\x07\\x1b[2J"), "{out}");
            assert!(out.contains("\\r\\u{202e}\\u{0085}"), "{out}");
        }
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
        assert_eq!(text("a\\x1b"), "a\\\\x1b");
        assert_eq!(
            line(&text("\x1b")),
            "\\x1b",
            "escapes are not escaped twice"
        );
        assert_eq!(text("a\"b"), "a\"b");
        assert_eq!(quote("h:abc"), "\"h:abc\"");
        assert_eq!(text("é漢字🙂"), "é漢字🙂");
    }

    #[test]
    fn long_text_is_clipped_with_the_count_left_out() {
        let id = "x".repeat(30 << 20);
        let q = quote(&id);
        assert_eq!(
            q.len(),
            MAX_QUOTED_BYTES + 2 + "… (31457080 more bytes)".len()
        );
        assert!(q.ends_with("\"… (31457080 more bytes)"), "{}", &q[190..]);
        let b = bytes(id.as_bytes());
        assert!(b.ends_with("… (31457080 more bytes)"), "{}", &b[190..]);
        assert!(b.len() < 300);
        // A clip never splits a character or an escape.
        let s = "é\n".repeat(500);
        let t = text(&s);
        assert!(t.len() <= MAX_QUOTED_BYTES + 30);
        assert!(t.starts_with("é\\né\\n"));
        let l = line(&"\x1b".repeat(100_000));
        assert!(l.len() <= MAX_LINE_BYTES, "{}", l.len());
        assert!(l.ends_with("more bytes)"));
        assert_eq!(bytes(b"\xff\xfeok"), "\u{fffd}\u{fffd}ok");
        assert_eq!(bytes(&[b'a'; 900]).len(), 200 + "… (700 more bytes)".len());
    }

    #[test]
    fn durations_are_rounded() {
        assert_eq!(duration(Duration::from_nanos(34_999_990_897)), "35s");
        assert_eq!(duration(Duration::from_secs(125)), "2m 5s");
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
        assert_eq!(duration(Duration::from_nanos(1)), "1ms");
        assert_eq!(duration(Duration::ZERO), "0s");
        assert_eq!(duration(Duration::from_secs(3600)), "1h");
    }
}

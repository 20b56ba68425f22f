//! Renders one Markdown note: frontmatter, headings, paragraphs, lists, tasks, code blocks,
//! non-ASCII text, links (wiki or Markdown, same-note, placeholder, skewed to index notes)
//! and embeds, sized to the plan's log-normal target.

use std::fmt::Write as _;

use rand_chacha::ChaCha8Rng;

use crate::plan::{NoteKind, Plan};
use crate::profile::{Fanout, LinkStyle, Profile};
use crate::rng::{Purpose, below, between, chance, date, geometric, pick, stream};
use crate::text;

const FM_TYPES: &[&str] = &["note", "meeting", "reference", "journal", "project"];
const FM_STATUS: &[&str] = &["draft", "active", "done", "archived"];

/// The bytes of note `i` (a duplicate repeats its leader's bytes).
pub(crate) fn render(p: &Profile, plan: &Plan, seed: u64, i: u32) -> Vec<u8> {
    let leader = plan.notes[i as usize].dup_of.unwrap_or(i);
    let note = &plan.notes[leader as usize];
    if note.kind == NoteKind::Empty {
        return Vec::new();
    }
    let mut rng = stream(seed, Purpose::NoteBody, leader);
    let mut out = String::with_capacity(note.size as usize + 256);
    let full_size = note.size as usize;
    // A heavy note is ~1.5 KB of text followed by its pasted image.
    let target = if note.kind == NoteKind::Heavy {
        full_size.min(1500)
    } else {
        full_size
    };
    let non_ascii = if chance(&mut rng, p.non_ascii_share) {
        0.12
    } else {
        0.0
    };

    if chance(&mut rng, p.frontmatter_share) {
        frontmatter(&mut rng, &mut out, note.title());
    }
    if chance(&mut rng, 0.5) {
        let _ = write!(out, "# {}\n\n", note.title());
    }

    // Headings: real vaults average 3.5 a note at ~1.9 KB, so about one per 550 bytes.
    let n_headings = (target / 550).clamp(usize::from(target > 150), 40);
    let mut headings: Vec<String> = Vec::with_capacity(n_headings);
    for _ in 0..n_headings {
        let mut h = text::heading_text(&mut rng, non_ascii);
        if headings.contains(&h) {
            let _ = write!(h, " {}", headings.len() + 1);
        }
        headings.push(h);
    }

    let n_links = match p.fanout {
        Fanout::Fixed(n) => n,
        Fanout::Geometric(mean) => geometric(&mut rng, mean, 60),
    };
    let mut links: Vec<String> = (0..n_links)
        .map(|_| link(p, plan, &mut rng, leader, &headings))
        .collect();
    links.reverse(); // popped in order

    // Tasks are rare (real vaults: at most 3 % of notes hold any).
    let mut tasks = chance(&mut rng, 0.03);
    let mut next_heading = 0;
    loop {
        let pending = next_heading < headings.len() || !links.is_empty() || tasks;
        let remaining = target.saturating_sub(out.len());
        if !pending && remaining <= 1200 {
            if remaining >= 2 {
                last_paragraph(&mut rng, &mut out, remaining, non_ascii);
            }
            break;
        }
        // Headings sit at even offsets through the note, the first at the top.
        if next_heading < headings.len() && out.len() >= next_heading * target / headings.len() {
            let _ = write!(out, "## {}\n\n", headings[next_heading]);
            next_heading += 1;
        }
        let roll = below(&mut rng, 100);
        if tasks && (roll < 15 || remaining < 200) {
            text::list(&mut rng, &mut out, non_ascii, true);
            tasks = false;
        } else if roll < 12 && remaining > 300 {
            text::code_block(&mut rng, &mut out);
        } else if roll < 30 && remaining > 200 {
            text::list(&mut rng, &mut out, non_ascii, false);
        } else if roll < 34 && remaining > 200 {
            out.push_str("> ");
            text::sentence(&mut rng, &mut out, non_ascii);
            out.push_str("\n\n");
        } else if remaining < 200 && next_heading == headings.len() && !links.is_empty() {
            // Out of room: the remaining links go on one line.
            out.push_str("Related: ");
            let mut first = true;
            while let Some(l) = links.pop() {
                if !first {
                    out.push_str(", ");
                }
                first = false;
                out.push_str(&l);
            }
            out.push_str("\n\n");
        } else {
            text::sentence(&mut rng, &mut out, non_ascii);
            if let Some(l) = links.pop() {
                out.push_str(" See ");
                out.push_str(&l);
                out.push('.');
            }
            out.push(' ');
            text::paragraph(&mut rng, &mut out, non_ascii);
        }
    }
    if note.kind == NoteKind::Heavy {
        pasted_image(&mut rng, &mut out, full_size);
    }
    let mut bytes = out.into_bytes();
    embeds(p, plan, seed, leader, &mut bytes);
    bytes
}

/// Cuts a paragraph to land the note on exactly `remaining` more bytes (ending in `\n`).
fn last_paragraph(rng: &mut ChaCha8Rng, out: &mut String, remaining: usize, non_ascii: f64) {
    let mut para = String::with_capacity(remaining + 128);
    while para.len() < remaining {
        if !para.is_empty() {
            para.push(' ');
        }
        text::sentence(rng, &mut para, non_ascii);
    }
    let mut cut = remaining - 1;
    while !para.is_char_boundary(cut) {
        cut -= 1;
    }
    para.truncate(cut);
    let trimmed = para.trim_end().len();
    para.truncate(trimmed);
    out.push_str(&para);
    out.push('\n');
}

fn frontmatter(rng: &mut ChaCha8Rng, out: &mut String, title: &str) {
    out.push_str("---\n");
    // docs/src/vaults/real-vaults.md: ~3 keys a note, commonly tags, created/date, updated, aliases, title...
    let created = below(rng, 2500) as u32;
    let keys = [0.7, 0.75, 0.3, 0.2, 0.15, 0.25, 0.1, 0.2];
    if chance(rng, keys[0]) {
        out.push_str("tags:\n");
        for _ in 0..1 + below(rng, 3) {
            let _ = writeln!(out, "  - {}", pick(rng, &text::WORDS[..124]));
        }
    }
    if chance(rng, keys[1]) {
        let _ = writeln!(out, "created: {}", date(created));
    }
    if chance(rng, keys[2]) {
        let _ = writeln!(out, "updated: {}", date(created + below(rng, 400) as u32));
    }
    if chance(rng, keys[3]) {
        let _ = writeln!(out, "aliases: [\"{}\"]", text::heading_text(rng, 0.0));
    }
    if chance(rng, keys[4]) {
        let _ = writeln!(out, "title: \"{title}\"");
    }
    if chance(rng, keys[5]) {
        let _ = writeln!(out, "type: {}", pick(rng, FM_TYPES));
    }
    if chance(rng, keys[6]) {
        let _ = writeln!(
            out,
            "source: https://example.org/{}/{}",
            pick(rng, text::WORDS),
            below(rng, 100_000)
        );
    }
    if chance(rng, keys[7]) {
        let _ = writeln!(out, "status: {}", pick(rng, FM_STATUS));
    }
    out.push_str("---\n\n");
}

/// One link from note `from`: same-note heading, placeholder, or to another note.
fn link(p: &Profile, plan: &Plan, rng: &mut ChaCha8Rng, from: u32, headings: &[String]) -> String {
    let u = crate::rng::unit(rng);
    if u < p.placeholder_share {
        let mut t = text::title(rng, p.non_ascii_share);
        while plan.has_title(&t) {
            t.push_str(" (to write)");
        }
        return match p.link_style {
            LinkStyle::Wiki => format!("[[{t}]]"),
            LinkStyle::Markdown => format!("[{t}]({}.md)", text::percent_encode(&t)),
        };
    }
    if u < p.placeholder_share + p.same_note_share && !headings.is_empty() {
        let h = &headings[below(rng, headings.len())];
        return match p.link_style {
            LinkStyle::Wiki => format!("[[#{h}]]"),
            LinkStyle::Markdown => format!("[{h}](#{})", text::percent_encode(h)),
        };
    }
    let n = plan.notes.len();
    let mut to = if !plan.hubs.is_empty() && chance(rng, p.hub_share) {
        pick(rng, &plan.hubs) as usize
    } else {
        below(rng, n)
    };
    if to == from as usize && n > 1 {
        to = (to + 1) % n;
    }
    let target = &plan.notes[to];
    match p.link_style {
        LinkStyle::Wiki if chance(rng, 0.15) => {
            format!("[[{}|{}]]", target.title(), text::heading_text(rng, 0.0))
        }
        LinkStyle::Wiki => format!("[[{}]]", target.title()),
        LinkStyle::Markdown => format!(
            "[{}]({})",
            target.title(),
            text::percent_encode(&target.path)
        ),
    }
}

/// A pasted base64 PNG (`![](data:image/png;base64,...)`), the real-vault heavy tail.
fn pasted_image(rng: &mut ChaCha8Rng, out: &mut String, target: usize) {
    let room = target.saturating_sub(out.len() + 40);
    let png = crate::binary::png_of_size(rng, (room / 4 * 3).max(1024));
    out.push_str("![pasted](data:image/png;base64,");
    crate::binary::base64(&png, out);
    out.push_str(")\n");
}

/// Appends the note's embeds (its tiny PNG, or image attachments) as trailing lines. They
/// come from their own stream so the note text above is the same with or without them.
fn embeds(p: &Profile, plan: &Plan, seed: u64, i: u32, out: &mut Vec<u8>) {
    let mut targets: Vec<&str> = Vec::new();
    if p.tiny_png_per_note {
        targets.push(&plan.attachments[i as usize].path);
    }
    if !plan.images.is_empty() && p.embeds_per_note > 0.0 {
        let mut rng = stream(seed, Purpose::Embeds, i);
        for _ in 0..geometric(&mut rng, p.embeds_per_note, 8) {
            let a = &plan.attachments[pick(&mut rng, &plan.images) as usize];
            targets.push(&a.path);
        }
    }
    for path in targets {
        let line = match p.link_style {
            LinkStyle::Wiki => format!("\n![[{}]]\n", path.rsplit('/').next().unwrap_or(path)),
            LinkStyle::Markdown => format!("\n![]({})\n", text::percent_encode(path)),
        };
        out.extend_from_slice(line.as_bytes());
    }
}

/// A created note for the edit stream: a short note with a heading and a paragraph.
pub(crate) fn small_note(rng: &mut ChaCha8Rng, title: &str) -> String {
    let mut out = String::new();
    let _ = write!(out, "# {title}\n\n");
    for _ in 0..between(rng, 1, 3) {
        text::paragraph(rng, &mut out, 0.0);
    }
    out
}

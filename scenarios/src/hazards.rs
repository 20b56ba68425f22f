//! Files beside the notes: a `.obsidian/` config folder and the sync hazards seen in real
//! vaults (docs/src/vaults/real-vaults.md "Names and sync hazards"): 255-byte names, a case-only collision,
//! one basename in 61 folders, NFC and NFD spellings, spaces and emoji, 0-byte notes, a
//! 500 KB note and a 4 MiB+ attachment. A twin asks for a count of names in each class:
//! the first is the example above, the others numbered variants of it.

use std::fmt::Write as _;

use crate::binary::png_of_size;
use crate::profile::{HazardNames, Profile};
use crate::rng::{Purpose, below, log_normal, stream};
use crate::text;

/// The case-only pair (docs/src/vaults/real-vaults.md: `Notes/MAAS.md` beside `Notes/MaaS.md`).
pub const CASE_PAIR: [&str; 2] = ["Wiki/MAAS.md", "Wiki/MaaS.md"];
/// The same name in NFC (`é` = U+00E9, `è` = U+00E8) and NFD (`e` + U+0301, `e` + U+0300).
pub const NORMALISATION_PAIR: [&str; 2] = [
    "Wiki/Caf\u{e9} cr\u{e8}me.md",
    "Wiki/Cafe\u{301} cre\u{300}me.md",
];
/// Real vaults' largest notes reach 560 KB (docs/src/vaults/real-vaults.md); 500 KB sits inside.
const BIG_NOTE_BYTES: usize = 500_000;
/// docs/src/vaults/real-vaults.md: a few attachments >= 4 MiB in half of the vaults.
const BIG_ATTACHMENT_BYTES: usize = 4 * 1024 * 1024 + 512 * 1024;

const PLUGINS: &[&str] = &[
    "obsidian-excalidraw-plugin",
    "dataview",
    "obsidian-git",
    "templater-obsidian",
    "calendar",
    "omnisearch",
    "obsidian-tasks-plugin",
    "quickadd",
];
const CORE: &[&str] = &[
    "app.json",
    "appearance.json",
    "core-plugins.json",
    "community-plugins.json",
    "hotkeys.json",
    "workspace.json",
    "graph.json",
];
const EMOJI_NAMES: &[&str] = &[
    "\u{1f4da} Reading/Books I loved \u{2764}\u{fe0f}.md",
    "Wiki/\u{1f680} Launch plan 2024.md",
    "Wiki/trailing space .md",
    "Wiki/multiple   spaces inside.md",
    "Wiki/Meeting 2024-03-01 \u{2705} done.md",
];

/// What each of [`EMOJI_NAMES`] is an example of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameClass {
    Emoji,
    TrailingSpace,
    MultipleSpaces,
}
const EMOJI_CLASSES: [NameClass; 5] = [
    NameClass::Emoji,
    NameClass::Emoji,
    NameClass::TrailingSpace,
    NameClass::MultipleSpaces,
    NameClass::Emoji,
];

#[derive(Clone, Copy, Debug)]
pub(crate) enum Extra {
    Core(usize),
    PluginManifest(usize),
    PluginData(usize),
    PluginCache(u32),
    PluginJs(u64),
    /// The `k`-th 255-byte name (0: [`long_name`]).
    LongName(u32),
    /// Case group `group`, spelling `spelling` (0 `MAAS`, 1 `MaaS`, 2 `maas`).
    Case(u32, u8),
    SameBasename(u32),
    /// NFC/NFD pair `pair`, spelling 0 (NFC) or 1 (NFD).
    Normalisation(u32, u8),
    /// The `k`-th of [`EMOJI_NAMES`].
    Emoji(usize),
    /// The `k`-th further name of a class beyond its examples in [`EMOJI_NAMES`].
    MoreNames(NameClass, u32),
    Empty(u32),
    BigNote,
    BigAttachment,
}

/// The extra files of a profile, in generation order.
pub(crate) fn extras(p: &Profile) -> Vec<Extra> {
    let mut out = Vec::new();
    if let Some(cfg) = p.obsidian {
        let mut json = Vec::new();
        json.extend((0..CORE.len()).map(Extra::Core));
        for k in 0..PLUGINS.len() {
            json.push(Extra::PluginManifest(k));
            json.push(Extra::PluginData(k));
        }
        let cache = (cfg.json_files as usize).saturating_sub(json.len());
        json.extend((0..cache as u32).map(Extra::PluginCache));
        json.truncate(cfg.json_files as usize);
        out.extend(json);
        if cfg.plugin_js_bytes > 0 {
            out.push(Extra::PluginJs(cfg.plugin_js_bytes));
        }
    }
    let names = if p.hazards {
        Some(HazardNames::ALL)
    } else {
        p.hazard_names
    };
    if let Some(h) = names {
        out.extend((0..h.long_name).map(Extra::LongName));
        // Pairs; an odd count's last group is a triple, and a lone name needs a partner.
        let case = if h.case_collision == 1 {
            2
        } else {
            h.case_collision
        };
        for g in 0..case / 2 {
            out.push(Extra::Case(g, 0));
            out.push(Extra::Case(g, 1));
            if case % 2 == 1 && g + 1 == case / 2 {
                out.push(Extra::Case(g, 2));
            }
        }
        out.extend((0..h.same_basename).map(Extra::SameBasename));
        for k in 0..h.nfd {
            out.push(Extra::Normalisation(k, 0));
            out.push(Extra::Normalisation(k, 1));
        }
        // The examples first, in their fixed order, then variants for the counts beyond them.
        let wanted = |class: &NameClass| match class {
            NameClass::Emoji => h.emoji,
            NameClass::TrailingSpace => h.trailing_space,
            NameClass::MultipleSpaces => h.multiple_spaces,
        };
        let mut used = [0u32; 3];
        for (k, class) in EMOJI_CLASSES.iter().enumerate() {
            if used[*class as usize] < wanted(class) {
                used[*class as usize] += 1;
                out.push(Extra::Emoji(k));
            }
        }
        for class in [
            NameClass::Emoji,
            NameClass::TrailingSpace,
            NameClass::MultipleSpaces,
        ] {
            let more = wanted(&class).saturating_sub(used[class as usize]);
            out.extend((0..more).map(|k| Extra::MoreNames(class, k)));
        }
    }
    if p.hazards {
        out.extend((0..3).map(Extra::Empty));
        out.push(Extra::BigNote);
        out.push(Extra::BigAttachment);
    }
    out
}

/// The notes, and the note folders (closed under parents) at depth 1, 2, ..., that hazard
/// names `h` add to a vault: a twin asks the planner for that many fewer, so its totals match
/// what was measured.
pub(crate) fn name_footprint(h: HazardNames) -> (u64, Vec<u64>) {
    let p = Profile {
        hazard_names: Some(h),
        ..crate::profile::base("footprint", "", 0)
    };
    let mut notes = 0;
    let mut folders = std::collections::BTreeSet::new();
    for e in extras(&p) {
        let path = e.path();
        notes += u64::from(path.ends_with(".md"));
        let mut d = path.as_str();
        while let Some((parent, _)) = d.rsplit_once('/') {
            folders.insert(parent.to_owned());
            d = parent;
        }
    }
    let mut by_depth = Vec::new();
    for f in &folders {
        let depth = f.matches('/').count();
        if by_depth.len() <= depth {
            by_depth.resize(depth + 1, 0);
        }
        by_depth[depth] += 1;
    }
    (notes, by_depth)
}

/// The names (file stems) of the hazard-named notes `h` adds: a twin takes them out of the
/// measured names before it draws the planner's titles, so they are not counted twice.
pub(crate) fn name_stems(h: HazardNames) -> Vec<String> {
    let p = Profile {
        hazard_names: Some(h),
        ..crate::profile::base("footprint", "", 0)
    };
    extras(&p)
        .iter()
        .filter(|e| e.is_name())
        .filter_map(|e| {
            let path = e.path();
            let base = path.rsplit('/').next().unwrap_or(&path);
            base.strip_suffix(".md").map(str::to_owned)
        })
        .collect()
}

/// A clipped-article name whose file name is exactly 255 bytes (the usual filesystem
/// limit), with a multi-byte dash so a byte-counting bug cuts a character in half.
pub fn long_name() -> String {
    long_name_from("How we rebuilt our sync engine \u{2014} lessons from")
}

/// The `k`-th 255-byte name: [`long_name`], then variants with their number up front.
fn long_name_k(k: u32) -> String {
    if k == 0 {
        long_name()
    } else {
        long_name_from(&format!(
            "Clipped article {} \u{2014} how we rebuilt our sync engine",
            k + 1
        ))
    }
}

fn long_name_from(opening: &str) -> String {
    let mut stem = String::from(opening);
    let mut i = 0;
    while stem.len() < 252 {
        stem.push(' ');
        stem.push_str(text::WORDS[i % 124]);
        i += 7;
    }
    let mut cut = 252;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    stem.truncate(cut);
    while stem.len() < 252 {
        stem.push('x');
    }
    format!("Clippings/{stem}.md")
}

/// The spellings of a case group.
const CASE_SPELLINGS: [&str; 3] = ["MAAS", "MaaS", "maas"];

/// The title of case group `g` in spelling `s`: `MAAS`, `MaaS` (the example), then `MAAS 2`...
fn case_title(g: u32, s: u8) -> String {
    let word = CASE_SPELLINGS[usize::from(s).min(2)];
    if g == 0 {
        word.to_owned()
    } else {
        format!("{word} {}", g + 1)
    }
}

impl Extra {
    pub(crate) fn path(&self) -> String {
        match *self {
            Extra::Core(k) => format!(".obsidian/{}", CORE[k]),
            Extra::PluginManifest(k) => format!(".obsidian/plugins/{}/manifest.json", PLUGINS[k]),
            Extra::PluginData(k) => format!(".obsidian/plugins/{}/data.json", PLUGINS[k]),
            Extra::PluginCache(k) => format!(".obsidian/plugins/omnisearch/cache/{k:04}.json"),
            Extra::PluginJs(_) => format!(".obsidian/plugins/{}/main.js", PLUGINS[0]),
            Extra::LongName(k) => long_name_k(k),
            Extra::Case(0, s) if s < 2 => CASE_PAIR[usize::from(s)].to_owned(),
            Extra::Case(g, s) => format!("Wiki/{}.md", case_title(g, s)),
            Extra::SameBasename(k) => format!("Areas/Area {:02}/Index.md", k + 1),
            Extra::Normalisation(0, s) => NORMALISATION_PAIR[usize::from(s).min(1)].to_owned(),
            Extra::Normalisation(k, s) => {
                let pair = NORMALISATION_PAIR[usize::from(s).min(1)];
                format!("{} {}.md", &pair[..pair.len() - 3], k + 1)
            }
            Extra::Emoji(k) => EMOJI_NAMES[k].to_owned(),
            Extra::MoreNames(class, k) => match class {
                NameClass::Emoji => format!("Wiki/\u{1f4a1} Idea {:04}.md", k + 1),
                NameClass::TrailingSpace => format!("Wiki/trailing space {} .md", k + 1),
                NameClass::MultipleSpaces => format!("Wiki/multiple   spaces {}.md", k + 1),
            },
            Extra::Empty(k) => match k {
                0 => "Wiki/Untitled.md".to_owned(),
                _ => format!("Wiki/Untitled {k}.md"),
            },
            Extra::BigNote => "Wiki/Whiteboard drawing.md".to_owned(),
            Extra::BigAttachment => format!("{}/Scan 2024-03-01.png", crate::plan::ATTACHMENT_DIR),
        }
    }

    /// True for a hazard-named note (the names a twin counts), false for config and the
    /// `hazards` profile's empty, big and attachment files.
    pub(crate) fn is_name(&self) -> bool {
        matches!(
            self,
            Extra::LongName(_)
                | Extra::Case(..)
                | Extra::SameBasename(_)
                | Extra::Normalisation(..)
                | Extra::Emoji(_)
                | Extra::MoreNames(..)
        )
    }

    /// A twin's body for a hazard-named note: plain ASCII paragraphs (no frontmatter, links
    /// or embeds) cut to a log-normal size with the planner's median and sigma, so the
    /// hazard names do not pull the twin's note sizes away from the fitted ones.
    pub(crate) fn twin_body(&self, seed: u64, index: u32, median: f64, sigma: f64) -> Vec<u8> {
        let mut rng = stream(seed, Purpose::Hazards, index);
        let size = log_normal(&mut rng, median, sigma)
            .clamp(40.0, f64::from(crate::plan::NOTE_MAX_BYTES)) as usize;
        let mut s = String::with_capacity(size + 600);
        while s.len() < size {
            text::paragraph(&mut rng, &mut s, 0.0);
        }
        s.truncate(size - 1);
        let trimmed = s.trim_end().len();
        s.truncate(trimmed);
        s.push('\n');
        s.into_bytes()
    }

    /// The file's bytes; `index` picks this file's random stream.
    pub(crate) fn render(&self, seed: u64, index: u32) -> Vec<u8> {
        let mut rng = stream(seed, Purpose::Hazards, index);
        let mut s = String::new();
        match *self {
            Extra::Core(k) => {
                let _ = match CORE[k] {
                    "community-plugins.json" => write!(s, "{}", json_list(PLUGINS)),
                    "core-plugins.json" => write!(
                        s,
                        "{}",
                        json_list(&[
                            "file-explorer",
                            "global-search",
                            "switcher",
                            "graph",
                            "backlink",
                            "daily-notes",
                            "templates"
                        ])
                    ),
                    "workspace.json" => write!(
                        s,
                        "{{\n  \"main\": {{\"id\": \"{:016x}\", \"type\": \"split\"}},\n  \"lastOpenFiles\": [\"{}.md\"]\n}}\n",
                        below(&mut rng, usize::MAX),
                        text::title(&mut rng, 0.0)
                    ),
                    _ => write!(
                        s,
                        "{{\n  \"alwaysUpdateLinks\": true,\n  \"attachmentFolderPath\": \"attachments\",\n  \"fontSize\": {}\n}}\n",
                        12 + below(&mut rng, 8)
                    ),
                };
            }
            Extra::PluginManifest(k) => {
                let _ = write!(
                    s,
                    "{{\n  \"id\": \"{0}\",\n  \"name\": \"{0}\",\n  \"version\": \"{1}.{2}.{3}\",\n  \"minAppVersion\": \"1.4.0\",\n  \"isDesktopOnly\": false\n}}\n",
                    PLUGINS[k],
                    below(&mut rng, 3),
                    below(&mut rng, 20),
                    below(&mut rng, 10)
                );
            }
            Extra::PluginData(_) | Extra::PluginCache(_) => {
                s.push_str("{\n");
                let n = 2 + below(&mut rng, 30);
                for i in 0..n {
                    let _ = writeln!(
                        s,
                        "  \"{}-{i}\": {{\"mtime\": {}, \"size\": {}}}{}",
                        text::title(&mut rng, 0.0),
                        1_700_000_000_000u64 + below(&mut rng, 100_000_000) as u64,
                        below(&mut rng, 100_000),
                        if i + 1 < n { "," } else { "" }
                    );
                }
                s.push_str("}\n");
            }
            Extra::PluginJs(len) => return plugin_js(&mut rng, len as usize),
            Extra::LongName(_) => {
                s.push_str("---\nsource: https://example.org/blog/sync-engine\nclipped: 2024-02-11\n---\n\n");
                for _ in 0..6 {
                    text::paragraph(&mut rng, &mut s, 0.0);
                }
            }
            Extra::Case(g, spelling) => {
                let _ = write!(s, "# {}\n\n", case_title(g, spelling));
                text::paragraph(&mut rng, &mut s, 0.0);
            }
            Extra::SameBasename(k) => {
                let _ = write!(s, "# Area {:02}\n\n", k + 1);
                text::list(&mut rng, &mut s, 0.0, false);
            }
            Extra::Normalisation(..) | Extra::Emoji(_) | Extra::MoreNames(..) => {
                s.push_str("# Caf\u{e9} na\u{ef}ve \u{1f680}\n\n");
                text::paragraph(&mut rng, &mut s, 0.5);
            }
            Extra::Empty(_) => {}
            Extra::BigNote => return big_note(&mut rng),
            Extra::BigAttachment => return png_of_size(&mut rng, BIG_ATTACHMENT_BYTES),
        }
        s.into_bytes()
    }
}

fn json_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("  \"{i}\"")).collect();
    format!("[\n{}\n]\n", quoted.join(",\n"))
}

/// Minified-looking plugin JavaScript of exactly `len` bytes.
fn plugin_js(rng: &mut rand_chacha::ChaCha8Rng, len: usize) -> Vec<u8> {
    let mut s = String::with_capacity(len + 200);
    s.push_str("\"use strict\";var __defProp=Object.defineProperty;\n");
    while s.len() < len {
        let _ = writeln!(
            s,
            "var {a}{n}=function(t,e){{return t.{b}(e*{n}+{m})}};{a}{n}.prototype.{c}=function(){{return this.{b}.length>{m}}};",
            a = text::WORDS[below(rng, 124)],
            b = text::WORDS[below(rng, 124)],
            c = text::WORDS[below(rng, 124)],
            n = below(rng, 100_000),
            m = below(rng, 1000)
        );
    }
    s.truncate(len);
    s.into_bytes()
}

/// An Excalidraw drawing stored as Markdown: a JSON scene of exactly 500,000 bytes.
fn big_note(rng: &mut rand_chacha::ChaCha8Rng) -> Vec<u8> {
    let mut s = String::from(
        "---\nexcalidraw-plugin: parsed\ntags: [excalidraw]\n---\n\n# Drawing\n```json\n{\"type\":\"excalidraw\",\"elements\":[\n",
    );
    let footer = "]}\n```\n";
    loop {
        let line = format!(
            "{{\"type\":\"line\",\"x\":{},\"y\":{},\"points\":[[0,0],[{},{}]],\"seed\":{}}},\n",
            below(rng, 4000),
            below(rng, 4000),
            below(rng, 300),
            below(rng, 300),
            below(rng, 1 << 30)
        );
        if s.len() + line.len() + footer.len() > BIG_NOTE_BYTES {
            break;
        }
        s.push_str(&line);
    }
    while s.len() + footer.len() < BIG_NOTE_BYTES {
        s.push(' ');
    }
    s.push_str(footer);
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;

    #[test]
    fn long_name_is_255_bytes() {
        let p = long_name();
        let base = p.rsplit('/').next().unwrap();
        assert_eq!(base.len(), 255);
        assert!(base.contains('\u{2014}'));
    }

    #[test]
    fn exact_sizes() {
        assert_eq!(Extra::BigNote.render(1, 0).len(), BIG_NOTE_BYTES);
        assert_eq!(Extra::PluginJs(12345).render(1, 0).len(), 12345);
        assert!(Extra::BigAttachment.render(1, 0).len() >= 4 * 1024 * 1024);
    }

    #[test]
    fn pairs_differ_only_by_case_and_normalisation() {
        assert_ne!(CASE_PAIR[0], CASE_PAIR[1]);
        assert_eq!(CASE_PAIR[0].to_lowercase(), CASE_PAIR[1].to_lowercase());
        assert_ne!(
            NORMALISATION_PAIR[0].as_bytes(),
            NORMALISATION_PAIR[1].as_bytes()
        );
        assert_eq!(
            NORMALISATION_PAIR[0].chars().count() + 2,
            NORMALISATION_PAIR[1].chars().count()
        );
    }

    #[test]
    fn counts_give_that_many_distinct_names() {
        let h = HazardNames {
            long_name: 4,
            case_collision: 7,
            nfd: 3,
            same_basename: 2,
            emoji: 9,
            trailing_space: 3,
            multiple_spaces: 2,
        };
        let p = Profile {
            hazard_names: Some(h),
            ..crate::profile::base("t", "", 0)
        };
        let ex = extras(&p);
        assert_eq!(ex.len() as u64, h.notes());
        let paths: std::collections::BTreeSet<String> = ex.iter().map(Extra::path).collect();
        assert_eq!(paths.len(), ex.len(), "paths are distinct");
        let long: Vec<&String> = paths
            .iter()
            .filter(|p| p.starts_with("Clippings/"))
            .collect();
        assert_eq!(long.len(), 4);
        assert!(long.iter().all(|p| p.len() == "Clippings/".len() + 255));
        // Two pairs and a triple: seven names, three lowercase spellings.
        let folded: std::collections::BTreeSet<String> = paths
            .iter()
            .filter(|p| p.to_lowercase().starts_with("wiki/maas"))
            .map(|p| p.to_lowercase())
            .collect();
        assert_eq!(folded.len(), 3);
    }

    #[test]
    fn hazards_profile_counts() {
        let p = profile("hazards").unwrap();
        let ex = extras(&p);
        assert_eq!(
            ex.iter()
                .filter(|e| matches!(
                    e,
                    Extra::Core(_)
                        | Extra::PluginManifest(_)
                        | Extra::PluginData(_)
                        | Extra::PluginCache(_)
                ))
                .count(),
            400
        );
        let paths: std::collections::BTreeSet<String> = ex.iter().map(Extra::path).collect();
        assert_eq!(paths.len(), ex.len(), "paths are distinct");
    }
}

//! A vault's measured shape (the profile file `vault measure` writes): counts, size
//! distributions, links, attachments, duplicate bodies and the hazard classes of its names,
//! and never a name or a byte of content.
//!
//! [`Measure`] takes a vault file by file (the harness walks the disk; a test feeds it the
//! generator's files) and [`Measure::finish`] turns what it saw into a [`Shape`]. Names live
//! in memory only while measuring: link resolution and case collisions need them. The one
//! piece of a name a shape holds is an attachment's extension, and only one from
//! [`KNOWN_EXTENSIONS`] (anything else is counted as `other`).
//!
//! Parsing is strict (unknown keys are errors) and bounded: every count and size has a
//! ceiling, so a shape file cannot ask the generator for an absurd vault.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::links::{LinkIndex, headings, links};

/// The `kind` of a shape file.
pub const KIND: &str = "vaultbench.vault-shape";
/// The shape format version this build writes and the newest it reads. Version 2 added
/// `[names.notes]` (notes' names by script, their lengths and spaces); a version 1 file,
/// which has none, still reads, and its twin draws titles as the built-in profiles do.
pub const FORMAT_VERSION: u32 = 2;

/// The longest note name the length quantiles may name, in characters.
pub const MAX_NAME_CHARS: u64 = 255;

/// The most notes (and attachments, and config files) a shape may hold.
pub const MAX_FILES: u64 = 1_000_000;
/// The largest note or attachment size a shape may name: 1 GiB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// The deepest folder a shape may name.
pub const MAX_DEPTH: u64 = 64;
/// The most folders one basename may appear in (the generator writes one file per folder).
pub const MAX_SAME_BASENAME: u64 = 10_000;

/// A note holding a pasted image (`data:` URL) or larger than the generator's normal notes
/// (`plan::NOTE_MAX_BYTES`) is a heavy one: it is left out of the size fit and counted apart.
const PASTED: &[u8] = b"](data:";
/// A name this long (bytes) or longer sits at the usual 255-byte filesystem limit.
const LONG_NAME_BYTES: usize = 240;

/// Attachment extensions a shape may spell; every other one is `other` (an unusual extension
/// could name its vault).
pub const KNOWN_EXTENSIONS: &[&str] = &[
    "avif",
    "bin",
    "bmp",
    "canvas",
    "csv",
    "docx",
    "excalidraw",
    "gif",
    "heic",
    "jpeg",
    "jpg",
    "json",
    "m4a",
    "mov",
    "mp3",
    "mp4",
    "ogg",
    "pdf",
    "png",
    "pptx",
    "svg",
    "txt",
    "wav",
    "webm",
    "webp",
    "xlsx",
    "zip",
];

/// A measured vault shape: one profile file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub kind: String,
    pub format_version: u32,
    pub notes: Notes,
    pub folders: Folders,
    pub links: Links,
    pub attachments: Attachments,
    pub config: Config,
    pub names: Names,
}

/// Markdown notes (`*.md` outside config folders).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    pub count: u64,
    /// 0-byte notes.
    pub empty: u64,
    /// Notes with a pasted `data:` image or over 400,000 bytes (left out of the size fit).
    pub heavy: u64,
    /// Size quantiles (bytes) of the other non-empty notes.
    pub size: Quantiles,
    /// Standard deviation of ln(size) of those notes (real vaults: 0.87-1.25).
    pub size_log_sigma: f64,
    /// The largest note, heavy ones included.
    pub size_max: u64,
    /// Share of non-empty notes that open with YAML frontmatter.
    pub frontmatter_share: f64,
    /// Share of non-empty notes holding non-ASCII text.
    pub non_ascii_share: f64,
    /// Non-empty notes whose bytes another note repeats, and the distinct bodies among them.
    pub duplicate_notes: u64,
    pub duplicate_groups: u64,
}

/// Size quantiles in bytes (nearest rank).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantiles {
    pub p10: u64,
    pub p25: u64,
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p99: u64,
}

/// Folders holding notes, closed under parents (the vault root not counted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Folders {
    pub count: u64,
    pub max_depth: u64,
    /// Folders at depth 1, 2, ... (`Top/Sub` is at depth 2).
    pub by_depth: Vec<u64>,
    /// Notes directly in the vault root.
    pub root_notes: u64,
    /// Share of notes in the fullest folder.
    pub dominant_share: f64,
}

/// Internal links of the notes (external `scheme:` URLs are not counted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Links {
    /// `[[...]]` links and `[text](path)` links, embeds not counted.
    pub wiki: u64,
    pub markdown: u64,
    /// Links per non-empty note: mean, median, p90, max.
    pub per_note_mean: f64,
    pub per_note_p50: u64,
    pub per_note_p90: u64,
    pub per_note_max: u64,
    /// Share of links to a heading of the same note (`[[#Heading]]`).
    pub same_note_share: f64,
    /// Share of links that resolve to no file.
    pub unresolved_share: f64,
    /// `![[...]]` and `![](...)` embeds per non-empty note.
    pub embeds_per_note: f64,
}

/// Files that are neither notes nor config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachments {
    pub count: u64,
    pub bytes: u64,
    /// Attachments over 8 MiB (the generator's largest image) and their median size.
    pub large: u64,
    pub large_median: u64,
    /// Size quantiles and ln-size sigma of the others.
    pub size: Quantiles,
    pub size_log_sigma: f64,
    /// Counts by lowercase extension (from [`KNOWN_EXTENSIONS`], else `other`; `none`
    /// for a name without one).
    pub extensions: BTreeMap<String, u64>,
}

/// Files under a top-level folder whose name starts with `.` (`.obsidian/`, `.trash/`): the
/// generator writes them as `.obsidian/` config, never as notes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub files: u64,
    pub bytes: u64,
    pub largest: u64,
}

/// Names (notes and attachments; config left out): the sync-hazard classes of `hazards.rs`
/// and how many names fall in each, and what walking the tree skipped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Names {
    /// File names of 240 bytes or more (the 255-byte limit).
    pub long_name: u64,
    /// Paths equal to another's but for letter case.
    pub case_collision: u64,
    /// Names holding a combining mark (an NFD spelling).
    pub nfd: u64,
    /// The most folders one file name appears in (0 when every name is unique).
    pub same_basename_folders: u64,
    pub emoji: u64,
    /// A name (or folder) ending in a space.
    pub trailing_space: u64,
    /// A name holding two spaces in a row.
    pub multiple_spaces: u64,
    pub spaces: u64,
    pub non_ascii: u64,
    /// Names that are not UTF-8 (measured as their lossy spelling).
    pub non_utf8: u64,
    /// Symbolic links and special files, never followed or read.
    pub skipped: u64,
    /// Notes' own names (their file stems, folders and extension aside): absent in a
    /// version 1 file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<NameStats>,
    /// Attachments' own names (their stems, without the extension), the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<NameStats>,
}

/// What a twin needs to write names like the vault's: their scripts, lengths and spaces
/// (`script.rs` says how a name's script is decided).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameStats {
    /// Names by script (`ascii`, `punct`, `latin`, `cyrillic`, ...; scripts with none left
    /// out).
    pub scripts: BTreeMap<String, u64>,
    /// Quantiles of a name's length in characters (Unicode scalar values).
    pub chars: Quantiles,
    /// Names holding a space.
    pub spaces: u64,
}

/// Why a shape file was refused. One line, naming the file and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error("shape file {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("shape file {origin}: {field} {message}")]
    Invalid {
        origin: String,
        field: String,
        message: String,
    },
}

impl Shape {
    /// Parses and validates a shape file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Shape, ShapeError> {
        let s: Shape = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|r| match key_at(text, r.start) {
                    Some(k) => format!(" (field {k}, line {})", line_of(text, r.start)),
                    None => format!(" (at line {})", line_of(text, r.start)),
                })
                .unwrap_or_default();
            ShapeError::Parse {
                origin: origin.to_owned(),
                message: e.message().trim_end().replace('\n', " ") + &at,
            }
        })?;
        s.validate()
            .map_err(|(field, message)| ShapeError::Invalid {
                origin: origin.to_owned(),
                field: field.to_owned(),
                message,
            })?;
        Ok(s)
    }

    /// The file's text (TOML, fields in a fixed order, maps sorted).
    pub fn to_toml(&self) -> String {
        // A shape is plain data: serialising it cannot fail.
        toml::to_string(self).unwrap_or_default()
    }

    fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.kind != KIND {
            return Err(("kind", format!("{:?} is not {KIND:?}", self.kind)));
        }
        if self.format_version == 0 {
            return Err(("format_version", "0 is not a vaultbench format".into()));
        }
        if self.format_version > FORMAT_VERSION {
            return Err((
                "format_version",
                format!(
                    "{} is newer than this build's {FORMAT_VERSION}: upgrade vaultbench",
                    self.format_version
                ),
            ));
        }
        let n = &self.notes;
        count("notes.count", n.count, MAX_FILES)?;
        count("notes.empty", n.empty, n.count)?;
        count("notes.heavy", n.heavy, n.count - n.empty)?;
        quantiles("notes.size", &n.size)?;
        count("notes.size_max", n.size_max, MAX_FILE_BYTES)?;
        sigma("notes.size_log_sigma", n.size_log_sigma)?;
        share("notes.frontmatter_share", n.frontmatter_share)?;
        share("notes.non_ascii_share", n.non_ascii_share)?;
        count(
            "notes.duplicate_notes",
            n.duplicate_notes,
            n.count - n.empty,
        )?;
        count(
            "notes.duplicate_groups",
            n.duplicate_groups,
            n.duplicate_notes / 2,
        )?;
        if n.duplicate_notes > 0 && n.duplicate_groups == 0 {
            return Err((
                "notes.duplicate_groups",
                "is 0 but notes.duplicate_notes is not".into(),
            ));
        }
        let f = &self.folders;
        count("folders.count", f.count, MAX_FILES)?;
        count("folders.max_depth", f.max_depth, MAX_DEPTH)?;
        if f.by_depth.len() as u64 != f.max_depth {
            return Err((
                "folders.by_depth",
                format!(
                    "has {} entries, not max_depth {}",
                    f.by_depth.len(),
                    f.max_depth
                ),
            ));
        }
        if f.by_depth.iter().sum::<u64>() != f.count {
            return Err((
                "folders.by_depth",
                "does not add up to folders.count".into(),
            ));
        }
        count("folders.root_notes", f.root_notes, n.count)?;
        share("folders.dominant_share", f.dominant_share)?;
        let l = &self.links;
        count("links.wiki", l.wiki, MAX_FILES * 1000)?;
        count("links.markdown", l.markdown, MAX_FILES * 1000)?;
        mean("links.per_note_mean", l.per_note_mean, 1000.0)?;
        count("links.per_note_p50", l.per_note_p50, 1_000_000)?;
        count("links.per_note_p90", l.per_note_p90, 1_000_000)?;
        count("links.per_note_max", l.per_note_max, 1_000_000)?;
        share("links.same_note_share", l.same_note_share)?;
        share("links.unresolved_share", l.unresolved_share)?;
        if l.same_note_share + l.unresolved_share > 1.0 + 1e-9 {
            return Err((
                "links.unresolved_share",
                "and links.same_note_share add up to more than 1".into(),
            ));
        }
        mean("links.embeds_per_note", l.embeds_per_note, 100.0)?;
        let a = &self.attachments;
        count("attachments.count", a.count, MAX_FILES)?;
        count("attachments.bytes", a.bytes, MAX_FILES * MAX_FILE_BYTES)?;
        count("attachments.large", a.large, a.count)?;
        count("attachments.large_median", a.large_median, MAX_FILE_BYTES)?;
        quantiles("attachments.size", &a.size)?;
        sigma("attachments.size_log_sigma", a.size_log_sigma)?;
        for (ext, &k) in &a.extensions {
            if !(KNOWN_EXTENSIONS.contains(&ext.as_str()) || ext == "other" || ext == "none") {
                return Err((
                    "attachments.extensions",
                    format!("names an unknown extension {ext:?}"),
                ));
            }
            count("attachments.extensions", k, a.count)?;
        }
        let c = &self.config;
        count("config.files", c.files, MAX_FILES)?;
        count("config.largest", c.largest, MAX_FILE_BYTES)?;
        count("config.bytes", c.bytes, MAX_FILES * MAX_FILE_BYTES)?;
        let names = &self.names;
        let all = n.count + a.count;
        for (field, v) in [
            ("names.long_name", names.long_name),
            ("names.case_collision", names.case_collision),
            ("names.nfd", names.nfd),
            ("names.emoji", names.emoji),
            ("names.trailing_space", names.trailing_space),
            ("names.multiple_spaces", names.multiple_spaces),
            ("names.spaces", names.spaces),
            ("names.non_ascii", names.non_ascii),
            ("names.non_utf8", names.non_utf8),
        ] {
            count(field, v, all)?;
        }
        count(
            "names.same_basename_folders",
            names.same_basename_folders,
            MAX_SAME_BASENAME,
        )?;
        count("names.skipped", names.skipped, MAX_FILES)?;
        name_stats("names.notes", names.notes.as_ref(), n.count)?;
        name_stats("names.attachments", names.attachments.as_ref(), a.count)?;
        Ok(())
    }
}

/// Checks `[names.notes]` or `[names.attachments]`: known scripts, at most `files` names,
/// lengths in order and within [`MAX_NAME_CHARS`]. The fields are named by `table`.
fn name_stats(
    table: &'static str,
    stats: Option<&NameStats>,
    files: u64,
) -> Result<(), (&'static str, String)> {
    let Some(m) = stats else { return Ok(()) };
    let (scripts, chars, spaces) = match table {
        "names.notes" => (
            "names.notes.scripts",
            "names.notes.chars",
            "names.notes.spaces",
        ),
        _ => (
            "names.attachments.scripts",
            "names.attachments.chars",
            "names.attachments.spaces",
        ),
    };
    let mut total = 0u64;
    for (script, &k) in &m.scripts {
        if !crate::script::SCRIPTS.contains(&script.as_str()) {
            return Err((
                scripts,
                format!(
                    "names an unknown script {script:?} (known: {})",
                    crate::script::SCRIPTS.join(", ")
                ),
            ));
        }
        total += k;
    }
    count(scripts, total, files)?;
    quantiles(chars, &m.chars)?;
    count(chars, m.chars.p99, MAX_NAME_CHARS)?;
    count(spaces, m.spaces, files)?;
    Ok(())
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted key whose value sits at `byte`: the `[table]` above it and the key on its line.
fn key_at(text: &str, byte: usize) -> Option<String> {
    let start = text.get(..byte)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    let table = text[..start].lines().rev().find_map(|l| {
        l.trim()
            .strip_prefix('[')?
            .strip_suffix(']')
            .map(str::to_owned)
    });
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_owned(),
    })
}

fn count(field: &'static str, v: u64, max: u64) -> Result<(), (&'static str, String)> {
    if v > max {
        return Err((field, format!("{v} is over its bound {max}")));
    }
    Ok(())
}

fn share(field: &'static str, v: f64) -> Result<(), (&'static str, String)> {
    if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
        return Err((field, format!("{v} must be in [0, 1]")));
    }
    Ok(())
}

fn mean(field: &'static str, v: f64, max: f64) -> Result<(), (&'static str, String)> {
    if !(v.is_finite() && (0.0..=max).contains(&v)) {
        return Err((field, format!("{v} must be in [0, {max}]")));
    }
    Ok(())
}

fn sigma(field: &'static str, v: f64) -> Result<(), (&'static str, String)> {
    mean(field, v, 5.0)
}

fn quantiles(field: &'static str, q: &Quantiles) -> Result<(), (&'static str, String)> {
    let v = [q.p10, q.p25, q.p50, q.p75, q.p90, q.p99];
    if let Some(&big) = v.iter().find(|&&x| x > MAX_FILE_BYTES) {
        return Err((field, format!("{big} is over its bound {MAX_FILE_BYTES}")));
    }
    if v.windows(2).any(|w| w[0] > w[1]) {
        return Err((field, "quantiles must not decrease from p10 to p99".into()));
    }
    Ok(())
}

/// What a file of a vault is, by its vault-relative path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileClass {
    /// Under a top-level folder (or a top-level file) whose name starts with `.`.
    Config,
    /// `*.md` elsewhere.
    Note,
    Attachment,
}

/// The class of a vault-relative path ('/' separators).
pub fn classify(path: &str) -> FileClass {
    if path.starts_with('.') {
        FileClass::Config
    } else if path.ends_with(".md") {
        FileClass::Note
    } else {
        FileClass::Attachment
    }
}

/// What one note contributed, kept until the vault's paths are all known.
struct NoteSeen {
    /// Non-`#` link targets (resolved against every path in `finish`).
    targets: Vec<(String, bool)>,
    links: u64,
    empty: bool,
}

/// Measures a vault one file at a time.
#[derive(Default)]
pub struct Measure {
    paths: Vec<String>,
    note_folders: BTreeMap<String, u64>,
    root_notes: u64,
    notes: u64,
    empty: u64,
    heavy: u64,
    sizes: Vec<u64>,
    max_note: u64,
    frontmatter: u64,
    non_ascii: u64,
    bodies: BTreeMap<[u8; 32], u64>,
    seen: Vec<NoteSeen>,
    wiki: u64,
    markdown: u64,
    same_note: u64,
    unresolved_same: u64,
    embeds: u64,
    att_sizes: Vec<u64>,
    large: Vec<u64>,
    att_bytes: u64,
    extensions: BTreeMap<String, u64>,
    config: Config,
    non_utf8: u64,
    skipped: u64,
    /// Each note's name (its stem), and each attachment's.
    note_names: Vec<String>,
    attachment_names: Vec<String>,
}

impl Measure {
    pub fn new() -> Measure {
        Measure::default()
    }

    /// A file of class [`FileClass::Note`] and its bytes.
    pub fn note(&mut self, path: &str, bytes: &[u8]) {
        self.paths.push(path.to_owned());
        let base = path.rsplit('/').next().unwrap_or(path);
        self.note_names
            .push(base.strip_suffix(".md").unwrap_or(base).to_owned());
        self.notes += 1;
        match path.rsplit_once('/') {
            Some((dir, _)) => *self.note_folders.entry(dir.to_owned()).or_default() += 1,
            None => self.root_notes += 1,
        }
        let size = bytes.len() as u64;
        self.max_note = self.max_note.max(size);
        if bytes.is_empty() {
            self.empty += 1;
            self.seen.push(NoteSeen {
                targets: Vec::new(),
                links: 0,
                empty: true,
            });
            return;
        }
        *self.bodies.entry(Sha256::digest(bytes).into()).or_default() += 1;
        if bytes.windows(PASTED.len()).any(|w| w == PASTED)
            || size > u64::from(crate::plan::NOTE_MAX_BYTES)
        {
            self.heavy += 1;
        } else {
            self.sizes.push(size);
        }
        self.frontmatter += u64::from(bytes.starts_with(b"---\n") || bytes.starts_with(b"---\r\n"));
        self.non_ascii += u64::from(!bytes.is_ascii());
        let text = without_code_blocks(&String::from_utf8_lossy(bytes));
        let mut seen = NoteSeen {
            targets: Vec::new(),
            links: 0,
            empty: false,
        };
        let mut own: Option<BTreeSet<&str>> = None;
        for l in links(&text) {
            if l.embed {
                self.embeds += 1;
                continue;
            }
            seen.links += 1;
            if l.markdown {
                self.markdown += 1;
            } else {
                self.wiki += 1;
            }
            if let Some(h) = l.target.strip_prefix('#') {
                self.same_note += 1;
                let hs = own.get_or_insert_with(|| headings(&text));
                self.unresolved_same += u64::from(!hs.contains(h));
            } else {
                seen.targets.push((l.target, l.markdown));
            }
        }
        self.seen.push(seen);
    }

    /// A file of class [`FileClass::Attachment`] and its size.
    pub fn attachment(&mut self, path: &str, size: u64) {
        let base = path.rsplit('/').next().unwrap_or(path);
        let ext = match base.rsplit_once('.') {
            Some((stem, e)) if !stem.is_empty() => {
                let e = e.to_ascii_lowercase();
                if KNOWN_EXTENSIONS.contains(&e.as_str()) {
                    e
                } else {
                    "other".to_owned()
                }
            }
            _ => "none".to_owned(),
        };
        *self.extensions.entry(ext).or_default() += 1;
        let stem = match base.rsplit_once('.') {
            Some((stem, _)) if !stem.is_empty() => stem,
            _ => base,
        };
        self.attachment_names.push(stem.to_owned());
        self.paths.push(path.to_owned());
        self.att_bytes += size;
        if size > crate::plan::IMAGE_MAX_BYTES {
            self.large.push(size);
        } else {
            self.att_sizes.push(size);
        }
    }

    /// A file of class [`FileClass::Config`] and its size.
    pub fn config(&mut self, size: u64) {
        self.config.files += 1;
        self.config.bytes += size;
        self.config.largest = self.config.largest.max(size);
    }

    /// A name that was not UTF-8 (measured by its lossy spelling as well).
    pub fn non_utf8_name(&mut self) {
        self.non_utf8 += 1;
    }

    /// A symbolic link or special file that was not followed.
    pub fn skipped(&mut self) {
        self.skipped += 1;
    }

    pub fn finish(mut self) -> Shape {
        // Links: resolve against every path seen.
        let index = LinkIndex::new(self.paths.iter().map(String::as_str));
        let mut unresolved = self.unresolved_same;
        for s in &self.seen {
            for (t, markdown) in &s.targets {
                let link = crate::links::Link {
                    target: t.clone(),
                    embed: false,
                    markdown: *markdown,
                };
                unresolved += u64::from(!index.resolves("", &link));
            }
        }
        let mut per_note: Vec<u64> = self
            .seen
            .iter()
            .filter(|s| !s.empty)
            .map(|s| s.links)
            .collect();
        let total_links = self.wiki + self.markdown;
        let non_empty = self.notes - self.empty;
        per_note.sort_unstable();

        // Folders: every folder holding a note, closed under parents.
        let mut folders: BTreeSet<&str> = BTreeSet::new();
        for dir in self.note_folders.keys() {
            let mut d = dir.as_str();
            loop {
                folders.insert(d);
                match d.rsplit_once('/') {
                    Some((parent, _)) => d = parent,
                    None => break,
                }
            }
        }
        let max_depth = folders
            .iter()
            .map(|f| f.matches('/').count() as u64 + 1)
            .max()
            .unwrap_or(0);
        let mut by_depth = vec![0u64; max_depth as usize];
        for f in &folders {
            by_depth[f.matches('/').count()] += 1;
        }
        let fullest = self.note_folders.values().copied().max().unwrap_or(0);

        let dup: Vec<u64> = self.bodies.values().copied().filter(|&k| k > 1).collect();
        self.sizes.sort_unstable();
        self.att_sizes.sort_unstable();
        self.large.sort_unstable();
        let mut names = names(&self.paths, self.non_utf8, self.skipped);
        names.notes = Some(name_stats_of(&self.note_names));
        names.attachments = Some(name_stats_of(&self.attachment_names));
        Shape {
            kind: KIND.to_owned(),
            format_version: FORMAT_VERSION,
            notes: Notes {
                count: self.notes,
                empty: self.empty,
                heavy: self.heavy,
                size: quantiles_of(&self.sizes),
                size_log_sigma: round4(log_sigma(&self.sizes)),
                size_max: self.max_note,
                frontmatter_share: round4(ratio(self.frontmatter, non_empty)),
                non_ascii_share: round4(ratio(self.non_ascii, non_empty)),
                duplicate_notes: dup.iter().sum(),
                duplicate_groups: dup.len() as u64,
            },
            folders: Folders {
                count: folders.len() as u64,
                max_depth,
                by_depth,
                root_notes: self.root_notes,
                dominant_share: round4(ratio(fullest, self.notes)),
            },
            links: Links {
                wiki: self.wiki,
                markdown: self.markdown,
                per_note_mean: round4(ratio(total_links, non_empty)),
                per_note_p50: rank(&per_note, 0.5),
                per_note_p90: rank(&per_note, 0.9),
                per_note_max: per_note.last().copied().unwrap_or(0),
                same_note_share: round4(ratio(self.same_note, total_links)),
                unresolved_share: round4(ratio(unresolved, total_links)),
                embeds_per_note: round4(ratio(self.embeds, non_empty)),
            },
            attachments: Attachments {
                count: (self.att_sizes.len() + self.large.len()) as u64,
                bytes: self.att_bytes,
                large: self.large.len() as u64,
                large_median: rank(&self.large, 0.5),
                size: quantiles_of(&self.att_sizes),
                size_log_sigma: round4(log_sigma(&self.att_sizes)),
                extensions: self.extensions,
            },
            config: self.config,
            names,
        }
    }
}

/// The text with fenced code blocks blanked out: Obsidian reads no link inside one, and a
/// drawing stored as Markdown (`"points":[[0,0],[..]]` in a JSON block) holds thousands of
/// `[[`.
fn without_code_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
        } else if fenced {
            out.push('\n');
        } else {
            out.push_str(line);
        }
    }
    out
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Four decimals: enough for every share and sigma, and stable text.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The nearest-rank quantile `q` of sorted `v` (0 for none).
fn rank(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn quantiles_of(v: &[u64]) -> Quantiles {
    Quantiles {
        p10: rank(v, 0.10),
        p25: rank(v, 0.25),
        p50: rank(v, 0.50),
        p75: rank(v, 0.75),
        p90: rank(v, 0.90),
        p99: rank(v, 0.99),
    }
}

/// Standard deviation of ln(x) over the positive values (IEEE `ln` of `rng`, like the
/// generator's, so a shape is the same on every machine).
fn log_sigma(v: &[u64]) -> f64 {
    let logs: Vec<f64> = v
        .iter()
        .filter(|&&x| x > 0)
        .map(|&x| crate::rng::ln(x as f64))
        .collect();
    if logs.len() < 2 {
        return 0.0;
    }
    let m = logs.iter().sum::<f64>() / logs.len() as f64;
    (logs.iter().map(|l| (l - m) * (l - m)).sum::<f64>() / logs.len() as f64).sqrt()
}

fn is_emoji(c: char) -> bool {
    matches!(c, '\u{1F000}'..='\u{1FAFF}' | '\u{2600}'..='\u{27BF}')
}

/// The hazard classes of a vault's names and how many fall in each (`hazards.rs` writes
/// as many as a profile asks for).
fn names(paths: &[String], non_utf8: u64, skipped: u64) -> Names {
    let mut n = Names {
        long_name: 0,
        case_collision: 0,
        nfd: 0,
        same_basename_folders: 0,
        emoji: 0,
        trailing_space: 0,
        multiple_spaces: 0,
        spaces: 0,
        non_ascii: 0,
        non_utf8,
        skipped,
        notes: None,
        attachments: None,
    };
    let mut folded: BTreeMap<String, u64> = BTreeMap::new();
    let mut basenames: BTreeMap<&str, u64> = BTreeMap::new();
    for p in paths {
        let base = p.rsplit('/').next().unwrap_or(p);
        let stem = base.rsplit_once('.').map_or(base, |(s, _)| s);
        n.long_name += u64::from(base.len() >= LONG_NAME_BYTES);
        n.nfd += u64::from(p.chars().any(|c| ('\u{300}'..='\u{36f}').contains(&c)));
        n.emoji += u64::from(p.chars().any(is_emoji));
        n.trailing_space +=
            u64::from(stem.ends_with(' ') || p.split('/').any(|c| c.ends_with(' ')));
        n.multiple_spaces += u64::from(p.contains("  "));
        n.spaces += u64::from(base.contains(' '));
        n.non_ascii += u64::from(!p.is_ascii());
        *folded.entry(p.to_lowercase()).or_default() += 1;
        *basenames.entry(base).or_default() += 1;
    }
    n.case_collision = folded.values().filter(|&&k| k > 1).sum();
    n.same_basename_folders = basenames
        .values()
        .copied()
        .filter(|&k| k > 1)
        .max()
        .unwrap_or(0);
    n
}

/// Names by script, their lengths in characters and how many hold a space.
fn name_stats_of(stems: &[String]) -> NameStats {
    let mut scripts: BTreeMap<String, u64> = BTreeMap::new();
    let mut chars: Vec<u64> = Vec::with_capacity(stems.len());
    let mut spaces = 0;
    for s in stems {
        *scripts
            .entry(crate::script::script_of(s).to_owned())
            .or_default() += 1;
        chars.push(s.chars().count() as u64);
        spaces += u64::from(s.contains(' '));
    }
    chars.sort_unstable();
    NameStats {
        scripts,
        chars: quantiles_of(&chars),
        spaces,
    }
}

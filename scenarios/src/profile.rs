//! Vault profiles: one definition each, every shape a parameter (docs/src/vaults/real-vaults.md).

use std::collections::BTreeMap;

/// How many internal links a note carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fanout {
    /// Exactly this many links on every non-empty note.
    Fixed(u32),
    /// A geometric count with this mean (real vaults: mean 2.1, median 1, p90 5).
    Geometric(f64),
}

/// How links to other notes are spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkStyle {
    /// `[[Note name]]`, `[[#Heading]]`, `![[image.png]]` (most vaults).
    Wiki,
    /// `[text](Folder/Note%20name.md)`, `[text](#Heading)`, `![](attachments/image.png)`.
    Markdown,
}

/// A `.obsidian/` config folder: small JSON files plus one large plugin `main.js`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObsidianConfig {
    /// Number of small JSON files (real vaults: 13-1,484 files in `.obsidian/`).
    pub json_files: u32,
    /// Size of the one large plugin `main.js` (real vaults: several MiB).
    pub plugin_js_bytes: u64,
}

/// A vault shape. Same profile + seed => byte-identical files on every machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// Where the shape comes from.
    pub doc: &'static str,
    pub default_seed: u64,
    /// Markdown notes, including empty and duplicate-body ones (not hazard files).
    pub notes: u32,
    /// Folders holding notes (closed under parents; the vault root not counted).
    pub folders: u32,
    /// Maximum folder depth (real vaults: 3 [2-5]).
    pub max_depth: u32,
    /// Share of notes in the one dominant folder (real vaults: median 27 % [19-91 %]).
    pub dominant_share: f64,
    /// Median note size in bytes (real vaults: 230 B - 5.2 KB, typical 1.9 KB).
    pub size_median: u32,
    /// Log-normal sigma of note sizes (real vaults: 1.0 [0.87-1.25]).
    pub size_sigma: f64,
    /// Share of 0-byte notes (appear in most real vaults).
    pub empty_share: f64,
    /// Notes with a pasted base64 image (the heavy tail: largest note 38-560 KB).
    pub heavy_notes: u32,
    /// Share of notes with YAML frontmatter (bimodal: 79-100 % or 0-40 %).
    pub frontmatter_share: f64,
    /// Share of notes whose text contains non-ASCII words (4-90 %).
    pub non_ascii_share: f64,
    pub fanout: Fanout,
    pub link_style: LinkStyle,
    /// Share of links that are same-note `[[#Heading]]` links (28-38 % of wikilinks).
    pub same_note_share: f64,
    /// Share of links that resolve to no note (median 12 % [0-20 %]).
    pub placeholder_share: f64,
    /// Share of note-to-note links that go to one of the index notes (skewed incoming links).
    pub hub_share: f64,
    /// Groups of notes sharing one identical body, and the notes per group.
    pub dup_groups: u32,
    pub dup_group_size: u32,
    /// One valid 1x1 PNG per note, embedded by that note (a published sync benchmark's asset path, 70x slower than its notes).
    pub tiny_png_per_note: bool,
    /// Image-sized PNG attachments per note (real vaults: 1.3 [0.04-4.0]).
    pub images_per_note: f64,
    /// Embeds of those images per note (real vaults: 0.3).
    pub embeds_per_note: f64,
    /// Large incompressible attachments and their size.
    pub large_attachments: u32,
    pub large_attachment_bytes: u64,
    pub obsidian: Option<ObsidianConfig>,
    /// Median and log-normal sigma of image attachment sizes (real vaults: median 60 KiB,
    /// p90 270 KiB, so sigma = ln(4.5) / 1.2816 = 1.17).
    pub image_median: f64,
    pub image_sigma: f64,
    /// A measured vault's image-sized attachment sizes (a twin): when set, they are drawn
    /// from these quantiles instead of the log-normal above, so a bimodal or heavy-tailed
    /// vault (many small SVGs beside large screenshots) keeps its shape and its bytes.
    pub image_sizes: Option<ImageSizes>,
    /// Adds every sync-hazard name and shape (see `hazards.rs`).
    pub hazards: bool,
    /// Adds only these hazard names (a measured vault's twin), as notes sized like the
    /// planner's (`size_median`, `size_sigma`); `hazards` adds them all, with their own short
    /// bodies.
    pub hazard_names: Option<HazardNames>,
    /// Folders at depth 1, 2, ... (a measured vault's twin): when set, the planner builds
    /// exactly these (their sum replaces `folders`, their length `max_depth`); `None` lets it
    /// draw its own nesting.
    pub folder_depths: Option<Vec<u32>>,
    /// Notes directly in the vault root (the planner puts every other note in a folder).
    pub root_notes: u32,
    /// Extensions of the image-sized and large attachments and how many carry each (a
    /// measured vault's twin; `none` for no extension, `other` for one outside the shape
    /// file's list). Empty: every image is a `.png` and every large one a `.bin`. The bytes
    /// are the generator's either way (a PNG, or incompressible bytes).
    pub attachment_extensions: BTreeMap<String, u32>,
    /// The size of the largest heavy note (a measured vault's twin); 0 lets the planner draw
    /// every heavy note between 38 and 560 KB.
    pub heavy_max_bytes: u32,
    /// How a measured vault names its notes (a twin): when set, the planner's titles are
    /// drawn in these scripts, to these lengths, with spaces in this share; `None`: English
    /// nouns, non-ASCII with `non_ascii_share` like the words of the text.
    pub title_names: Option<TitleNames>,
    /// How a measured vault names its image-sized attachments (a twin), the same way; `None`:
    /// English nouns.
    pub attachment_names: Option<TitleNames>,
    /// Planted search queries (`plant.rs`): each a rare phrase in a few known notes, with
    /// decoys holding its single words; 0 plants none and leaves every note as it was.
    pub planted_queries: u32,
    /// Plant only among the first this many notes of the generation order (0: among all), so
    /// every size of a growth scenario (`scenarios::sizes`) holds every query's notes.
    pub plant_first: u32,
}

/// Notes' names as a measured vault writes them (`[names.notes]` of a shape file).
#[derive(Clone, Debug, PartialEq)]
pub struct TitleNames {
    /// Each script (`script.rs`) and its share of the titles; the shares add up to 1.
    pub scripts: Vec<(&'static str, f64)>,
    /// Quantiles of a title's length in characters: `(q, chars)`, `q` increasing.
    pub chars: Vec<(f64, u64)>,
    /// The share of titles in a script written with spaces (Chinese and Japanese titles
    /// have none) that hold a space.
    pub space_share: f64,
}

/// How many names of each hazard class of `hazards.rs` a vault holds (a twin copies a
/// measured vault's counts). Each count is of names in the class, as `vault measure` counts
/// them; the first name of a class is the `hazards` profile's example, the others variants
/// of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HazardNames {
    /// 255-byte clipped-article file names.
    pub long_name: u32,
    /// Paths equal to another's but for letter case, in pairs (a triple when odd; 1 is
    /// written as a pair).
    pub case_collision: u32,
    /// Names spelled in NFD, each beside its NFC spelling.
    pub nfd: u32,
    /// Folders holding one `Index.md` each (one basename in many folders); 0 for none.
    pub same_basename: u32,
    /// Names with emoji.
    pub emoji: u32,
    /// Names ending in a space before their extension.
    pub trailing_space: u32,
    /// Names with a run of spaces.
    pub multiple_spaces: u32,
}

impl HazardNames {
    /// The `hazards` profile's names (docs/src/vaults/real-vaults.md: one basename in up to 61 folders):
    /// one example of each class, three of them with emoji.
    pub const ALL: HazardNames = HazardNames {
        long_name: 1,
        case_collision: 2,
        nfd: 1,
        same_basename: 61,
        emoji: 3,
        trailing_space: 1,
        multiple_spaces: 1,
    };

    /// The hazard-named notes these counts make.
    pub fn notes(&self) -> u64 {
        let case = match self.case_collision {
            0 => 0,
            1 => 2,
            k => u64::from(k),
        };
        u64::from(self.long_name)
            + case
            + 2 * u64::from(self.nfd)
            + u64::from(self.same_basename)
            + u64::from(self.emoji)
            + u64::from(self.trailing_space)
            + u64::from(self.multiple_spaces)
    }
}

/// Measured attachment sizes a twin reproduces: quantile points `(q, bytes)` in rising `q`,
/// and the total bytes of those attachments.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageSizes {
    pub points: Vec<(f64, u64)>,
    pub total_bytes: u64,
}

/// The seed every profile uses unless told otherwise (a published MCP-server benchmark's baselines use `0x5eed`).
pub const DEFAULT_SEED: u64 = 0x5eed;

/// Every profile name, in increasing order of interest for a first run.
pub const PROFILE_NAMES: &[&str] = &[
    "small",
    "small-big",
    "assets",
    "personal",
    "vault1k",
    "small-queries",
    "vault1k-queries",
    "fixture",
    "large",
    "large-queries",
    "vault100k",
    "hazards",
    "import",
    "import-small",
];

const MIB: u64 = 1024 * 1024;

pub(crate) fn base(name: &'static str, doc: &'static str, notes: u32) -> Profile {
    Profile {
        name,
        doc,
        default_seed: DEFAULT_SEED,
        notes,
        // docs/src/vaults/real-vaults.md: about 4 folders per 100 notes.
        folders: (notes / 25).max(1),
        max_depth: 3,
        dominant_share: 0.27,
        size_median: 1536,
        size_sigma: 1.0,
        empty_share: 0.01,
        heavy_notes: 0,
        frontmatter_share: 0.85,
        non_ascii_share: 0.2,
        fanout: Fanout::Geometric(2.1),
        link_style: LinkStyle::Wiki,
        same_note_share: 0.3,
        placeholder_share: 0.12,
        hub_share: 0.2,
        dup_groups: 0,
        dup_group_size: 2,
        tiny_png_per_note: false,
        images_per_note: 0.0,
        embeds_per_note: 0.0,
        large_attachments: 0,
        large_attachment_bytes: 0,
        obsidian: None,
        image_median: 60.0 * 1024.0,
        image_sigma: 1.17,
        image_sizes: None,
        hazards: false,
        hazard_names: None,
        folder_depths: None,
        root_notes: 0,
        attachment_extensions: BTreeMap::new(),
        heavy_max_bytes: 0,
        title_names: None,
        attachment_names: None,
        planted_queries: 0,
        plant_first: 0,
    }
}

/// The profile called `name`, or `None`.
pub fn profile(name: &str) -> Option<Profile> {
    let p = match name {
        "small" => Profile {
            // A published MCP-server benchmark's fixture: 100 notes, 20 duplicate-body groups, link fan-out 3.
            fanout: Fanout::Fixed(3),
            same_note_share: 0.0,
            placeholder_share: 0.0,
            empty_share: 0.0,
            dup_groups: 20,
            ..base(
                "small",
                "a published MCP-server benchmark's fixture: 100 notes, 20 duplicate-body groups, fan-out 3, every link resolves",
                100,
            )
        },
        "small-big" => Profile {
            // Four 1 MiB client chunks: a large upload that a crash point can cut mid-body,
            // as the fixture's 100 MiB attachments are, at a size a test can push in seconds.
            large_attachments: 1,
            large_attachment_bytes: 4 * MIB,
            doc: "small + one 4 MiB incompressible attachment (a multi-chunk upload for mid-body crash points)",
            name: "small-big",
            ..profile("small")?
        },
        "assets" => Profile {
            tiny_png_per_note: true,
            doc: "small + one embedded 1x1 PNG per note (a published sync benchmark: the asset path was 70x slower)",
            name: "assets",
            ..profile("small")?
        },
        "personal" => Profile {
            size_median: 1900,
            images_per_note: 1.3,
            embeds_per_note: 0.3,
            heavy_notes: 1,
            obsidian: Some(ObsidianConfig {
                json_files: 24,
                plugin_js_bytes: 300 * 1024,
            }),
            ..base(
                "personal",
                "docs/src/vaults/real-vaults.md central figures: 800 notes, 1.3 attachments/note, 12 % placeholder links",
                800,
            )
        },
        "vault1k" => Profile {
            link_style: LinkStyle::Markdown,
            frontmatter_share: 0.3,
            images_per_note: 0.1,
            embeds_per_note: 0.05,
            ..base(
                "vault1k",
                "1,000 notes with [text](Note%20name.md) links and few frontmatters (the other real-vault mode)",
                1000,
            )
        },
        "small-queries" => Profile {
            // Eight queries: 8 x (2-4 relevant + 3 decoys) = at most 56 of the 100 notes.
            planted_queries: 8,
            doc: "small + 8 planted search queries (a rare phrase in 2-4 notes each, decoys holding its single words) for scoring a search tool's recall@10, nDCG@10 and MRR",
            name: "small-queries",
            ..profile("small")?
        },
        "vault1k-queries" => Profile {
            planted_queries: 20,
            doc: "vault1k + 20 planted search queries (a rare phrase in 2-4 notes each, decoys holding its single words) for scoring a search tool's recall@10, nDCG@10 and MRR",
            name: "vault1k-queries",
            ..profile("vault1k")?
        },
        "fixture" => Profile {
            folders: 60,
            large_attachments: 3,
            large_attachment_bytes: 100 * MIB,
            ..base(
                "fixture",
                "a published sync-speed report's fixture: 7,700 notes in 60 folders, median 1.5 KiB, 3 x 100 MiB (7,703 files)",
                7700,
            )
        },
        "large" => Profile {
            frontmatter_share: 0.3,
            max_depth: 4,
            ..base(
                "large",
                "a notes-app import report's 10,000 Markdown notes",
                10_000,
            )
        },
        "large-queries" => Profile {
            planted_queries: 20,
            plant_first: 1000,
            doc: "large + 20 planted search queries among its first 1,000 notes, so each size of a growth scenario (1,000 notes and up) holds every query's notes",
            name: "large-queries",
            ..profile("large")?
        },
        "vault100k" => Profile {
            max_depth: 5,
            heavy_notes: 5,
            ..base(
                "vault100k",
                "100,000 notes at the real-vault shape (scale and memory)",
                100_000,
            )
        },
        "hazards" => Profile {
            folders: 8,
            images_per_note: 0.2,
            embeds_per_note: 0.1,
            obsidian: Some(ObsidianConfig {
                json_files: 400,
                plugin_js_bytes: 3 * MIB + MIB / 2,
            }),
            hazards: true,
            ..base(
                "hazards",
                "docs/src/vaults/real-vaults.md sync hazards: 255-byte names, case and NFC/NFD pairs, emoji, .obsidian",
                200,
            )
        },
        "import" => Profile {
            // The import report's case (docs/src/log-counts.md): a Markdown import of 10,000 notes into one
            // folder (`--folder Notes --extension md`), no attachments.
            folders: 1,
            max_depth: 1,
            ..base(
                "import",
                "a notes server's Markdown import: 10,000 Markdown notes in one folder, no attachments",
                10_000,
            )
        },
        "import-small" => Profile {
            name: "import-small",
            doc: "import at 2,000 notes: the same shape for quick growth runs",
            notes: 2000,
            ..profile("import")?
        },
        _ => return None,
    };
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_a_profile() {
        for name in PROFILE_NAMES {
            let p = profile(name).unwrap();
            assert_eq!(&p.name, name);
            assert_eq!(p.default_seed, DEFAULT_SEED);
        }
        assert!(profile("nope").is_none());
    }

    #[test]
    fn assets_differs_from_small_in_one_axis() {
        let (s, a) = (profile("small").unwrap(), profile("assets").unwrap());
        let a_as_small = Profile {
            name: s.name,
            doc: s.doc,
            tiny_png_per_note: false,
            ..a
        };
        assert_eq!(a_as_small, s);
    }
}

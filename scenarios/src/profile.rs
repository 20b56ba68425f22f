//! Vault profiles: one definition each, every shape a parameter (issue 2, real-vaults.md).

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
    /// One valid 1x1 PNG per note, embedded by that note (trip2g's 70x workload).
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
    /// Adds every sync-hazard name and shape (see `hazards.rs`).
    pub hazards: bool,
    /// Adds only these hazard names (a measured vault's twin); `hazards` adds them all.
    pub hazard_names: Option<HazardNames>,
}

/// Which of the hazard names of `hazards.rs` a vault holds (a twin copies a measured vault's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HazardNames {
    /// A 255-byte clipped-article file name.
    pub long_name: bool,
    /// A case-only path pair.
    pub case_pair: bool,
    /// One name in NFC and in NFD.
    pub normalisation_pair: bool,
    /// Folders holding one `Index.md` each (one basename in many folders); 0 for none.
    pub same_basename: u32,
    /// Names with emoji.
    pub emoji: bool,
    /// A name ending in a space before its extension.
    pub trailing_space: bool,
    /// A name with a run of spaces.
    pub multiple_spaces: bool,
}

impl HazardNames {
    /// The `hazards` profile's names (real-vaults.md: one basename in up to 61 folders).
    pub const ALL: HazardNames = HazardNames {
        long_name: true,
        case_pair: true,
        normalisation_pair: true,
        same_basename: 61,
        emoji: true,
        trailing_space: true,
        multiple_spaces: true,
    };
}

/// The seed every profile uses unless told otherwise (mcp-server-perf-baselines: `0x5eed`).
pub const DEFAULT_SEED: u64 = 0x5eed;

/// Every profile name, in increasing order of interest for a first run.
pub const PROFILE_NAMES: &[&str] = &[
    "small",
    "small-big",
    "assets",
    "personal",
    "vault1k",
    "fixture",
    "large",
    "vault100k",
    "hazards",
];

const MIB: u64 = 1024 * 1024;

pub(crate) fn base(name: &'static str, doc: &'static str, notes: u32) -> Profile {
    Profile {
        name,
        doc,
        default_seed: DEFAULT_SEED,
        notes,
        // real-vaults.md: about 4 folders per 100 notes.
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
        hazards: false,
        hazard_names: None,
    }
}

/// The profile called `name`, or `None`.
pub fn profile(name: &str) -> Option<Profile> {
    let p = match name {
        "small" => Profile {
            // mcp-server-perf-baselines: 100 notes, 20 duplicate-body groups, link fan-out 3.
            fanout: Fanout::Fixed(3),
            same_note_share: 0.0,
            placeholder_share: 0.0,
            empty_share: 0.0,
            dup_groups: 20,
            ..base(
                "small",
                "mcp-server-perf-baselines: 100 notes, 20 duplicate-body groups, fan-out 3, every link resolves",
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
            doc: "small + one embedded 1x1 PNG per note (trip2g-sync-benchmark: the 70x asset path)",
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
                "real-vaults.md central figures: 800 notes, 1.3 attachments/note, 12 % placeholder links",
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
        "fixture" => Profile {
            folders: 60,
            large_attachments: 3,
            large_attachment_bytes: 100 * MIB,
            ..base(
                "fixture",
                "obsync-speed-report fixture: 7,700 notes in 60 folders, median 1.5 KiB, 3 x 100 MiB (7,703 files)",
                7700,
            )
        },
        "large" => Profile {
            frontmatter_share: 0.3,
            max_depth: 4,
            ..base(
                "large",
                "calternal notes-10k import: 10,000 Markdown notes",
                10_000,
            )
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
                "real-vaults.md sync hazards: 255-byte names, case and NFC/NFD pairs, emoji, .obsidian",
                200,
            )
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

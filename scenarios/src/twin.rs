//! A measured vault's synthetic twin: the [`Profile`] that makes the generator reproduce a
//! [`Shape`] (counts exact, distributions fitted), with none of the vault's names or text.
//!
//! The generator is the one of every built-in profile; a twin only sets its parameters,
//! among them the ones no built-in profile uses (hazard-name counts, folders per depth,
//! notes in the root, attachment extensions, the largest heavy note). What the generator
//! cannot take from a shape is written down in the book (`docs/src/vaults/twin.md`): the
//! bytes behind an extension (a twin's `.pdf` holds a PNG), the sizes of heavy notes but the
//! largest, names in two hazard classes at once, and which notes get the incoming links.

use crate::plan::NOTE_MAX_BYTES;
use crate::profile::{
    DEFAULT_SEED, Fanout, HazardNames, ImageSizes, LinkStyle, ObsidianConfig, Profile, TitleNames,
    base,
};
use crate::shape::Shape;

/// The name every twin profile carries (a vault cache entry is still keyed by its digest).
pub const TWIN_NAME: &str = "twin";

/// The largest heavy note a twin writes (a note is made in memory): 16 MiB, 30 times the
/// largest note real vaults show (docs/src/vaults/real-vaults.md: 38-560 KB).
const MAX_HEAVY_NOTE_BYTES: u64 = 16 * 1024 * 1024;

impl Profile {
    /// The profile whose vault measures back to `s` (within the tolerances in the book).
    pub fn from_shape(s: &Shape) -> Profile {
        let (n, f, l, a, c) = (&s.notes, &s.folders, &s.links, &s.attachments, &s.config);
        let names = hazard_names(s);
        let (extra_notes, extra_folders) =
            names.map_or((0, Vec::new()), crate::hazards::name_footprint);
        let notes = n.count.saturating_sub(extra_notes);
        // The planner's folders per depth: the measured ones less the hazard names' own, cut
        // at the first depth left with none (a folder needs its parent), and at most one per
        // note (each holds one).
        let mut depths: Vec<u32> = Vec::with_capacity(f.by_depth.len());
        let mut budget = notes;
        for (d, &k) in f.by_depth.iter().enumerate() {
            let k = k
                .saturating_sub(extra_folders.get(d).copied().unwrap_or(0))
                .min(budget);
            if k == 0 {
                break;
            }
            budget -= k;
            depths.push(k as u32);
        }
        let folders: u64 = depths.iter().map(|&k| u64::from(k)).sum();
        let root_notes = f.root_notes.min(notes - folders);
        let images = a.count - a.large;
        // The hazard-named notes carry no links, embeds or frontmatter (but one): the
        // planner's notes carry them all.
        let non_empty = n.count - n.empty;
        let per_planned = ratio(non_empty, non_empty.saturating_sub(extra_notes)).max(1.0);
        let hazard_stems = names.map(crate::hazards::name_stems).unwrap_or_default();
        let titles = s
            .names
            .notes
            .as_ref()
            .map(|m| title_names(m, &hazard_stems));
        let fixed = l.per_note_max > 0 && (l.per_note_mean - l.per_note_max as f64).abs() < 1e-9;
        Profile {
            name: TWIN_NAME,
            doc: "a measured vault's shape (vault measure): its counts and distributions, none of its names or text",
            default_seed: DEFAULT_SEED,
            notes: notes as u32,
            folders: folders as u32,
            max_depth: depths.len() as u32,
            // The share is of every note; the dominant folder is a planned one, and the
            // planner spreads the notes not in the root.
            dominant_share: dominant_param(
                (f.dominant_share * ratio(n.count, notes - root_notes)).min(1.0),
                notes - root_notes,
                folders,
            ),
            size_median: n.size.p50.clamp(40, u64::from(NOTE_MAX_BYTES)) as u32,
            size_sigma: n.size_log_sigma,
            empty_share: ratio(n.empty, n.count),
            heavy_notes: n.heavy as u32,
            heavy_max_bytes: if n.heavy > 0 {
                n.size_max.min(MAX_HEAVY_NOTE_BYTES) as u32
            } else {
                0
            },
            frontmatter_share: (n.frontmatter_share * per_planned).min(1.0),
            non_ascii_share: non_ascii_param(
                (n.non_ascii_share * per_planned).min(1.0),
                l.per_note_mean * per_planned * (1.0 - l.same_note_share),
                titles.as_ref().map(title_non_ascii),
            ),
            fanout: if fixed {
                Fanout::Fixed(l.per_note_max as u32)
            } else {
                Fanout::Geometric(l.per_note_mean * per_planned)
            },
            link_style: if l.markdown > l.wiki {
                LinkStyle::Markdown
            } else {
                LinkStyle::Wiki
            },
            same_note_share: l.same_note_share,
            placeholder_share: l.unresolved_share,
            dup_groups: n.duplicate_groups as u32,
            dup_group_size: if n.duplicate_groups == 0 {
                2
            } else {
                ((n.duplicate_notes as f64 / n.duplicate_groups as f64).round() as u32).max(2)
            },
            images_per_note: if notes == 0 {
                0.0
            } else {
                images as f64 / notes as f64
            },
            embeds_per_note: l.embeds_per_note * per_planned,
            large_attachments: a.large as u32,
            large_attachment_bytes: a.large_median,
            image_median: a.size.p50.max(1024) as f64,
            image_sigma: a.size_log_sigma,
            // The measured quantiles themselves, and the bytes they must add up to (the large
            // attachments are written at their median size).
            image_sizes: (images > 0).then(|| ImageSizes {
                points: vec![
                    (0.10, a.size.p10),
                    (0.25, a.size.p25),
                    (0.50, a.size.p50),
                    (0.75, a.size.p75),
                    (0.90, a.size.p90),
                    (0.99, a.size.p99),
                ],
                total_bytes: a.bytes.saturating_sub(a.large * a.large_median),
            }),
            obsidian: (c.files > 0).then(|| ObsidianConfig {
                json_files: (c.files - 1) as u32,
                plugin_js_bytes: c.largest,
            }),
            hazard_names: names,
            title_names: titles,
            attachment_names: s.names.attachments.as_ref().map(|m| title_names(m, &[])),
            folder_depths: Some(depths),
            root_notes: root_notes as u32,
            attachment_extensions: a
                .extensions
                .iter()
                .map(|(e, &k)| (e.clone(), k as u32))
                .collect(),
            ..base(TWIN_NAME, "", 0)
        }
    }
}

/// The generator's title parameters from notes' measured names, less the names of the
/// hazard-named notes the twin writes itself (`hazard`): each script's share, the length
/// quantiles, and the share of spaced-script titles that hold a space (the measured names
/// with spaces are all in scripts that space their words).
fn title_names(m: &crate::shape::NameStats, hazard: &[String]) -> TitleNames {
    let mut counts = m.scripts.clone();
    let mut spaces = m.spaces;
    for h in hazard {
        if let Some(k) = counts.get_mut(crate::script::script_of(h)) {
            *k = k.saturating_sub(1);
        }
        spaces = spaces.saturating_sub(u64::from(h.contains(' ')));
    }
    let total: u64 = counts.values().sum();
    let scripts: Vec<(&'static str, f64)> = crate::script::SCRIPTS
        .iter()
        .filter_map(|s| {
            let k = *counts.get(*s)?;
            (k > 0).then(|| (*s, ratio(k, total)))
        })
        .collect();
    let spaced: u64 = counts
        .iter()
        .filter(|(s, _)| crate::script::spaced(s))
        .map(|(_, &k)| k)
        .sum();
    TitleNames {
        scripts,
        chars: planner_lengths(&m.chars, m.scripts.values().sum(), hazard),
        space_share: ratio(spaces, spaced).min(1.0),
    }
}

/// The length quantiles the planner's titles need so that, with the hazard names' own
/// lengths, all `n` names measure back to `q`: the measured distribution function, read off
/// `q` by linear interpolation (0 below one character, 1 at p99 and above), less the
/// hazard names' share at each length, rescaled to the planner's titles.
fn planner_lengths(q: &crate::shape::Quantiles, n: u64, hazard: &[String]) -> Vec<(f64, u64)> {
    let points = [
        (0.10, q.p10),
        (0.25, q.p25),
        (0.50, q.p50),
        (0.75, q.p75),
        (0.90, q.p90),
        (0.99, q.p99),
    ];
    let planned = n.saturating_sub(hazard.len() as u64);
    if hazard.is_empty() || planned == 0 {
        return points.to_vec();
    }
    // The measured share of names at most `x` characters long.
    let measured = |x: f64| -> f64 {
        let mut prev = (0.0, 0.0);
        for &(level, len) in &points {
            let len = len as f64;
            if x < len {
                let span = len - prev.1;
                return if span <= 0.0 {
                    prev.0
                } else {
                    prev.0 + (level - prev.0) * (x - prev.1) / span
                };
            }
            prev = (level, len);
        }
        1.0
    };
    let lens: Vec<u64> = hazard.iter().map(|h| h.chars().count() as u64).collect();
    let (n, planned) = (n as f64, planned as f64);
    let mut best = 0.0f64;
    let planner = |x: u64| -> f64 {
        let h = lens.iter().filter(|&&l| l <= x).count() as f64;
        ((n * measured(x as f64) - h) / planned).clamp(0.0, 1.0)
    };
    let mut cdf: Vec<(u64, f64)> = Vec::new();
    for x in 1..=crate::shape::MAX_NAME_CHARS {
        best = best.max(planner(x));
        cdf.push((x, best));
    }
    points
        .iter()
        .map(|&(level, fallback)| {
            let x = cdf
                .iter()
                .find(|&&(_, c)| c >= level)
                .map_or(fallback, |&(x, _)| x);
            (level, x)
        })
        .collect()
}

/// The share of titles that are not ASCII.
fn title_non_ascii(t: &TitleNames) -> f64 {
    t.scripts
        .iter()
        .filter(|(s, _)| *s != "ascii")
        .map(|(_, p)| p)
        .sum()
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The hazard names a twin holds: as many in each class as the vault's names show, each
/// class cut (in the order of the fields) where the hazard-named notes would outnumber the
/// measured notes.
fn hazard_names(s: &Shape) -> Option<HazardNames> {
    let m = &s.names;
    let mut h = HazardNames::default();
    let wanted = [
        m.long_name,
        m.case_collision,
        m.nfd,
        if m.same_basename_folders > 1 {
            m.same_basename_folders
        } else {
            0
        },
        m.emoji,
        m.trailing_space,
        m.multiple_spaces,
    ];
    for (class, &want) in wanted.iter().enumerate() {
        // The most of this class that fit: a bisection over the count (notes grow with it).
        let (mut lo, mut hi) = (0u64, want.min(u64::from(u32::MAX)));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let mut t = h;
            *class_count(&mut t, class) = mid as u32;
            if t.notes() <= s.notes.count {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        *class_count(&mut h, class) = lo as u32;
    }
    (h != HazardNames::default()).then_some(h)
}

/// The count of class `class` (in the order of the fields).
fn class_count(h: &mut HazardNames, class: usize) -> &mut u32 {
    match class {
        0 => &mut h.long_name,
        1 => &mut h.case_collision,
        2 => &mut h.nfd,
        3 => &mut h.same_basename,
        4 => &mut h.emoji,
        5 => &mut h.trailing_space,
        _ => &mut h.multiple_spaces,
    }
}

/// The planner's dominant-folder parameter that gives a measured share: it puts one note in
/// each of `folders` folders, then each further note in the dominant one with probability
/// `d` and in a uniformly drawn one otherwise, so the dominant folder expects
/// `1 + (notes - folders) (d + (1 - d) / folders)` notes.
fn dominant_param(share: f64, notes: u64, folders: u64) -> f64 {
    if folders <= 1 || notes <= folders {
        return 0.0;
    }
    let (n, k) = (notes as f64, folders as f64);
    let per_extra = (share * n - 1.0) / (n - k);
    ((per_extra - 1.0 / k) / (1.0 - 1.0 / k)).clamp(0.0, 1.0)
}

/// The generator's non-ASCII parameter `x` that gives a measured share of notes holding
/// non-ASCII text. With `x`, a note's own words are non-ASCII with probability `x`; besides,
/// its title (non-ASCII with probability `t`) shows in its `# Title` heading half the time,
/// and each link to another note or a placeholder spells a title drawn the same way. So a
/// note is all ASCII with probability about `(1 - x) (1 - t / 2) (1 - t)^k`, `k` its links
/// that name a title; `x` is found by bisection (the share rises with `x`). Without measured
/// names the titles are drawn with the text's own parameter (`t = x`); with them `t` is their
/// non-ASCII share (`title_share`).
fn non_ascii_param(share: f64, k: f64, title_share: Option<f64>) -> f64 {
    let predicted = |x: f64| {
        let t = title_share.unwrap_or(x);
        let mut ascii = (1.0 - x) * (1.0 - t / 2.0);
        // (1 - t)^k by repeated multiplication (k is a mean, so its integer part, then the rest).
        let whole = k.floor() as u32;
        for _ in 0..whole.min(1000) {
            ascii *= 1.0 - t;
        }
        ascii *= 1.0 - t * (k - f64::from(whole));
        1.0 - ascii
    };
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        if predicted(mid) < share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

//! The vault plan: folders, note names and sizes, duplicate groups, index notes and
//! attachments, decided up front so links can point anywhere; bytes are made later, lazily.
//!
//! The plan costs about 100 bytes a note (vault100k: ~10 MiB), never the notes' text.

use std::collections::BTreeSet;

use crate::profile::Profile;
use crate::rng::{Purpose, below, between, chance, log_normal, stream};
use crate::text;

/// How a note's bytes are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoteKind {
    Normal,
    /// 0 bytes.
    Empty,
    /// A normal note plus a pasted base64 image (the heavy tail).
    Heavy,
}

#[derive(Clone, Debug)]
pub(crate) struct NotePlan {
    /// Vault-relative path, `Folder/Sub/Title.md`.
    pub path: String,
    /// Byte offset of the title inside `path` (the stem starts here, ends before `.md`).
    pub stem_at: u16,
    /// Target size in bytes (the rendered note lands on it, give or take its links).
    pub size: u32,
    pub kind: NoteKind,
    /// The group leader whose bytes this note repeats (duplicate-body groups).
    pub dup_of: Option<u32>,
}

impl NotePlan {
    pub fn title(&self) -> &str {
        &self.path[usize::from(self.stem_at)..self.path.len() - 3]
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AttachmentKind {
    /// A valid 1x1 PNG for note `n`.
    TinyPng,
    /// A valid PNG of an image's size with incompressible pixels.
    Image,
    /// Incompressible bytes, streamed.
    Large,
    /// Incompressible bytes of a size too small for a PNG (a twin's small attachments: the
    /// SVG icons of a documentation vault).
    Bytes,
}

#[derive(Clone, Debug)]
pub(crate) struct AttachmentPlan {
    pub path: String,
    pub size: u64,
    pub kind: AttachmentKind,
}

#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub notes: Vec<NotePlan>,
    /// Note indices sorted by title, for "is this a note's title" lookups.
    pub by_title: Vec<u32>,
    /// Index notes that collect a skewed share of incoming links.
    pub hubs: Vec<u32>,
    /// Note folders (closed under parents), the dominant one first. Read by the tests.
    #[allow(dead_code)]
    pub folders: Vec<String>,
    pub attachments: Vec<AttachmentPlan>,
    /// Indices into `attachments` of image-sized PNGs (embeddable).
    pub images: Vec<u32>,
}

/// Where attachments live (real vaults: one dedicated folder).
pub(crate) const ATTACHMENT_DIR: &str = "attachments";

/// The largest image attachment (a larger attachment is a `large` one).
pub(crate) const IMAGE_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// The largest normal note (a larger note is a heavy one, with a pasted image).
pub(crate) const NOTE_MAX_BYTES: u32 = 400_000;
/// The smallest heavy note (docs/src/vaults/real-vaults.md: the largest note of a vault is 38-560 KB).
const HEAVY_MIN_BYTES: u64 = 38_000;

impl Plan {
    pub fn new(p: &Profile, seed: u64) -> Plan {
        let mut rng = stream(seed, Purpose::NotePlan, 0);
        let folders = match &p.folder_depths {
            Some(depths) => folders_by_depth(depths, &mut rng),
            None => folders(p, &mut rng),
        };
        let n = p.notes as usize;
        // Root notes come after the one note of each folder, so every folder still holds one.
        let root =
            folders.len()..folders.len() + (p.root_notes as usize).min(n - n.min(folders.len()));

        // Folder of each note: every folder gets one note, then the dominant folder its share.
        let mut titles: BTreeSet<String> = BTreeSet::new();
        if p.hazard_names.is_some_and(|h| h.same_basename > 0) {
            // A twin's one repeated basename is the hazard names' `Index.md`: no planned note
            // may add a folder to it.
            titles.insert("Index".to_owned());
        }
        let mut notes = Vec::with_capacity(n);
        let twin_titles = p.title_names.as_ref().map(|t| title_specs(&mut rng, t, n));
        for i in 0..n {
            let folder = if i < folders.len() {
                Some(i)
            } else if root.contains(&i) || folders.is_empty() {
                None
            } else if chance(&mut rng, p.dominant_share) {
                Some(0)
            } else {
                Some(below(&mut rng, folders.len()))
            };
            let mut title = match &twin_titles {
                Some(specs) => text::title_in(&mut rng, specs[i]),
                None => text::title(&mut rng, p.non_ascii_share),
            };
            if titles.contains(&title) {
                // A twin's title without spaces stays without: `東京-2`, not `東京 2`.
                let sep = if twin_titles.is_some() && !title.contains(' ') {
                    "-"
                } else {
                    " "
                };
                let mut k = 2;
                while titles.contains(&format!("{title}{sep}{k}")) {
                    k += 1;
                }
                title = format!("{title}{sep}{k}");
            }
            titles.insert(title.clone());
            let (kind, size) = if chance(&mut rng, p.empty_share) {
                (NoteKind::Empty, 0)
            } else {
                let s = log_normal(&mut rng, f64::from(p.size_median), p.size_sigma);
                (
                    NoteKind::Normal,
                    s.clamp(40.0, f64::from(NOTE_MAX_BYTES)) as u32,
                )
            };
            let (stem_at, path) = match folder {
                Some(f) => {
                    let dir = &folders[f];
                    ((dir.len() + 1) as u16, format!("{dir}/{title}.md"))
                }
                None => (0, format!("{title}.md")),
            };
            notes.push(NotePlan {
                stem_at,
                path,
                size,
                kind,
                dup_of: None,
            });
        }
        drop(titles);

        // Heavy-tail notes, duplicate groups and hubs are distinct picks among normal notes.
        let mut order: Vec<u32> = (0..p.notes).collect();
        let mut taken = 0;
        let mut take = |rng: &mut _, notes: &[NotePlan]| -> Option<u32> {
            while taken < order.len() {
                let j = taken + below(rng, order.len() - taken);
                order.swap(taken, j);
                taken += 1;
                let idx = order[taken - 1];
                if notes[idx as usize].kind == NoteKind::Normal {
                    return Some(idx);
                }
            }
            None
        };
        let mut heavy_max_set = false;
        for _ in 0..p.heavy_notes {
            if let Some(i) = take(&mut rng, &notes) {
                notes[i as usize].kind = NoteKind::Heavy;
                // docs/src/vaults/real-vaults.md: the largest note is 38-560 KB. A twin's largest is the
                // measured one, the others drawn up to it.
                let hi = match p.heavy_max_bytes {
                    0 => 560_000,
                    m => u64::from(m),
                };
                let size = between(&mut rng, HEAVY_MIN_BYTES.min(hi), hi);
                notes[i as usize].size = if p.heavy_max_bytes > 0 && !heavy_max_set {
                    heavy_max_set = true;
                    hi as u32
                } else {
                    size as u32
                };
            }
        }
        for _ in 0..p.dup_groups {
            let Some(leader) = take(&mut rng, &notes) else {
                break;
            };
            for _ in 1..p.dup_group_size {
                if let Some(i) = take(&mut rng, &notes) {
                    notes[i as usize].dup_of = Some(leader);
                    notes[i as usize].size = notes[leader as usize].size;
                }
            }
        }
        let mut hubs = Vec::new();
        for _ in 0..(p.notes / 100).max(1) {
            if let Some(i) = take(&mut rng, &notes) {
                hubs.push(i);
            }
        }

        let mut by_title: Vec<u32> = (0..p.notes).collect();
        by_title.sort_by(|&a, &b| notes[a as usize].title().cmp(notes[b as usize].title()));

        let (attachments, images) = attachments(p, seed);
        Plan {
            notes,
            by_title,
            hubs,
            folders,
            attachments,
            images,
        }
    }

    /// True when some note is titled `t`.
    pub fn has_title(&self, t: &str) -> bool {
        self.by_title
            .binary_search_by(|&i| self.notes[i as usize].title().cmp(t))
            .is_ok()
    }
}

/// `p.folders` folders, depth <= `p.max_depth`, closed under parents; the first is the
/// dominant top-level folder.
fn folders(p: &Profile, rng: &mut rand_chacha::ChaCha8Rng) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(p.folders as usize);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    seen.insert(ATTACHMENT_DIR.to_owned());
    seen.insert(".obsidian".to_owned());
    // A handful of top-level folders (at most 12), the rest nest under a random folder.
    let top = (p.folders / 3).clamp(1, 12);
    while out.len() < p.folders as usize {
        let parent = if (out.len() as u32) < top {
            None
        } else {
            Some(below(rng, out.len()))
        };
        let parent = parent.filter(|&i| out[i].matches('/').count() + 1 < p.max_depth as usize);
        let name = text::folder_name(rng);
        let path = match parent {
            Some(i) => format!("{}/{name}", out[i]),
            None => name,
        };
        if seen.insert(path.clone()) {
            out.push(path);
        }
    }
    out
}

/// Exactly `depths[d]` folders at depth `d + 1`, each under a folder of the depth above drawn
/// uniformly; the first is the dominant top-level folder. A name already taken gets a number
/// (`Project 2`), so any count can be met. A depth with none ends the tree (a folder needs
/// its parent).
fn folders_by_depth(depths: &[u32], rng: &mut rand_chacha::ChaCha8Rng) -> Vec<String> {
    let total: u64 = depths.iter().map(|&k| u64::from(k)).sum();
    let mut out: Vec<String> = Vec::with_capacity(total as usize);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    seen.insert(ATTACHMENT_DIR.to_owned());
    seen.insert(".obsidian".to_owned());
    let mut above: std::ops::Range<usize> = 0..0;
    for (d, &k) in depths.iter().enumerate() {
        if k == 0 || (d > 0 && above.is_empty()) {
            break;
        }
        let start = out.len();
        for _ in 0..k {
            let name = text::folder_name(rng);
            let parent = (d > 0).then(|| above.start + below(rng, above.len()));
            let at = |name: &str| match parent {
                Some(i) => format!("{}/{name}", out[i]),
                None => name.to_owned(),
            };
            let mut path = at(&name);
            let mut n = 2;
            while seen.contains(&path) {
                path = at(&format!("{name} {n}"));
                n += 1;
            }
            seen.insert(path.clone());
            out.push(path);
        }
        above = start..out.len();
    }
    out
}

fn attachments(p: &Profile, seed: u64) -> (Vec<AttachmentPlan>, Vec<u32>) {
    let mut rng = stream(seed, Purpose::AttachmentPlan, 0);
    let mut out = Vec::new();
    let mut images = Vec::new();
    if p.tiny_png_per_note {
        for i in 0..p.notes {
            // Obsidian names a pasted image by its timestamp; derive one per note.
            let stamp = 20_230_101_000_000u64 + u64::from(i) * 37;
            out.push(AttachmentPlan {
                path: format!("{ATTACHMENT_DIR}/Pasted image {stamp}.png"),
                size: crate::binary::TINY_PNG_LEN as u64,
                kind: AttachmentKind::TinyPng,
            });
        }
    }
    let n_images = (p.images_per_note * f64::from(p.notes)).round() as u32;
    let (image_ext, large_ext) = extensions(p, seed, n_images);
    let mut names: BTreeSet<String> = BTreeSet::new();
    let first_image = out.len() as u32;
    // A twin's sizes: drawn once, stratified over the measured quantiles.
    let twin_sizes = p
        .image_sizes
        .as_ref()
        .map(|q| quantile_sizes(&mut rng, q, n_images as usize));
    let twin_names = p
        .attachment_names
        .as_ref()
        .map(|t| title_specs(&mut rng, t, n_images as usize));
    for i in 0..n_images as usize {
        let mut name = match &twin_names {
            Some(specs) => text::title_in(&mut rng, specs[i]),
            None => text::title(&mut rng, 0.0),
        };
        while names.contains(&name) {
            name.push('_');
        }
        names.insert(name.clone());
        let size = match &twin_sizes {
            Some(sizes) => sizes[i] as f64,
            None => log_normal(&mut rng, p.image_median, p.image_sigma)
                .clamp(1024.0, IMAGE_MAX_BYTES as f64),
        };
        let ext = image_ext.get(i).map_or(".png", String::as_str);
        if image_ext.is_empty() || EMBEDDABLE.contains(&ext) {
            images.push(out.len() as u32);
        }
        out.push(AttachmentPlan {
            path: format!("{ATTACHMENT_DIR}/{name}{ext}"),
            size: size as u64,
            kind: if size < MIN_PNG_BYTES as f64 {
                AttachmentKind::Bytes
            } else {
                AttachmentKind::Image
            },
        });
    }
    if images.is_empty() && !image_ext.is_empty() {
        // No image among a twin's extensions: its embeds go to what there is.
        images = (first_image..out.len() as u32).collect();
    }
    for k in 0..p.large_attachments {
        let ext = large_ext.get(k as usize).map_or(".bin", String::as_str);
        out.push(AttachmentPlan {
            path: format!("{ATTACHMENT_DIR}/recording-{:02}{ext}", k + 1),
            size: p.large_attachment_bytes,
            kind: AttachmentKind::Large,
        });
    }
    (out, images)
}

/// The smallest image written as a PNG (`binary::png_of_size`); smaller ones are plain bytes.
pub(crate) const MIN_PNG_BYTES: u64 = 1024;

/// `n` attachment sizes whose nearest-rank quantiles are the measured ones: image `i` takes
/// the quantile `(r + 0.5) / n` of a seeded permutation's rank `r`, read off the measured
/// points with log-linear interpolation (extrapolated past the first and last point by the
/// neighbouring segment's slope). The top one per cent (at least the largest) is then scaled
/// so the sizes add up to the measured total: a heavy tail carries most bytes above p99, which
/// no quantile records.
fn quantile_sizes(
    rng: &mut rand_chacha::ChaCha8Rng,
    q: &crate::profile::ImageSizes,
    n: usize,
) -> Vec<u64> {
    if n == 0 || q.points.is_empty() {
        return vec![MIN_PNG_BYTES; n];
    }
    let (us, pts) = (stratified(rng, n), log_points(&q.points));
    let at = |u: f64| -> f64 { log_linear(&pts, u).clamp(1.0, IMAGE_MAX_BYTES as f64) };
    let mut sizes: Vec<f64> = us.iter().map(|&u| at(u)).collect();
    let tail_from = last_point_q(&pts).min(us.iter().copied().fold(0.0, f64::max));
    let tail: Vec<usize> = (0..n).filter(|&i| us[i] >= tail_from).collect();
    let tail_sum: f64 = tail.iter().map(|&i| sizes[i]).sum();
    let rest: f64 = sizes.iter().sum::<f64>() - tail_sum;
    if tail_sum > 0.0 && q.total_bytes > 0 {
        let floor = at(tail_from);
        let factor = ((q.total_bytes as f64 - rest) / tail_sum).max(0.0);
        for &i in &tail {
            sizes[i] = (sizes[i] * factor).clamp(floor, IMAGE_MAX_BYTES as f64);
        }
    }
    sizes.into_iter().map(|s| s.round() as u64).collect()
}

/// `(r + 0.5) / n` for each of `n` items, `r` its rank in a seeded permutation: quantile
/// levels that cover `[0, 1]` evenly, in a seeded order.
fn stratified(rng: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<f64> {
    let mut ranks: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        ranks.swap(i, below(rng, i + 1));
    }
    ranks.iter().map(|&r| (r as f64 + 0.5) / n as f64).collect()
}

/// Measured quantile points `(q, value)` as `(q, ln value)`.
fn log_points(points: &[(f64, u64)]) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|&(p, b)| (p, (b.max(1) as f64).ln()))
        .collect()
}

/// The value at quantile level `u`, read off `pts` (from [`log_points`]) by log-linear
/// interpolation, extrapolated past the first and last point by the neighbouring segment's
/// slope.
fn log_linear(pts: &[(f64, f64)], u: f64) -> f64 {
    let slope = |a: (f64, f64), b: (f64, f64)| {
        if b.0 > a.0 {
            (b.1 - a.1) / (b.0 - a.0)
        } else {
            0.0
        }
    };
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    let ln = if u <= first.0 {
        let s = pts.get(1).map_or(0.0, |&b| slope(first, b));
        first.1 - (first.0 - u) * s
    } else if u >= last.0 {
        let s = pts
            .len()
            .checked_sub(2)
            .map_or(0.0, |i| slope(pts[i], last));
        last.1 + (u - last.0) * s
    } else {
        let k = pts.windows(2).position(|w| u <= w[1].0).unwrap_or(0);
        let (a, b) = (pts[k], pts[k + 1]);
        a.1 + (u - a.0) * slope(a, b)
    };
    ln.exp()
}

/// The longest title a twin writes, in characters (a measured p99 beyond it is cut here; its
/// bytes are bounded by `text::TITLE_MAX_BYTES`).
const TITLE_MAX_CHARS: f64 = 120.0;

/// The script, length and spacing of each of `n` twin titles: each script's count is its
/// share of `n` rounded by largest remainder, the lengths are stratified over the measured
/// quantiles, and the titles with spaces are the share asked of those whose script spaces
/// its words, all in a seeded order.
fn title_specs(
    rng: &mut rand_chacha::ChaCha8Rng,
    t: &crate::profile::TitleNames,
    n: usize,
) -> Vec<text::TitleSpec> {
    let scripts = spread(rng, &t.scripts, n);
    let pts = log_points(&t.chars);
    let lengths: Vec<usize> = if pts.is_empty() {
        vec![20; n]
    } else {
        stratified(rng, n)
            .into_iter()
            .map(|u| log_linear(&pts, u).round().clamp(1.0, TITLE_MAX_CHARS) as usize)
            .collect()
    };
    let spaced_ones: Vec<usize> = (0..n)
        .filter(|&i| crate::script::spaced(scripts[i]))
        .collect();
    let want = (t.space_share.clamp(0.0, 1.0) * spaced_ones.len() as f64).round() as usize;
    let mut with_space = vec![false; n];
    for (k, u) in stratified(rng, spaced_ones.len()).into_iter().enumerate() {
        // The titles whose seeded level falls in the lowest `want` of them get spaces.
        with_space[spaced_ones[k]] = (u * spaced_ones.len() as f64) < want as f64;
    }
    (0..n)
        .map(|i| text::TitleSpec {
            script: scripts[i],
            chars: lengths[i],
            spaces: with_space[i],
        })
        .collect()
}

/// `n` labels, each `shares`' label as often as its share of `n` (largest remainder), in a
/// seeded order.
fn spread(
    rng: &mut rand_chacha::ChaCha8Rng,
    shares: &[(&'static str, f64)],
    n: usize,
) -> Vec<&'static str> {
    let total: f64 = shares.iter().map(|s| s.1.max(0.0)).sum();
    if shares.is_empty() || total <= 0.0 {
        return vec!["ascii"; n];
    }
    let exact: Vec<f64> = shares
        .iter()
        .map(|s| s.1.max(0.0) / total * n as f64)
        .collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = n - counts.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &k in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[k] += 1;
        left -= 1;
    }
    let mut out: Vec<&'static str> = Vec::with_capacity(n);
    for (k, &c) in counts.iter().enumerate() {
        out.extend(std::iter::repeat_n(shares[k].0, c));
    }
    for i in (1..out.len()).rev() {
        out.swap(i, below(rng, i + 1));
    }
    out
}

/// The highest measured quantile (the tail above it is what the total is matched with).
fn last_point_q(pts: &[(f64, f64)]) -> f64 {
    pts.last().map_or(1.0, |p| p.0)
}

/// Extensions Obsidian shows inline; a twin's embeds go to attachments carrying one.
const EMBEDDABLE: &[&str] = &[
    ".avif", ".bmp", ".gif", ".heic", ".jpeg", ".jpg", ".png", ".svg", ".webp",
];

/// Extensions a file over 8 MiB most likely had, most likely first (video, audio, archives,
/// documents): a shape counts extensions, not which of them the large files carried.
const LARGE_FIRST: &[&str] = &[
    "mp4", "mov", "webm", "zip", "pdf", "m4a", "wav", "mp3", "ogg", "pptx", "docx", "bin", "other",
    "none",
];

/// The suffixes (`.png`, or `""` for none) of a twin's images and of its large attachments,
/// from `p.attachment_extensions`: the large ones take the likeliest large-file extensions,
/// the images the rest in a seeded order. Both empty when the profile names none (every
/// image a `.png`, every large one a `.bin`); a count short of the attachments leaves the
/// rest at those defaults, and one beyond them is dropped.
fn extensions(p: &Profile, seed: u64, n_images: u32) -> (Vec<String>, Vec<String>) {
    if p.attachment_extensions.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let suffix = |e: &str| match e {
        "none" => String::new(),
        // An extension outside the shape file's list: one that is in no list.
        "other" => ".dat".to_owned(),
        e => format!(".{e}"),
    };
    let mut left: std::collections::BTreeMap<&str, u32> = p
        .attachment_extensions
        .iter()
        .map(|(e, &k)| (e.as_str(), k))
        .collect();
    let mut large = Vec::new();
    let mut order: Vec<&str> = LARGE_FIRST.to_vec();
    order.extend(left.keys().filter(|e| !LARGE_FIRST.contains(e)));
    for e in order {
        while (large.len() as u32) < p.large_attachments {
            match left.get_mut(e) {
                Some(k) if *k > 0 => {
                    *k -= 1;
                    large.push(suffix(e));
                }
                _ => break,
            }
        }
    }
    let mut images: Vec<String> = left
        .iter()
        .flat_map(|(e, &k)| std::iter::repeat_n(suffix(e), k as usize))
        .take(n_images as usize)
        .collect();
    let mut rng = stream(seed, Purpose::AttachmentPlan, 1);
    for i in (1..images.len()).rev() {
        images.swap(i, below(&mut rng, i + 1));
    }
    while images.len() < n_images as usize {
        images.push(".png".to_owned());
    }
    (images, large)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;

    #[test]
    fn fixture_folders_and_depth() {
        let p = profile("fixture").unwrap();
        let plan = Plan::new(&p, p.default_seed);
        assert_eq!(plan.folders.len(), 60);
        let used: BTreeSet<&str> = plan
            .notes
            .iter()
            .map(|n| &n.path[..usize::from(n.stem_at) - 1])
            .collect();
        assert_eq!(used.len(), 60, "every folder holds a note");
        assert!(plan.folders.iter().all(|f| f.matches('/').count() < 3));
        for f in &plan.folders {
            if let Some((parent, _)) = f.rsplit_once('/') {
                assert!(plan.folders.iter().any(|g| g == parent), "{parent} missing");
            }
        }
    }

    #[test]
    fn folders_by_depth_are_exact() {
        let mut rng = stream(3, Purpose::NotePlan, 0);
        // More top-level folders than there are distinct folder names; the depth after an
        // empty one is not built (its folders would have no parent).
        let f = folders_by_depth(&[20_000, 5, 0, 7], &mut rng);
        assert_eq!(f.len(), 20_005);
        let set: BTreeSet<&str> = f.iter().map(String::as_str).collect();
        assert_eq!(set.len(), f.len(), "distinct");
        assert_eq!(f.iter().filter(|x| x.contains('/')).count(), 5);
        for x in &f {
            if let Some((parent, _)) = x.rsplit_once('/') {
                assert!(set.contains(parent), "{parent} missing");
            }
        }
    }

    #[test]
    fn titles_are_unique_and_found() {
        let p = profile("personal").unwrap();
        let plan = Plan::new(&p, 9);
        let set: BTreeSet<&str> = plan.notes.iter().map(|n| n.title()).collect();
        assert_eq!(set.len(), plan.notes.len());
        assert!(plan.has_title(plan.notes[17].title()));
        assert!(!plan.has_title("Definitely not a generated title"));
    }

    #[test]
    fn small_has_twenty_pairs() {
        let p = profile("small").unwrap();
        let plan = Plan::new(&p, p.default_seed);
        assert_eq!(plan.notes.iter().filter(|n| n.dup_of.is_some()).count(), 20);
        let leaders: BTreeSet<u32> = plan.notes.iter().filter_map(|n| n.dup_of).collect();
        assert_eq!(leaders.len(), 20);
    }
}

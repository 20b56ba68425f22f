//! Shape tests: `personal` within the real-vault ranges (docs/src/vaults/real-vaults.md), profile-specific
//! promises (small's links all resolve, assets = small + one PNG each, fixture's count),
//! and seeds that differ.

use std::collections::{BTreeMap, BTreeSet};

use scenarios::links::{LinkIndex, links};
use scenarios::{generate, manifest};

use crate::{files, prof};

/// Link statistics of a vault's Markdown notes (the profile's notes; hazard files aside).
#[derive(Debug, Default)]
pub struct LinkStats {
    pub links: usize,
    pub unresolved: usize,
    pub same_note: usize,
    pub embeds: usize,
    pub unresolved_embeds: usize,
    pub max_incoming: usize,
}

pub fn link_stats(all: &[(String, Vec<u8>)], notes: usize) -> LinkStats {
    let idx = LinkIndex::new(all.iter().map(|(p, _)| p.as_str()));
    let mut s = LinkStats::default();
    let mut incoming: BTreeMap<String, usize> = BTreeMap::new();
    // The generator yields the profile's notes first.
    for (_, bytes) in all.iter().take(notes) {
        let text = std::str::from_utf8(bytes).expect("notes are UTF-8");
        for l in links(text) {
            let ok = idx.resolves(text, &l);
            if l.embed {
                s.embeds += 1;
                s.unresolved_embeds += usize::from(!ok);
                continue;
            }
            s.links += 1;
            s.unresolved += usize::from(!ok);
            if l.target.starts_with('#') {
                s.same_note += 1;
            } else if ok {
                *incoming.entry(l.target.clone()).or_default() += 1;
            }
        }
    }
    s.max_incoming = incoming.values().copied().max().unwrap_or(0);
    s
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn personal_is_within_real_vault_ranges() {
    let p = prof("personal");
    let all = files(&p, p.default_seed);
    let n = p.notes as usize;
    let notes = &all[..n];
    assert!(notes.iter().all(|(path, _)| path.ends_with(".md")));

    // Note sizes: log-normal, sigma ~1.0 [0.87-1.25], median in the real range (230 B-5.2 KB).
    let mut sizes: Vec<f64> = notes
        .iter()
        .map(|(_, b)| b.len() as f64)
        .filter(|&s| s > 0.0)
        .collect();
    let med = median(&mut sizes);
    let logs: Vec<f64> = sizes.iter().map(|s| s.ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let sigma = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
    let empty = notes.iter().filter(|(_, b)| b.is_empty()).count();
    let max = sizes.iter().copied().fold(0.0, f64::max);
    eprintln!("personal: median {med} B, sigma {sigma:.3}, empty {empty}, max {max} B");
    assert!((1500.0..2500.0).contains(&med), "median note size {med}");
    assert!((0.87..=1.25).contains(&sigma), "sigma {sigma}");
    assert!(empty >= 1, "0-byte notes appear in most vaults");
    assert!((38_000.0..=560_000.0).contains(&max), "largest note {max}");

    // Links: mean 2.1 [1.0-6.6] per note, 12 % placeholders [0-20 %], same-note 28-38 % of
    // wikilinks (we declare 30 % of all links), skewed incoming (index notes get 16-125).
    let s = link_stats(&all, n);
    let per_note = s.links as f64 / n as f64;
    let placeholder = s.unresolved as f64 / s.links as f64;
    let same = s.same_note as f64 / s.links as f64;
    eprintln!(
        "personal links: {s:?} per-note {per_note:.2} placeholder {placeholder:.3} same-note {same:.3}"
    );
    assert!((1.6..=2.6).contains(&per_note), "links per note {per_note}");
    assert!(
        (0.09..=0.15).contains(&placeholder),
        "placeholder share {placeholder}"
    );
    assert!((0.24..=0.38).contains(&same), "same-note share {same}");
    assert!(
        (16..=125).contains(&s.max_incoming),
        "most incoming links {}",
        s.max_incoming
    );
    assert_eq!(s.unresolved_embeds, 0);
    let embeds = s.embeds as f64 / n as f64;
    assert!((0.2..=0.4).contains(&embeds), "embeds per note {embeds}");

    // Attachments: 1.3 per note [0.04-4.0], median ~60 KiB [16-170 KiB], bytes 1.6-95x notes.
    let atts: Vec<&(String, Vec<u8>)> = all
        .iter()
        .filter(|(p, _)| p.starts_with("attachments/"))
        .collect();
    let per_note_att = atts.len() as f64 / n as f64;
    let mut att_sizes: Vec<f64> = atts.iter().map(|(_, b)| b.len() as f64).collect();
    let att_med = median(&mut att_sizes);
    let note_bytes: usize = notes.iter().map(|(_, b)| b.len()).sum();
    let att_bytes: usize = atts.iter().map(|(_, b)| b.len()).sum();
    let ratio = att_bytes as f64 / note_bytes as f64;
    eprintln!(
        "personal attachments: {} ({per_note_att:.2}/note), median {att_med} B, bytes {ratio:.1}x notes",
        atts.len()
    );
    assert!((1.25..=1.35).contains(&per_note_att));
    assert!(
        (16.0 * 1024.0..=170.0 * 1024.0).contains(&att_med),
        "attachment median {att_med}"
    );
    assert!(
        (1.6..=95.0).contains(&ratio),
        "attachment/note bytes {ratio}"
    );
    for (path, b) in &atts {
        assert!(
            path.ends_with(".png") && b.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{path}"
        );
    }

    // Folders: ~4 per 100 notes, depth <= 3 [2-5], one dominant folder (19-91 %).
    let mut per_folder: BTreeMap<&str, usize> = BTreeMap::new();
    for (path, _) in notes {
        *per_folder
            .entry(path.rsplit_once('/').map_or("", |(d, _)| d))
            .or_default() += 1;
    }
    let folders_per_100 = per_folder.len() as f64 * 100.0 / n as f64;
    let dominant = *per_folder.values().max().unwrap() as f64 / n as f64;
    let depth = per_folder
        .keys()
        .map(|d| d.matches('/').count() + 1)
        .max()
        .unwrap();
    eprintln!(
        "personal folders: {} ({folders_per_100:.1}/100 notes), dominant {dominant:.2}, depth {depth}",
        per_folder.len()
    );
    assert!((3.0..=5.0).contains(&folders_per_100));
    assert!(
        (0.19..=0.91).contains(&dominant),
        "dominant folder share {dominant}"
    );
    assert!((2..=5).contains(&depth));

    // Frontmatter is bimodal (79-100 % or 0-40 %); non-ASCII in 4-90 %; tasks <= 3 %.
    let fm = notes
        .iter()
        .filter(|(_, b)| b.starts_with(b"---\n"))
        .count() as f64
        / n as f64;
    let non_ascii = notes.iter().filter(|(_, b)| !b.is_ascii()).count() as f64 / n as f64;
    let tasks = notes
        .iter()
        .filter(|(_, b)| b.windows(6).any(|w| w == b"- [ ] " || w == b"- [x] "))
        .count() as f64
        / n as f64;
    let code = notes
        .iter()
        .filter(|(_, b)| b.windows(3).any(|w| w == b"```"))
        .count();
    eprintln!(
        "personal: frontmatter {fm:.2}, non-ascii {non_ascii:.2}, tasks {tasks:.3}, notes with code {code}"
    );
    assert!(fm >= 0.79, "frontmatter share {fm}");
    assert!(
        (0.04..=0.9).contains(&non_ascii),
        "non-ASCII share {non_ascii}"
    );
    assert!(tasks <= 0.03 && tasks > 0.0, "task share {tasks}");
    assert!(code > 0);
    assert!(all.iter().any(|(p, _)| p.starts_with(".obsidian/")));
}

#[test]
fn small_links_all_resolve_with_fanout_three() {
    let p = prof("small");
    let all = files(&p, p.default_seed);
    assert_eq!(all.len(), 100);
    let s = link_stats(&all, 100);
    assert_eq!(s.unresolved, 0, "small: every link resolves");
    assert_eq!(s.links, 300, "fan-out 3 on 100 notes");
    // 20 duplicate-body groups: 20 contents each held by exactly two notes.
    let mut by_content: BTreeMap<&[u8], usize> = BTreeMap::new();
    for (_, b) in &all {
        *by_content.entry(b.as_slice()).or_default() += 1;
    }
    assert_eq!(by_content.values().filter(|&&c| c == 2).count(), 20);
    assert_eq!(by_content.values().filter(|&&c| c > 2).count(), 0);
}

#[test]
fn assets_is_small_plus_one_png_per_note() {
    let (s, a) = (prof("small"), prof("assets"));
    let small = files(&s, s.default_seed);
    let assets = files(&a, a.default_seed);
    assert_eq!(assets.len(), 200);
    let pngs: Vec<&(String, Vec<u8>)> =
        assets.iter().filter(|(p, _)| p.ends_with(".png")).collect();
    assert_eq!(pngs.len(), 100);
    for (_, b) in &pngs {
        assert_eq!(b.len(), 72, "a 1x1 PNG");
        assert!(b.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
    let idx = LinkIndex::new(assets.iter().map(|(p, _)| p.as_str()));
    let mut embedded = BTreeSet::new();
    for ((sp, sb), (ap, ab)) in small.iter().zip(&assets) {
        assert_eq!(sp, ap);
        // The assets note is the small note plus one trailing embed line.
        let text = std::str::from_utf8(ab).unwrap();
        let (body, embed) = text.rsplit_once("\n![[").expect("an embed line");
        assert_eq!(
            body.as_bytes(),
            &sb[..],
            "{ap}: notes differ beyond the embed"
        );
        let l = &links(text)
            .into_iter()
            .filter(|l| l.embed)
            .collect::<Vec<_>>()[0];
        assert!(idx.resolves(text, l));
        embedded.insert(embed.trim_end().trim_end_matches("]]").to_owned());
    }
    // Duplicate-body notes repeat their leader's embed: 80 notes' own PNGs are embedded.
    assert_eq!(embedded.len(), 80);
}

#[test]
fn two_seeds_differ_and_one_seed_repeats() {
    let p = prof("small");
    let a = manifest(&p, 1);
    assert_eq!(a, manifest(&p, 1));
    let b = manifest(&p, 2);
    assert_ne!(a.digest, b.digest);
    // Not just a different digest: most notes differ.
    let same = a
        .entries
        .iter()
        .zip(&b.entries)
        .filter(|(x, y)| x.sha256 == y.sha256)
        .count();
    assert!(same < 5, "{same} identical entries across seeds");
}

#[test]
fn fixture_has_7703_files_and_about_317_mib() {
    let p = prof("fixture");
    let mut count = 0;
    let mut bytes = 0;
    let mut large = 0;
    for f in generate(&p, p.default_seed) {
        count += 1;
        bytes += f.size;
        large += usize::from(f.size == 100 * 1024 * 1024);
    }
    assert_eq!(count, 7703);
    assert_eq!(large, 3);
    let mib = bytes as f64 / 1048576.0;
    assert!((312.0..=322.0).contains(&mib), "fixture is {mib:.1} MiB");
}

#[test]
fn hazards_has_every_hazard() {
    let p = prof("hazards");
    let all = files(&p, p.default_seed);
    let paths: BTreeSet<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        all.iter()
            .any(|(p, _)| p.rsplit('/').next().unwrap().len() == 255),
        "255-byte name"
    );
    for pair in [
        scenarios::hazards::CASE_PAIR,
        scenarios::hazards::NORMALISATION_PAIR,
    ] {
        assert!(paths.contains(pair[0]) && paths.contains(pair[1]));
    }
    assert!(all.iter().filter(|(p, _)| p.ends_with("/Index.md")).count() >= 61);
    assert!(
        all.iter()
            .any(|(p, _)| p.contains('\u{1f680}') && p.contains(' '))
    );
    assert!(all.iter().filter(|(_, b)| b.is_empty()).count() >= 3);
    assert!(
        all.iter()
            .any(|(p, b)| p.ends_with(".md") && b.len() == 500_000)
    );
    let obsidian: Vec<_> = all
        .iter()
        .filter(|(p, _)| p.starts_with(".obsidian/"))
        .collect();
    assert!(
        obsidian
            .iter()
            .filter(|(p, _)| p.ends_with(".json"))
            .count()
            >= 100
    );
    assert!(
        obsidian
            .iter()
            .any(|(p, b)| p.ends_with("main.js") && b.len() >= 2 * 1024 * 1024)
    );
    assert!(
        all.iter()
            .any(|(p, b)| !p.ends_with(".md") && b.len() >= 4 * 1024 * 1024)
    );
    // Paths are unique byte strings (NFC and NFD differ), and contain no backslash or `..`.
    assert_eq!(paths.len(), all.len());
    assert!(
        paths
            .iter()
            .all(|p| !p.contains('\\') && !p.split('/').any(|c| c == ".." || c.is_empty()))
    );
}

#[test]
fn vault1k_uses_markdown_links_that_resolve() {
    let p = prof("vault1k");
    let all = files(&p, p.default_seed);
    let s = link_stats(&all, p.notes as usize);
    let share = s.unresolved as f64 / s.links as f64;
    eprintln!("vault1k links: {s:?}");
    assert!(s.links > 1500);
    assert!((0.08..=0.16).contains(&share), "placeholder share {share}");
    let text = std::str::from_utf8(&all[3].1).unwrap_or("");
    assert!(
        !text.contains("[[") || text.is_empty(),
        "Markdown style has no wikilinks"
    );
}

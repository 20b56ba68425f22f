//! Property tests: for any seed, the manifest matches the files once written to disk, and
//! links resolve except the profile's declared placeholder share.

use std::path::Path;

use proptest::prelude::*;
use scenarios::{Manifest, ManifestEntry, generate, hash_reader, manifest};

use crate::prof;
use crate::shape::link_stats;

/// Writes a generated vault the plain way and reads it back into a manifest.
fn write_and_read(name: &str, seed: u64, dir: &Path) -> Manifest {
    for f in generate(&prof(name), seed) {
        let full = dir.join(&f.path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        let mut out = std::fs::File::create(&full).unwrap();
        std::io::copy(&mut f.reader(), &mut out).unwrap();
    }
    let mut entries = Vec::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for e in std::fs::read_dir(&abs).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type().unwrap().is_dir() {
                stack.push((e.path(), child));
            } else {
                let (size, sha256) = hash_reader(std::fs::File::open(e.path()).unwrap()).unwrap();
                entries.push(ManifestEntry {
                    path: child,
                    size,
                    sha256,
                });
            }
        }
    }
    Manifest::from_entries(entries)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    #[test]
    fn manifest_matches_files_on_disk(seed in any::<u64>(), which in 0usize..3) {
        let name = ["small", "assets", "hazards"][which];
        let d = tempfile::tempdir().unwrap();
        let on_disk = write_and_read(name, seed, d.path());
        let expected = manifest(&prof(name), seed);
        prop_assert_eq!(expected.first_difference(&on_disk), None);
        prop_assert_eq!(&expected.digest, &on_disk.digest);
        prop_assert_eq!(expected.entries.len(), generate(&prof(name), seed).file_count());
    }

    #[test]
    fn links_resolve_except_declared_placeholders(seed in any::<u64>(), which in 0usize..2) {
        let name = ["small", "vault1k"][which];
        let p = prof(name);
        let all = crate::files(&p, seed);
        let s = link_stats(&all, p.notes as usize);
        prop_assert_eq!(s.unresolved_embeds, 0);
        if p.placeholder_share == 0.0 {
            prop_assert_eq!(s.unresolved, 0);
        } else {
            // ~2,000 links: a binomial share within +-4 points of the declared one.
            let share = s.unresolved as f64 / s.links as f64;
            prop_assert!((share - p.placeholder_share).abs() < 0.04, "share {} declared {}", share, p.placeholder_share);
        }
    }
}

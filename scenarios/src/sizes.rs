//! Vault sizes of a growth scenario (`sizes = [1000, 5000, 10000]`): each sample runs the
//! scenario's phases once per size, in order, each over a fresh server whose data dir holds
//! the first `n` notes of the scenario's one vault in generation order (the same notes plus
//! more at each size). This module checks the list against the profile and names the notes of
//! each size; the harness runs them (a protocol whose client can boot a fresh server per size;
//! the others refuse the field).

use crate::plan::Plan;
use crate::profile::Profile;

/// The fewest sizes: a fitted exponent needs three points for an interval.
pub const MIN_SIZES: usize = 3;
/// The most sizes (each boots a server and runs the whole workload).
pub const MAX_SIZES: usize = 12;
/// The smallest size: a vault of fewer notes has no folder or search to speak of.
pub const MIN_SIZE: u32 = 10;

/// Checks `sizes` alone: at least [`MIN_SIZES`], at most [`MAX_SIZES`], each at least
/// [`MIN_SIZE`], strictly increasing. The error is the message after `sizes`.
pub fn check(sizes: &[u32]) -> Result<(), String> {
    if sizes.len() < MIN_SIZES || sizes.len() > MAX_SIZES {
        return Err(format!(
            "{sizes:?} must hold {MIN_SIZES} to {MAX_SIZES} sizes (a fitted exponent needs three)"
        ));
    }
    if let Some(n) = sizes.iter().find(|n| **n < MIN_SIZE) {
        return Err(format!("{n} is below {MIN_SIZE} notes"));
    }
    if sizes.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("{sizes:?} must be strictly increasing"));
    }
    Ok(())
}

/// Checks `sizes` against the vault `p` makes: the largest size is at most its notes, and it
/// holds nothing but notes (attachments and config files cannot be shared out over a prefix
/// of notes). The error is the message after `sizes`.
pub fn check_profile(sizes: &[u32], p: &Profile, seed: u64) -> Result<(), String> {
    let others = other_files(p, seed);
    if others > 0 {
        return Err(format!(
            "take the first n notes of a notes-only vault; profile {} also has {others} other files (attachments, config, hazard names): use a notes-only profile such as large or large-queries",
            p.name
        ));
    }
    match sizes.last() {
        Some(&n) if n > p.notes => Err(format!(
            "{n} is more than the {} notes of profile {}",
            p.notes, p.name
        )),
        _ => Ok(()),
    }
}

/// Files of `p`'s vault from `seed` that are not notes.
fn other_files(p: &Profile, seed: u64) -> usize {
    let files = crate::generate(p, seed);
    files.file_count() - p.notes as usize
}

/// The vault-relative paths of `p`'s notes from `seed`, in generation order: size `n` holds
/// the first `n`. Made from the plan alone (no note is rendered).
pub fn note_paths(p: &Profile, seed: u64) -> Vec<String> {
    Plan::new(p, seed)
        .notes
        .into_iter()
        .map(|n| n.path)
        .collect()
}

/// A size as a key segment: `n` and five digits or more (`n01000`, `n10000`), so the keys of
/// one recording sort by size.
pub fn segment(n: u32) -> String {
    format!("n{n:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_three_or_more_increasing_and_within_the_notes_only_vault() {
        assert!(check(&[100, 300, 1000]).is_ok());
        assert!(check(&[100, 1000]).unwrap_err().contains("three"));
        assert!(check(&[100, 100, 1000]).unwrap_err().contains("increasing"));
        assert!(check(&[300, 100, 1000]).unwrap_err().contains("increasing"));
        assert!(check(&[5, 100, 1000]).unwrap_err().contains("below 10"));
        let large = crate::profile("large").unwrap();
        assert!(check_profile(&[1000, 5000, 10_000], &large, 1).is_ok());
        let e = check_profile(&[1000, 5000, 20_000], &large, 1).unwrap_err();
        assert!(e.contains("20000 is more than the 10000 notes"), "{e}");
        let v = crate::profile("vault1k").unwrap();
        let e = check_profile(&[100, 300, 1000], &v, 1).unwrap_err();
        assert!(e.contains("notes-only") && e.contains("vault1k"), "{e}");
    }

    #[test]
    fn note_paths_are_the_generation_order_and_segments_sort() {
        let p = crate::profile("small").unwrap();
        let paths = note_paths(&p, 7);
        let generated: Vec<String> = crate::generate(&p, 7).map(|f| f.path).collect();
        assert_eq!(paths, generated[..paths.len()]);
        assert_eq!(segment(1000), "n01000");
        assert_eq!(segment(10_000), "n10000");
        assert_eq!(segment(100_000), "n100000");
        assert!(segment(5000) < segment(10_000));
    }
}

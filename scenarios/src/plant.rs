//! Planted queries: a seeded set of search queries with known answers, for scoring a search
//! tool's retrieval (recall@10, nDCG@10, MRR). Each query is a rare phrase of three made-up
//! words placed in a known set of notes (its relevant notes); decoy notes each hold one word
//! of the phrase, three times, but never the phrase, so a search that ranks by single words
//! alone (term frequency) puts a decoy above a relevant note and loses rank.
//!
//! A profile plants only when its `planted_queries` is above 0, so every other profile's
//! bytes are untouched. The ground truth is a function of (profile, seed) only: [`queries`]
//! recomputes it from the plan without generating a byte of the vault.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::Plan;
use crate::profile::Profile;
use crate::rng::{Purpose, below, stream};
use crate::text::WORDS;

/// Words in a phrase.
pub const PHRASE_WORDS: usize = 3;
/// Decoy notes per query: one per word of the phrase.
pub const DECOYS: usize = PHRASE_WORDS;
/// The fewest and most relevant notes of a query.
pub const MIN_RELEVANT: usize = 2;
pub const MAX_RELEVANT: usize = 4;

/// One planted query and its ground truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlantedQuery {
    /// The phrase, lowercase ASCII words joined by single spaces: the query text.
    pub phrase: String,
    /// The notes that hold the phrase (vault-relative paths, sorted by bytes).
    pub relevant: Vec<String>,
    /// The notes that hold single words of it and not the phrase (sorted by bytes).
    pub decoys: Vec<String>,
}

/// What planting adds to the notes: the text appended to note `i`, by index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Planting {
    pub queries: Vec<PlantedQuery>,
    pub appended: BTreeMap<u32, String>,
}

/// A made-up word: consonant-vowel syllables closed by `x`, `q` or `z` (no English word of
/// the text generator ends so), 7 letters.
fn made_up_word(rng: &mut rand_chacha::ChaCha8Rng) -> String {
    const C: &[u8] = b"bdfgklmnprstv";
    const V: &[u8] = b"aeiou";
    const END: &[u8] = b"xqz";
    let mut w = String::with_capacity(7);
    for _ in 0..3 {
        w.push(C[below(rng, C.len())] as char);
        w.push(V[below(rng, V.len())] as char);
    }
    w.push(END[below(rng, END.len())] as char);
    w
}

/// The queries of `p` from `seed` and the text each chosen note gets. Notes are drawn
/// without repetition across all queries (a note serves one query at most); a vault too small
/// for `planted_queries` gets as many as fit.
pub(crate) fn plant(p: &Profile, plan: &Plan, seed: u64) -> Planting {
    let wanted = p.planted_queries as usize;
    let n = match p.plant_first {
        0 => plan.notes.len(),
        k => plan.notes.len().min(k as usize),
    };
    if wanted == 0 || n == 0 {
        return Planting::default();
    }
    let mut rng = stream(seed, Purpose::Plant, 0);
    let mut used_words: BTreeSet<String> = WORDS.iter().map(|w| (*w).to_owned()).collect();
    // Seeded order of the notes (Fisher–Yates); queries take them from the front.
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, below(&mut rng, i + 1));
    }
    let mut next = 0;
    let mut out = Planting::default();
    for _ in 0..wanted {
        let relevant_n = MIN_RELEVANT + below(&mut rng, MAX_RELEVANT - MIN_RELEVANT + 1);
        if next + relevant_n + DECOYS > n {
            break;
        }
        let mut words = Vec::with_capacity(PHRASE_WORDS);
        while words.len() < PHRASE_WORDS {
            let w = made_up_word(&mut rng);
            if used_words.insert(w.clone()) {
                words.push(w);
            }
        }
        let phrase = words.join(" ");
        let mut relevant = Vec::with_capacity(relevant_n);
        for _ in 0..relevant_n {
            let i = order[next];
            next += 1;
            out.appended
                .insert(i, format!("\n\nA note on the {phrase} for later.\n"));
            relevant.push(plan.notes[i as usize].path.clone());
        }
        let mut decoys = Vec::with_capacity(DECOYS);
        for w in &words {
            let i = order[next];
            next += 1;
            out.appended
                .insert(i, format!("\n\nThe {w} again: {w}, and one more {w}.\n"));
            decoys.push(plan.notes[i as usize].path.clone());
        }
        relevant.sort();
        decoys.sort();
        out.queries.push(PlantedQuery {
            phrase,
            relevant,
            decoys,
        });
    }
    out
}

/// The planted queries of the vault `p` makes from `seed` (empty when it plants none), in
/// the order they were drawn. Recomputed from the plan: no file is generated.
pub fn queries(p: &Profile, seed: u64) -> Vec<PlantedQuery> {
    if p.planted_queries == 0 {
        return Vec::new();
    }
    plant(p, &Plan::new(p, seed), seed).queries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;
    use crate::profile::profile;

    #[test]
    fn phrases_sit_in_their_notes_and_decoys_hold_words_but_not_the_phrase() {
        let p = profile("small-queries").unwrap();
        let q = queries(&p, p.default_seed);
        assert_eq!(q.len(), 8);
        assert_eq!(q, queries(&p, p.default_seed), "seeded");
        assert_ne!(q, queries(&p, p.default_seed + 1));
        let files: BTreeMap<String, String> = generate(&p, p.default_seed)
            .map(|f| {
                (
                    f.path.clone(),
                    String::from_utf8_lossy(&f.to_vec()).into_owned(),
                )
            })
            .collect();
        let mut seen = BTreeSet::new();
        for query in &q {
            let words: Vec<&str> = query.phrase.split(' ').collect();
            assert_eq!(words.len(), PHRASE_WORDS);
            assert!((MIN_RELEVANT..=MAX_RELEVANT).contains(&query.relevant.len()));
            assert_eq!(query.decoys.len(), DECOYS);
            let holding: Vec<&String> = files
                .iter()
                .filter(|(_, t)| t.contains(&query.phrase))
                .map(|(p, _)| p)
                .collect();
            assert_eq!(holding, query.relevant.iter().collect::<Vec<_>>());
            for (d, w) in query.decoys.iter().zip(0..) {
                let t = &files[d];
                assert!(!t.contains(&query.phrase), "{d}");
                assert!(
                    words.iter().any(|w| t.contains(w)),
                    "{d} holds a word ({w})"
                );
            }
            for path in query.relevant.iter().chain(&query.decoys) {
                assert!(seen.insert(path.clone()), "{path} serves one query");
            }
            // No word of any phrase is in a note that was not planted with it.
            for w in &words {
                for (path, t) in &files {
                    if t.contains(w) {
                        assert!(
                            query.relevant.contains(path) || query.decoys.contains(path),
                            "{w} in {path}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn no_planting_leaves_the_profile_alone_and_a_tiny_vault_gets_what_fits() {
        let small = profile("small").unwrap();
        assert!(queries(&small, 1).is_empty());
        let planted = Profile {
            planted_queries: 8,
            ..small.clone()
        };
        let plain: Vec<Vec<u8>> = generate(&small, 1).map(|f| f.to_vec()).collect();
        let with: Vec<Vec<u8>> = generate(&planted, 1).map(|f| f.to_vec()).collect();
        assert_eq!(plain.len(), with.len());
        let changed = plain.iter().zip(&with).filter(|(a, b)| a != b).count();
        let q = queries(&planted, 1);
        let planted_notes: usize = q.iter().map(|q| q.relevant.len() + q.decoys.len()).sum();
        assert_eq!(changed, planted_notes);
        let tiny = Profile {
            notes: 10,
            folders: 2,
            dup_groups: 0,
            planted_queries: 50,
            ..small
        };
        let q = queries(&tiny, 1);
        assert!(!q.is_empty() && q.len() <= 2, "{}", q.len());
    }
}

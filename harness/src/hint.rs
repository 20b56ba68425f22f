//! Names close to a mistyped one: the hint in an unknown scenario's or profile's refusal.

/// The message for a scenario name that is not built in: the closest built-in names, and
/// where the list is.
pub fn unknown_scenario(name: &str) -> String {
    let names = scenarios::scenario::builtin_names();
    let close = did_you_mean(name, &names);
    let hint = match close.split_last() {
        None => format!("known: {}; ", names.join(", ")),
        Some((last, [])) => format!("did you mean {last}? "),
        Some((last, rest)) => format!("did you mean {} or {last}? ", rest.join(", ")),
    };
    format!(
        "unknown scenario {name:?} ({hint}`vaultbench scenarios` lists the built-ins; a file of your own goes to --scenario-file)"
    )
}

/// The candidates within a small edit distance of `word` (at most a third of its length, at
/// least 2), closest first, or those that start with it.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &'a str)> = candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= limit || (word.len() >= 3 && c.starts_with(word)))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

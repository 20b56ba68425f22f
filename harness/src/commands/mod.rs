//! One file per subcommand: argument structs and flows. The pipeline pieces they call live
//! in `prepare`, `sample`, `gate` and `recording`.

pub mod ab;
pub mod bisect;
pub mod calibrate;
pub mod class;
pub mod hlog;
pub mod load;
pub mod probe;
pub mod record;
pub mod report;
pub mod sample;
pub mod scenario_list;
pub mod vault;
pub mod verify;

/// The positional scenario's help, listing the built-ins from `scenarios::scenario::BUILTIN`.
pub fn scenario_help() -> String {
    let names = scenarios::scenario::builtin_names();
    let of = |suffix: &str| -> Vec<&str> {
        names
            .iter()
            .copied()
            .filter(|n| n.ends_with(suffix))
            .collect()
    };
    let obsync: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !n.ends_with("-webdav") && !n.ends_with("-couchdb"))
        .collect();
    format!(
        "A built-in scenario: {}; over WebDAV (with a WebDAV target): {}; over CouchDB (with a CouchDB target): {}. Or --scenario-file",
        obsync.join(", "),
        of("-webdav").join(", "),
        of("-couchdb").join(", ")
    )
}

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

/// A target flag's help: what `what` may be, with the presets from `loadgen::launch`.
pub fn target_help(what: &str) -> String {
    format!(
        "{what}: `ref` (the reference server), `ref FLAGS`, an executable (it gets `--listen {{addr}} \
         --data {{data}}`), a command line using {{addr}}, {{host}}, {{port}} and {{data}}, a target \
         file (TOML), or a preset: {}",
        loadgen::launch::preset_names().join(", ")
    )
}

/// The note for a flag given under its deprecated name.
pub fn renamed(old: &str, new: &str) -> String {
    format!("note: {old} is deprecated and will be removed in the next release: write {new}")
}

/// The scenario, given the same way to `record` and `ab`: positional, or `--scenario`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScenarioArg {
    #[arg(
        value_name = "SCENARIO",
        help = scenario_help(),
        required_unless_present_any = ["scenario_file", "scenario_flag"]
    )]
    pub scenario: Option<String>,
    /// The scenario, as a flag (the same as the positional SCENARIO).
    #[arg(
        long = "scenario",
        id = "scenario_flag",
        value_name = "SCENARIO",
        conflicts_with = "scenario"
    )]
    pub scenario_flag: Option<String>,
}

impl ScenarioArg {
    /// The built-in scenario named, however it was given.
    pub fn name(&self) -> Option<&str> {
        self.scenario.as_deref().or(self.scenario_flag.as_deref())
    }
}

//! The scenario TOML loader on garbage and on mutated built-ins: a scenario or a one-line
//! error naming its origin, never a panic; an accepted scenario writes back to TOML that
//! loads equal (the `scenario_toml` fuzz target in `fuzz/` runs the same for longer).

use proptest::prelude::*;
use scenarios::scenario::{BUILTIN, parse};

fn check(text: &str) -> Result<(), TestCaseError> {
    match parse(text, "mutant.toml") {
        Ok(s) => {
            let written = toml::to_string(&s).expect("an accepted scenario serialises");
            let back = parse(&written, "written").expect("a written scenario loads");
            prop_assert_eq!(back, s);
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.contains("mutant.toml"), "{}", msg);
            prop_assert!(!msg.contains('\n'), "{}", msg);
        }
    }
    Ok(())
}

#[test]
fn every_builtin_round_trips_through_toml() {
    for (name, text) in BUILTIN {
        let s = parse(text, name).unwrap();
        let back = parse(&toml::to_string(&s).unwrap(), name).unwrap();
        assert_eq!(back, s, "{name}");
    }
}

#[test]
fn no_builtin_names_a_report_outside_the_repository() {
    // A scenario's doc is shown by `vaultbench scenarios`: it says what a report measured,
    // not the report's file name, which a user does not have.
    for (name, text) in BUILTIN {
        for word in [
            "calternal",
            "trip2g",
            "obsync-speed-report",
            "mcp-server-perf",
        ] {
            assert!(!text.contains(word), "{name} names {word}");
        }
    }
    for p in scenarios::PROFILE_NAMES {
        let d = scenarios::profile(p).unwrap().doc;
        assert!(
            !d.contains("calternal") && !d.contains("trip2g"),
            "{p}: {d}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn garbage_text_is_an_error_naming_the_file(text in "\\PC{0,200}") {
        check(&text)?;
    }

    #[test]
    fn mutated_builtins_load_or_fail_cleanly(
        which in 0..BUILTIN.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..4, "[-0-9a-z_=\\[\\]\" .\n]{0,6}"), 1..4),
    ) {
        let mut text = BUILTIN[which].1.to_owned();
        for (at, del, ins) in &edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            let mut j = (i + del).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            text.replace_range(i..j, ins);
        }
        check(&text)?;
    }
}

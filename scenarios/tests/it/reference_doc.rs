//! The book's scenario chapter (docs/src/scenarios.md) against the scenario types: every
//! phase kind, every field of every kind, every scenario, `[webdav]`, `[s3]` and `[client]` field, every
//! `[[fault]]` field and kind, and every `kill_at` value is documented. The lists come from the
//! types themselves (serde's "expected one of" when it meets an unknown name), so a new kind or
//! field fails this test until the chapter has it.

use scenarios::scenario::Scenario;

const BASE: &str = "name = \"x\"\ndoc = \"x\"\nprofile = \"small\"\n";

/// The names serde lists when it refuses `zzz` in `toml` (empty when it lists none).
fn expected(toml_text: &str) -> Vec<String> {
    expected_or_none(toml_text).unwrap_or_else(|| panic!("the probe {toml_text:?} parsed"))
}

/// As [`expected`], `None` when the probe parses: serde lets a field-less phase kind
/// (`cold_start`) carry an unknown field, so it has no field list to give.
fn expected_or_none(toml_text: &str) -> Option<Vec<String>> {
    let err = match toml::from_str::<Scenario>(toml_text) {
        Ok(_) => return None,
        Err(e) => e.message().to_owned(),
    };
    assert!(
        err.contains("zzz"),
        "unexpected error for {toml_text:?}: {err}"
    );
    let Some(after) = err.split("expected").nth(1) else {
        return Some(Vec::new());
    };
    Some(
        after
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

fn chapter() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/scenarios.md");
    std::fs::read_to_string(path).expect("docs/src/scenarios.md")
}

/// The lines of the section whose heading is exactly `heading`, up to the next heading of the
/// same or a higher level.
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut lines = doc.lines().skip_while(|l| l.trim_end() != heading);
    assert!(
        lines.next().is_some(),
        "the chapter has no heading {heading:?}"
    );
    lines
        .take_while(|l| {
            let n = l.chars().take_while(|c| *c == '#').count();
            n == 0 || n > level || !l[n..].starts_with(' ')
        })
        .collect()
}

fn has_row(lines: &[&str], name: &str) -> bool {
    let cell = format!("| `{name}` |");
    lines.iter().any(|l| l.starts_with(&cell))
}

#[test]
fn the_chapter_documents_every_phase_kind_and_field() {
    let doc = chapter();
    let mut missing = Vec::new();

    let kinds = expected(&format!("{BASE}[[phase]]\nkind = \"zzz\"\n"));
    assert!(kinds.len() >= 10, "phase kinds from serde: {kinds:?}");
    let mut fields_seen = 0;
    for kind in &kinds {
        let heading = format!("### `{kind}`");
        if !doc.lines().any(|l| l.trim_end() == heading) {
            missing.push(format!("phase kind {kind}"));
            continue;
        }
        let lines = section(&doc, &heading);
        let fields = expected_or_none(&format!("{BASE}[[phase]]\nkind = \"{kind}\"\nzzz = 1\n"))
            .unwrap_or_default();
        fields_seen += fields.len();
        for f in fields.iter().filter(|f| *f != "kind") {
            if !has_row(&lines, f) {
                missing.push(format!("phase {kind}: field {f}"));
            }
        }
    }
    assert!(fields_seen >= 20, "phase fields from serde: {fields_seen}");

    let top = expected(&format!("{BASE}zzz = 1\n"));
    assert!(top.len() >= 10, "scenario fields from serde: {top:?}");
    let lines = section(&doc, "## The scenario");
    for f in &top {
        if !has_row(&lines, f) {
            missing.push(format!("scenario field {f}"));
        }
    }

    let webdav = expected(&format!("{BASE}protocol = \"webdav\"\n[webdav]\nzzz = 1\n"));
    assert!(webdav.len() >= 2, "webdav fields from serde: {webdav:?}");
    let lines = section(&doc, "### `[webdav]`");
    for f in &webdav {
        if !has_row(&lines, f) {
            missing.push(format!("[webdav] field {f}"));
        }
    }
    let s3 = expected(&format!("{BASE}protocol = \"s3\"\n[s3]\nzzz = 1\n"));
    assert!(s3.len() >= 3, "s3 fields from serde: {s3:?}");
    let lines = section(&doc, "### `[s3]`");
    for f in &s3 {
        if !has_row(&lines, f) {
            missing.push(format!("[s3] field {f}"));
        }
    }

    let client = expected(&format!("{BASE}[client]\nzzz = 1\n"));
    assert!(client.len() >= 6, "client fields from serde: {client:?}");
    let lines = section(&doc, "### `[client]`");
    for f in &client {
        if !has_row(&lines, f) {
            missing.push(format!("[client] field {f}"));
        }
    }

    let faults = section(&doc, "## Faults");
    let fault_fields = expected(&format!(
        "{BASE}[[fault]]\nroute = \"*\"\nkind = \"delay\"\nrate = 0.1\nzzz = 1\n"
    ));
    assert!(fault_fields.len() >= 4, "fault fields: {fault_fields:?}");
    let fault_kinds = expected(&format!(
        "{BASE}[[fault]]\nroute = \"*\"\nkind = \"zzz\"\nrate = 0.1\n"
    ));
    assert!(fault_kinds.len() >= 5, "fault kinds: {fault_kinds:?}");
    for f in fault_fields.iter().chain(&fault_kinds) {
        if !has_row(&faults, f) {
            missing.push(format!("[[fault]] {f}"));
        }
    }

    let kill_at = expected(&format!(
        "{BASE}[[phase]]\nkind = \"crash\"\nkill_at = \"zzz\"\n"
    ));
    assert!(kill_at.len() >= 2, "kill_at values: {kill_at:?}");
    let crash = section(&doc, "### `crash`").join("\n");
    for v in &kill_at {
        if !crash.contains(&format!("`\"{v}\"`")) {
            missing.push(format!("crash kill_at value {v}"));
        }
    }

    assert!(
        missing.is_empty(),
        "docs/src/scenarios.md does not document: {missing:?}"
    );
}

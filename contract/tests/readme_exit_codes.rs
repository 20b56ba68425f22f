//! README.md's exit-code table must list exactly the codes and constant names of
//! `contract::exit`, in order.

#[test]
fn readme_table_equals_the_constants() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let section = readme
        .split("## Exit codes")
        .nth(1)
        .expect("README.md has an `## Exit codes` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut rows = Vec::new();
    for line in section.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let Some(Ok(code)) = cells.first().map(|c| c.parse::<i32>()) else {
            continue;
        };
        let name = cells
            .get(1)
            .copied()
            .unwrap_or("")
            .trim_matches('`')
            .to_owned();
        rows.push((code, name));
    }
    let want: Vec<(i32, String)> = contract::exit::ALL
        .iter()
        .map(|(c, n)| (*c, (*n).to_owned()))
        .collect();
    assert_eq!(
        rows, want,
        "README.md's exit-code table and contract::exit disagree"
    );
}

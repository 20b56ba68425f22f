//! Every visible subcommand of the `vaultbench` CLI has a reference page in the book,
//! `docs/src/reference/<name>.md`, listed in `docs/src/SUMMARY.md` and in the reference index;
//! every visible subcommand of a subcommand (`vault gen`, `load push`, `probe fsync`) has a
//! `## <name>` section on its parent's page. The CLI is read from the clap `Command` itself,
//! so a new subcommand without a page fails here.

use clap::CommandFactory;
use std::path::{Path, PathBuf};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src")
}

fn visible(cmd: &clap::Command) -> Vec<&clap::Command> {
    cmd.get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect()
}

/// The problems for one CLI against the pages under `docs`: a missing page, a page the
/// SUMMARY or the index does not list, a nested subcommand without its section.
fn missing_pages(cli: &clap::Command, docs: &Path) -> Vec<String> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let summary = read(&docs.join("SUMMARY.md"));
    let index = read(&docs.join("reference/index.md"));
    let mut out = Vec::new();
    for sub in visible(cli) {
        let name = sub.get_name();
        let page = docs.join("reference").join(format!("{name}.md"));
        if !page.is_file() {
            out.push(format!("`{name}` has no page docs/src/reference/{name}.md"));
            continue;
        }
        let link = format!("(reference/{name}.md)");
        if !summary.contains(&link) {
            out.push(format!("SUMMARY.md does not list reference/{name}.md"));
        }
        if !index.contains(&format!("({name}.md)")) {
            out.push(format!("reference/index.md does not link {name}.md"));
        }
        let text = read(&page);
        for nested in visible(sub) {
            let heading = format!("\n## {}\n", nested.get_name());
            if !text.contains(&heading) {
                out.push(format!(
                    "reference/{name}.md has no `## {}` section",
                    nested.get_name()
                ));
            }
        }
    }
    out
}

#[test]
fn every_subcommand_has_a_reference_page() {
    let cli = harness::Cli::command();
    assert!(visible(&cli).len() >= 10, "read the subcommands from clap");
    let problems = missing_pages(&cli, &docs());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_subcommand_without_a_page_is_found() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("reference")).unwrap();
    std::fs::write(
        t.path().join("SUMMARY.md"),
        "- [vault](reference/vault.md)\n",
    )
    .unwrap();
    std::fs::write(t.path().join("reference/index.md"), "[vault](vault.md)\n").unwrap();
    std::fs::write(t.path().join("reference/vault.md"), "# vault\n\n## gen\n").unwrap();
    let cli = clap::Command::new("vaultbench")
        .subcommand(
            clap::Command::new("vault")
                .subcommand(clap::Command::new("gen"))
                .subcommand(clap::Command::new("list")),
        )
        .subcommand(clap::Command::new("record"))
        .subcommand(clap::Command::new("sample").hide(true));
    assert_eq!(
        missing_pages(&cli, t.path()),
        vec![
            "reference/vault.md has no `## list` section".to_owned(),
            "`record` has no page docs/src/reference/record.md".to_owned(),
        ]
    );
}

//! `vaultbench vault measure` and `vault gen --profile-file`: a shape file holds no name or
//! word of the vault it measured, the same shape and seed write the same vault, and a bad
//! directory or shape file is one line naming it (and the field), exit 2.

use std::fs;
use std::path::Path;

use serde_json::Value;
use testkit::{one_line_error, vb};

fn measure(dir: &Path, out: &Path) {
    vb!()
        .args(["vault", "measure"])
        .arg(dir)
        .arg("--out")
        .arg(out)
        .assert()
        .success();
}

fn gen_twin(shape: &Path, out: &Path, seed: &str) -> Value {
    let o = vb!()
        .args(["vault", "gen", "--profile-file"])
        .arg(shape)
        .arg("--out")
        .arg(out)
        .args(["--seed", seed, "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&o).unwrap()
}

#[test]
fn twin_of_a_generated_vault_is_seeded_and_measures_back() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    vb!()
        .args(["vault", "gen", "small", "--out"])
        .arg(&src)
        .assert()
        .success();
    let shape = d.path().join("shape.toml");
    measure(&src, &shape);
    let a = gen_twin(&shape, &d.path().join("a"), "7");
    let b = gen_twin(&shape, &d.path().join("b"), "7");
    let c = gen_twin(&shape, &d.path().join("c"), "8");
    assert_eq!(a["digest"], b["digest"], "same shape + seed, same bytes");
    assert_ne!(a["digest"], c["digest"], "the seed matters");
    assert_eq!(a["profile"], "twin");
    assert_eq!(a["files"], 100, "small's 100 notes");
    let back = d.path().join("back.toml");
    measure(&d.path().join("a"), &back);
    let (s, t) = (
        scenarios::Shape::parse(&fs::read_to_string(&shape).unwrap(), "s").unwrap(),
        scenarios::Shape::parse(&fs::read_to_string(&back).unwrap(), "t").unwrap(),
    );
    assert_eq!(
        (t.notes.count, t.folders.count, t.notes.duplicate_groups),
        (s.notes.count, s.folders.count, s.notes.duplicate_groups)
    );
    // Folders per depth, root notes, extensions and the hazard-class counts are exact too
    // (scenarios' round-trip test checks the rest of the book's tolerances in memory).
    assert_eq!(
        (&t.folders.by_depth, t.folders.root_notes),
        (&s.folders.by_depth, s.folders.root_notes)
    );
    assert_eq!(t.attachments.extensions, s.attachments.extensions);
    assert_eq!(
        (
            t.names.long_name,
            t.names.case_collision,
            t.names.nfd,
            t.names.emoji
        ),
        (
            s.names.long_name,
            s.names.case_collision,
            s.names.nfd,
            s.names.emoji
        )
    );
    // Measuring is deterministic: the same tree gives the same bytes.
    let again = d.path().join("again.toml");
    measure(&src, &again);
    assert_eq!(fs::read(&again).unwrap(), fs::read(&shape).unwrap());
}

#[test]
fn no_name_or_word_of_the_vault_reaches_the_shape_file() {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("private");
    let secret_words = [
        "Quixotrellis",
        "Zebulonquartz",
        "Marrowvexine",
        "plumbusgrail",
        "Snorklewhist",
        "obscuraflux",
        "Vantablorp",
    ];
    fs::create_dir_all(v.join("Quixotrellis Projects/Zebulonquartz")).unwrap();
    fs::create_dir_all(v.join(".obsidian/plugins/Snorklewhist")).unwrap();
    fs::create_dir_all(v.join("attachments")).unwrap();
    fs::write(
        v.join("Quixotrellis Projects/Zebulonquartz/Marrowvexine plan.md"),
        "---\ntags: [Vantablorp]\n---\n# Marrowvexine\nSee [[Snorklewhist notes]] and [x](obscuraflux.md).\n![[plumbusgrail.obscuraflux]]\n",
    )
    .unwrap();
    fs::write(v.join("Snorklewhist notes.md"), "Vantablorp obscuraflux\n").unwrap();
    fs::write(
        v.join("attachments/plumbusgrail.obscuraflux"),
        vec![7u8; 3000],
    )
    .unwrap();
    fs::write(v.join("attachments/Vantablorp.png"), vec![1u8; 2000]).unwrap();
    fs::write(
        v.join(".obsidian/plugins/Snorklewhist/data.json"),
        "{\"Vantablorp\": 1}",
    )
    .unwrap();
    // A link out of the vault is not followed: its target's name must not show either.
    let outside = d.path().join("Outsidewhirlgig");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("Outsidewhirlgig.md"), "Outsidewhirlgig").unwrap();
    std::os::unix::fs::symlink(&outside, v.join("linked")).unwrap();
    let shape = d.path().join("shape.toml");
    measure(&v, &shape);
    let text = fs::read_to_string(&shape).unwrap();
    for w in secret_words
        .iter()
        .chain(&["Outsidewhirlgig", "Projects", "plan", "linked"])
    {
        assert!(
            !text.to_lowercase().contains(&w.to_lowercase()),
            "{w} leaked into the shape:\n{text}"
        );
    }
    let s = scenarios::Shape::parse(&text, "shape.toml").unwrap();
    assert_eq!(
        (s.notes.count, s.attachments.count, s.config.files),
        (2, 2, 1)
    );
    assert_eq!(s.names.skipped, 1, "the symlink");
    assert_eq!(s.attachments.extensions.get("other"), Some(&1));
    assert_eq!(s.links.wiki + s.links.markdown, 2);
}

#[test]
fn bad_directories_and_shape_files_are_one_line_naming_them() {
    let d = tempfile::tempdir().unwrap();
    let e = one_line_error(
        vb!()
            .args(["vault", "measure"])
            .arg(d.path().join("nope"))
            .arg("--out")
            .arg(d.path().join("s.toml")),
        2,
    );
    assert!(e.contains("nope"), "{e}");
    assert!(!d.path().join("s.toml").exists(), "nothing written");

    let src = d.path().join("src");
    vb!()
        .args(["vault", "gen", "small", "--out"])
        .arg(&src)
        .assert()
        .success();
    let good_path = d.path().join("good.toml");
    measure(&src, &good_path);
    let good = fs::read_to_string(&good_path).unwrap();
    let e = one_line_error(
        vb!()
            .args(["vault", "gen", "--profile-file"])
            .arg(d.path().join("missing.toml"))
            .arg("--out")
            .arg(d.path().join("o")),
        2,
    );
    assert!(e.contains("missing.toml"), "{e}");
    for (from, to, says) in [
        ("count = 100\n", "count = -3\n", "notes.count"),
        ("count = 100\n", "count = 2000000\n", "notes.count"),
        ("p99 = ", "p99 = 2000000000\nq = ", "unknown field `q`"),
        ("size_max = ", "size_max = 99999999999", "notes.size_max"),
        (
            "frontmatter_share = ",
            "frontmatter_share = 3",
            "notes.frontmatter_share",
        ),
        ("kind = \"vaultbench.vault-shape\"", "kind = \"x\"", "kind"),
        (
            "format_version = 2",
            "format_version = 9",
            "upgrade vaultbench",
        ),
        (
            "[names.notes.scripts]\n",
            "[names.notes.scripts]\nklingon = 1\n",
            "names.notes.scripts names an unknown script \"klingon\"",
        ),
    ] {
        assert!(good.contains(from), "{from:?} in\n{good}");
        let bad = good.replacen(from, to, 1);
        let f = d.path().join("bad.toml");
        fs::write(&f, bad).unwrap();
        let out = d.path().join("o");
        let e = one_line_error(
            vb!()
                .args(["vault", "gen", "--profile-file"])
                .arg(&f)
                .arg("--out")
                .arg(&out),
            2,
        );
        assert!(e.contains("bad.toml") && e.contains(says), "{to:?}: {e}");
        assert!(!out.exists(), "nothing written for {to:?}");
    }
    // A version 1 file, written before names' scripts and lengths were measured, still reads.
    let v1: String = good
        .replacen("format_version = 2", "format_version = 1", 1)
        .split("\n\n")
        .filter(|table| {
            !table.trim_start().starts_with("[names.notes")
                && !table.trim_start().starts_with("[names.attachments")
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    assert!(!v1.contains("names.notes"), "{v1}");
    let f = d.path().join("v1.toml");
    fs::write(&f, v1).unwrap();
    vb!()
        .args(["vault", "gen", "--profile-file"])
        .arg(&f)
        .arg("--out")
        .arg(d.path().join("v1"))
        .assert()
        .success();
}

/// A scenario file naming a measured shape (`profile_file`, read beside the scenario file)
/// records: the run generates the twin and pushes it, whatever directory it starts from.
#[test]
#[ignore = "slow: a real recording"]
fn a_scenario_with_a_profile_file_records_its_twin() {
    let home = tempfile::tempdir().unwrap();
    let src = home.path().join("generated");
    vb!()
        .args(["vault", "gen", "small", "--out"])
        .arg(&src)
        .assert()
        .success();
    let dir = home.path().join("scen");
    fs::create_dir(&dir).unwrap();
    measure(&src, &dir.join("shape.toml"));
    let scen = dir.join("twin.toml");
    fs::write(
        &scen,
        "name = \"twin-push\"\ndoc = \"test\"\nprofile_file = \"shape.toml\"\nsamples = 1\n\
         [[phase]]\nkind = \"cold_start\"\n[[phase]]\nkind = \"cold_push\"\n",
    )
    .unwrap();
    let out = home.path().join("out");
    crate::common::record_loose(home.path(), &["--samples", "1"])
        .arg("--scenario-file")
        .arg(&scen)
        .arg("--out")
        .arg(&out)
        .current_dir(home.path())
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success();
    let b: Value = serde_json::from_slice(&fs::read(out.join("twin-push.json")).unwrap()).unwrap();
    let shape = fs::read_to_string(dir.join("shape.toml")).unwrap();
    assert!(b["metrics"]["cold_push.files"]["value"].as_f64().unwrap() > 0.0);
    assert!(!shape.is_empty());
}

//! `record --vault DIR`: a user's own vault in place of the profile's. The directory is read,
//! never written; what the protocol cannot carry is listed once and skipped; the recording
//! keeps the carried manifest's digest, file count and bytes but no name; `verify` accepts it.

use std::path::Path;

use serde_json::Value;
use testkit::vb;

use crate::common::record_loose;

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// A small private vault with names that must not leak, an attachment, nested folders,
/// Obsidian's config folder, and two entries no protocol carries.
fn private_vault(dir: &Path) {
    let w = |rel: &str, body: &[u8]| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    for i in 0..12 {
        w(
            &format!("Zanzibar Diaries/Day {i}.md"),
            format!("# Day {i}\nquetzalcoatl secret {i}\n[[Day {}]]\n", i + 1).as_bytes(),
        );
    }
    w("Zanzibar Diaries/Deep/Inner/notes.md", b"deep\n");
    w("Attachments/photo.bin", &vec![7u8; 300_000]);
    w(".obsidian/app.json", b"{\"theme\":\"x\"}");
    w("Loose note.md", b"loose\n");
    w("back\\slash.md", b"not carried\n");
    std::os::unix::fs::symlink("/etc/hostname", dir.join("linked.md")).unwrap();
}

#[test]
#[ignore = "slow: a real recording"]
fn record_with_your_own_vault_pushes_and_pulls_it_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let vault = home.path().join("My Vault");
    std::fs::create_dir(&vault).unwrap();
    private_vault(&vault);
    let digest_before = tree(&vault);
    let out = home.path().join("out");
    let o = record_loose(home.path(), &["small", "--samples", "1"])
        .arg("--vault")
        .arg(&vault)
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(home.path().join("work"))
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Listed once, with reasons.
    assert_eq!(err.matches("back\\\\slash.md").count(), 1, "{err}");
    assert_eq!(err.matches("linked.md").count(), 1, "{err}");
    assert!(err.contains("2 entries the protocol cannot carry"), "{err}");
    vb!(home.path()).arg("verify").arg(&out).assert().success();
    let b = read(&out.join("small.json"));
    let value = |k: &str| {
        b["metrics"][k]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(value("cold_pull.byte_identical"), 1.0);
    assert_eq!(value("cold_push.files"), 16.0);
    let side_text = std::fs::read_to_string(out.join("small.provenance.json")).unwrap();
    let side: Value = serde_json::from_str(&side_text).unwrap();
    let uv = &side["user_vault"];
    assert_eq!(uv["files"], 16, "{uv}");
    assert_eq!(uv["skipped"], 2, "{uv}");
    assert_eq!(side["profile"], "user-vault");
    assert_eq!(side["vault_digest"], uv["manifest_digest"]);
    let both = format!(
        "{side_text}{}",
        std::fs::read_to_string(out.join("small.json")).unwrap()
    );
    for private in [
        "Zanzibar",
        "quetzalcoatl",
        "My Vault",
        "photo",
        "Loose note",
    ] {
        assert!(
            !both.contains(private),
            "{private} leaked into the recording"
        );
    }
    // Read, never written.
    assert_eq!(tree(&vault), digest_before);
    // A hand edit of the vault summary is caught.
    let edited = side_text.replace("\"skipped\": 2", "\"skipped\": 0");
    assert_ne!(edited, side_text);
    std::fs::write(out.join("small.provenance.json"), edited).unwrap();
    vb!(home.path()).arg("verify").arg(&out).assert().failure();
}

#[test]
fn a_vault_that_is_not_a_directory_is_one_line_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("file.md");
    std::fs::write(&f, "x").unwrap();
    for bad in [f.clone(), home.path().join("missing")] {
        let o = record_loose(home.path(), &["small", "--samples", "1"])
            .arg("--vault")
            .arg(&bad)
            .arg("--out")
            .arg(home.path().join("out"))
            .timeout(std::time::Duration::from_secs(120))
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("target: ")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains("--vault"), "{err}");
        assert!(!home.path().join("out").exists());
    }
}

/// Every path, size and mtime under `dir` (symlinks as links).
fn tree(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.push((
                e.path().display().to_string(),
                m.len(),
                m.modified().unwrap(),
            ));
        }
    }
    out.sort();
    out
}

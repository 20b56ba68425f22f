//! `vaultbench scenarios`: every built-in listed under its protocol, `show` printing the
//! built-in TOML byte for byte, and an unknown name answered with the closest ones, as
//! `record` answers it too (before any output directory or machine lock).

use testkit::vb;

#[test]
fn the_list_names_every_built_in_under_its_protocol() {
    let home = tempfile::tempdir().unwrap();
    let out = vb!(home.path()).arg("scenarios").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for (name, _) in scenarios::scenario::BUILTIN {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} not listed:\n{text}"
        );
    }
    let webdav = text.find("\nwebdav").expect("a webdav group");
    let couch = text.find("\ncouchdb").expect("a couchdb group");
    let small_webdav = text.find("small-webdav").unwrap();
    assert!(text.starts_with("obsync-v1"), "{text}");
    assert!(webdav < small_webdav && small_webdav < couch, "{text}");
    assert!(text.contains("phases: cold_start, cold_push"), "{text}");
}

#[test]
fn show_prints_the_built_in_toml() {
    let home = tempfile::tempdir().unwrap();
    let out = vb!(home.path())
        .args(["scenarios", "show", "faults-small"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let builtin = scenarios::scenario::BUILTIN
        .iter()
        .find(|(n, _)| *n == "faults-small")
        .unwrap()
        .1;
    assert_eq!(String::from_utf8(out.stdout).unwrap(), builtin);
}

#[test]
fn an_unknown_name_is_answered_with_the_closest() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["scenarios", "show", "smal"][..],
        &["record", "smal", "--out", "rec"][..],
    ] {
        let out = vb!(home.path())
            .current_dir(home.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("unknown scenario \"smal\"") && err.contains("did you mean small"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(
        !home.path().join("rec").exists(),
        "a refused record left its --out"
    );
}

/// What can be checked without running is checked before the machine lock and before any
/// output: with the lock held elsewhere and `--no-wait` (which would exit 5 at the lock),
/// each mistake exits 2 on one line naming the input, and no output directory is left.
#[test]
fn mistakes_are_caught_before_the_lock_and_leave_nothing() {
    let home = tempfile::tempdir().unwrap();
    let cwd = home.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::write(cwd.join("notes.md"), "not a server").unwrap();
    std::fs::write(cwd.join("bad.toml"), "[cpu_ms]\nmax_cv = \"a\"\n").unwrap();
    let _held = calibration::MachineLock::acquire(Some(&home.path().join("machine.lock")), false)
        .expect("the test holds the machine lock");
    for (args, want) in [
        (
            &["record", "small", "--target", "./notes.md"][..],
            "not an executable file",
        ),
        (
            &["record", "small", "--vault", "./nope"][..],
            "--vault ./nope",
        ),
        (
            &["record", "small", "--gate-config", "bad.toml"][..],
            "`cpu_ms.max_cv` must be a number",
        ),
        (&["record", "smal"][..], "did you mean small"),
        (
            &["ab", "small", "--a", "ref", "--b", "./notes.md"][..],
            "not an executable file",
        ),
    ] {
        let out = vb!(home.path())
            .current_dir(&cwd)
            .args(args)
            .arg("--no-wait")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: one line, nothing before it:\n{err}"
        );
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            !cwd.join("target").exists(),
            "{args:?} left an output directory"
        );
    }
}

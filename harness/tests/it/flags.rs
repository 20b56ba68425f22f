//! The flag conventions of `docs/src/reference/index.md` ("One style of flags"), checked on
//! every visible subcommand: its `--help` runs and prints no internal names, and its visible
//! flags keep one name per concept (durations with units, `--in-flight`, `--work-dir`,
//! `--seed` only where there is a vault, every percent flag through the one parser).

use clap::CommandFactory;
use std::process::Command;

/// Every visible command path: `["record"]`, `["vault", "gen"]`, ...
fn paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<(Vec<String>, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let mut p = prefix.to_vec();
        p.push(sub.get_name().to_owned());
        out.push((p.clone(), sub.clone()));
        paths(sub, &p, out);
    }
}

fn all() -> Vec<(Vec<String>, clap::Command)> {
    let mut out = Vec::new();
    paths(&harness::Cli::command(), &[], &mut out);
    out
}

/// Visible long flags of one command.
fn flags(cmd: &clap::Command) -> Vec<(String, Option<String>)> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let long = a.get_long()?.to_owned();
            let value = a
                .get_value_names()
                .and_then(|v| v.first())
                .map(|v| v.to_string());
            Some((long, value))
        })
        .collect()
}

/// What one command's help and flags break of the conventions.
fn problems(path: &[String], cmd: &clap::Command, help: &str) -> Vec<String> {
    let name = path.join(" ");
    let mut out = Vec::new();
    for (long, value) in flags(cmd) {
        let unit_in_name = ["-seconds", "-secs", "-ms", "-millis"]
            .iter()
            .any(|s| long.ends_with(s))
            || long == "seconds";
        if unit_in_name {
            out.push(format!(
                "{name}: --{long} puts a unit in its name: take a duration"
            ));
        }
        for (old, new) in [("connections", "in-flight"), ("dir", "work-dir")] {
            if long == old {
                out.push(format!("{name}: --{old} is spelled --{new}"));
            }
        }
        if (long.contains("timeout") || long == "duration") && value.as_deref() != Some("DURATION")
        {
            out.push(format!("{name}: --{long} shows {value:?}, not DURATION"));
        }
        if ["tau", "cost-tau", "threshold", "cost-threshold"].contains(&long.as_str())
            && value.as_deref() != Some("PERCENT")
        {
            out.push(format!("{name}: --{long} shows {value:?}, not PERCENT"));
        }
    }
    let has = |l: &str| flags(cmd).iter().any(|(f, _)| f == l);
    if path.first().map(String::as_str) == Some("load") && has("seed") {
        out.push(format!(
            "{name}: --seed is the vault seed; load has none (--nonce-seed)"
        ));
    }
    for word in help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let screaming = word.len() > 3
            && word.contains('_')
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
        let source_file = word.ends_with(".rs") || word.contains("design.md");
        if screaming && !word.starts_with("XDG_") && !word.starts_with("VAULTBENCH_") {
            out.push(format!("{name}: help names the internal constant {word}"));
        }
        if source_file {
            out.push(format!("{name}: help points into the source ({word})"));
        }
    }
    for diary in ["this session", "issue ", "A/A runs with", "2-CPU VM"] {
        if help.contains(diary) {
            out.push(format!("{name}: help reads as a lab note ({diary:?})"));
        }
    }
    out
}

#[test]
fn every_help_keeps_the_flag_conventions() {
    let mut bad = Vec::new();
    let all = all();
    assert!(all.len() >= 15, "{} commands", all.len());
    for (path, cmd) in &all {
        let out = Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args(path)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{path:?} --help failed");
        let help = String::from_utf8(out.stdout).unwrap();
        bad.extend(problems(path, cmd, &help));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `record` and `ab` take the scenario the same way.
#[test]
fn record_and_ab_take_the_scenario_alike() {
    for (path, cmd) in all() {
        if path == ["record"] || path == ["ab"] {
            let positional = cmd
                .get_positionals()
                .any(|a| a.get_value_names().is_some_and(|v| v[0] == "SCENARIO"));
            let flag = flags(&cmd).iter().any(|(l, _)| l == "scenario");
            assert!(positional && flag, "{path:?}: SCENARIO and --scenario");
        }
    }
}

/// The checker itself: each convention it holds is caught on a command that breaks it.
#[test]
fn the_checker_catches_each_broken_convention() {
    let cmd = clap::Command::new("load")
        .arg(clap::Arg::new("a").long("burn-seconds"))
        .arg(clap::Arg::new("b").long("connections"))
        .arg(clap::Arg::new("c").long("dir"))
        .arg(
            clap::Arg::new("d")
                .long("sample-timeout")
                .value_name("SECS"),
        )
        .arg(clap::Arg::new("e").long("tau"))
        .arg(clap::Arg::new("f").long("seed"));
    let got = problems(
        &["load".to_owned()],
        &cmd,
        "see PIN_BY_DEFAULT in prepare/mod.rs; on a 2-CPU VM",
    );
    for want in [
        "--burn-seconds puts a unit",
        "--connections is spelled --in-flight",
        "--dir is spelled --work-dir",
        "--sample-timeout shows",
        "--tau shows",
        "--seed is the vault seed",
        "PIN_BY_DEFAULT",
        "mod.rs",
        "lab note",
    ] {
        assert!(got.iter().any(|p| p.contains(want)), "{want}: {got:?}");
    }
}

/// Every flag a reference page's tables name (`| `--flag ...` rows) is a visible flag of that
/// command or one of its subcommands, unless the row calls it a testing knob or an old name.
#[test]
fn every_flag_the_reference_names_is_in_help() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference");
    let cli = harness::Cli::command();
    let mut bad = Vec::new();
    let mut checked = 0;
    for sub in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
        let Ok(page) = std::fs::read_to_string(docs.join(format!("{}.md", sub.get_name()))) else {
            continue;
        };
        let mut visible: Vec<String> = Vec::new();
        let mut stack = vec![sub.clone()];
        while let Some(c) = stack.pop() {
            visible.extend(flags(&c).into_iter().map(|(l, _)| l));
            stack.extend(c.get_subcommands().cloned());
        }
        for row in page.lines().filter(|l| l.starts_with("| `--")) {
            let cell = row.split('|').nth(1).unwrap_or_default();
            let exempt = row.contains("testing knob") || row.contains("old name");
            for word in cell.split(['`', ',', ' ', '=']) {
                if let Some(long) = word.strip_prefix("--").filter(|w| !w.is_empty()) {
                    checked += 1;
                    if !exempt && !visible.iter().any(|v| v == long) {
                        bad.push(format!(
                            "reference/{}.md: --{long} is not in --help",
                            sub.get_name()
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 40, "{checked} flags checked");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `record`, `ab` and `bisect` have many flags: every visible one sits under a heading
/// (target, scenario, gate, A/B, git builds, bounds, output, ...), and `--help` prints them.
#[test]
fn record_ab_and_bisect_group_their_flags_under_headings() {
    let mut bad = Vec::new();
    for (path, cmd) in all() {
        if !(path == ["record"] || path == ["ab"] || path == ["bisect"]) {
            continue;
        }
        let mut headings = std::collections::BTreeSet::new();
        for a in cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_long().is_some())
        {
            let long = a.get_long().unwrap_or_default();
            if long == "help" {
                continue;
            }
            match a.get_help_heading() {
                Some(h) => {
                    headings.insert(h.to_owned());
                }
                None => bad.push(format!("{path:?}: --{long} has no heading")),
            }
        }
        for want in [
            "Target",
            "Scenario",
            "Gate",
            "Bounds",
            "Output",
            "Git builds",
        ] {
            if !headings.contains(want) {
                bad.push(format!("{path:?}: no {want:?} heading ({headings:?})"));
            }
        }
        let out = Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args(&path)
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        for h in &headings {
            if !help.lines().any(|l| l == format!("{h}:")) {
                bad.push(format!("{path:?}: --help prints no {h:?} heading"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// One name per concept, and no flag that does nothing: `--samples` only on `record` (the A/B
/// loops count rounds), no `--cost` on `bisect` (the key decides), no visible `--no-pin` (the
/// default), `--out` a file and `--out-dir` a directory, and `--retries` counting retries.
#[test]
fn flags_mean_one_thing_and_do_something() {
    let mut bad = Vec::new();
    for (path, cmd) in all() {
        let name = path.join(" ");
        let visible = flags(&cmd);
        let has = |l: &str| visible.iter().any(|(f, _)| f == l);
        if has("samples") && name != "record" {
            bad.push(format!("{name}: --samples, which only record uses"));
        }
        if has("cost") && name == "bisect" {
            bad.push(format!("{name}: --cost, which the key overrides"));
        }
        if has("no-pin") {
            bad.push(format!("{name}: --no-pin, a no-op"));
        }
        for (long, value) in &visible {
            if long == "out" && value.as_deref() != Some("FILE") {
                bad.push(format!(
                    "{name}: --out shows {value:?}: --out is a FILE, --out-dir a DIR"
                ));
            }
            if long == "out-dir" && value.as_deref() != Some("DIR") {
                bad.push(format!("{name}: --out-dir shows {value:?}, not DIR"));
            }
        }
        if let Some(r) = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("retries"))
        {
            let help = r.get_help().map(|h| h.to_string()).unwrap_or_default();
            let default = r
                .get_default_values()
                .first()
                .map(|v| v.to_string_lossy().into_owned());
            if !help.contains("after its first attempt") || default.as_deref() != Some("2") {
                bad.push(format!("{name}: --retries must count retries after the first attempt (default 2): {help:?} {default:?}"));
            }
        }
    }
    // The old spellings still parse.
    for old in [
        &["vaultbench", "record", "small", "--out", "d", "--no-pin"][..],
        &["vaultbench", "vault", "gen", "small", "--out", "d"][..],
    ] {
        if let Err(e) = <harness::Cli as clap::Parser>::try_parse_from(old) {
            bad.push(format!("{old:?} no longer parses: {e}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `load` names the server `--url` (`--target` is a server command elsewhere), takes the
/// credentials as `record` and `ab` do (`--auth`, `--auth-file`), gives `load fanout` the
/// scenario step's knob names and defaults, shows push-only and pull-only flags only where
/// they apply, and sorts its flags under headings. The old spellings still work, with a note.
#[test]
fn load_names_each_concept_once_and_groups_its_flags() {
    let mut bad = Vec::new();
    let all = all();
    let find = |p: &[&str]| {
        all.iter()
            .find(|(path, _)| path.iter().map(String::as_str).eq(p.iter().copied()))
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| panic!("{p:?} is not a command"))
    };
    let visible =
        |c: &clap::Command| -> Vec<String> { flags(c).into_iter().map(|f| f.0).collect() };
    for p in [
        &["load"][..],
        &["load", "push"],
        &["load", "pull"],
        &["load", "fanout"],
        &["load", "bench-peer"],
    ] {
        let cmd = find(p);
        let v = visible(&cmd);
        if !v.iter().any(|f| f == "url") || v.iter().any(|f| f == "target") {
            bad.push(format!("{p:?}: the server is --url ({v:?})"));
        }
        for a in cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_long().is_some_and(|l| l != "help"))
        {
            if a.get_help_heading().is_none() {
                bad.push(format!("{p:?}: --{} has no heading", a.get_long().unwrap()));
            }
        }
        let out = Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .args(p)
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        for h in ["Target:", "Output:"] {
            if !help.lines().any(|l| l == h) {
                bad.push(format!("{p:?}: --help prints no {h:?} heading"));
            }
        }
        if p != ["load", "bench-peer"] {
            for want in ["auth", "auth-file"] {
                if !v.iter().any(|f| f == want) {
                    bad.push(format!("{p:?}: no --{want}"));
                }
            }
            if v.iter().any(|f| f == "basic-auth-file") {
                bad.push(format!("{p:?}: --basic-auth-file is spelled --auth-file"));
            }
        }
    }
    for p in [&["record"][..], &["ab"]] {
        let v = visible(&find(p));
        if !(v.iter().any(|f| f == "auth") && v.iter().any(|f| f == "auth-file")) {
            bad.push(format!("{p:?}: --auth and --auth-file"));
        }
    }
    let push = visible(&find(&["load", "push"]));
    let pull = visible(&find(&["load", "pull"]));
    for f in [
        "since",
        "depth-infinity",
        "feed-max-entries",
        "feed-max-pages",
        "feed-max-bytes",
    ] {
        if push.iter().any(|v| v == f) || !pull.iter().any(|v| v == f) {
            bad.push(format!("--{f} is a pull flag: shown by pull only"));
        }
    }
    for f in ["checkpoint-every", "in-flight"] {
        if pull.iter().any(|v| v == f) || !push.iter().any(|v| v == f) {
            bad.push(format!("--{f} is a push flag: shown by push only"));
        }
    }
    // `load fanout` and the step `long_poll_fanout`: one set of names, one set of defaults.
    let fanout = find(&["load", "fanout"]);
    let default = |long: &str| {
        fanout
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_default_values().first())
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_else(|| panic!("load fanout --{long} has no default"))
    };
    let ms = |long: &str| {
        contract::parse::duration(&default(long))
            .unwrap()
            .as_millis() as u64
    };
    use scenarios::scenario::fanout_defaults as step;
    let want = [
        ("waiters", default("waiters") == step::WAITERS.to_string()),
        ("pushers", default("pushers") == step::PUSHERS.to_string()),
        ("posts", default("posts") == step::POSTS.to_string()),
        ("interval", ms("interval") == step::INTERVAL_MS),
        ("wait", ms("wait") == step::WAIT_S * 1000),
        ("settle", ms("settle") == step::SETTLE_MS),
    ];
    for (long, same) in want {
        if !same {
            bad.push(format!("load fanout --{long}: not the step's default"));
        }
    }
    if visible(&fanout).iter().any(|f| f == "devices") {
        bad.push("load fanout: --devices is spelled --waiters".into());
    }
    // The old spellings parse, work and say what to write instead.
    let dir = tempfile::tempdir().unwrap();
    let auth = dir.path().join("auth");
    std::fs::write(&auth, "u:p\n").unwrap();
    let state = dir.path().join("state.json");
    let auth_arg = auth.to_str().unwrap();
    let state_arg = state.to_str().unwrap();
    for (args, notes) in [
        (
            vec![
                "load",
                "--target",
                "http://127.0.0.1:1",
                "--route",
                "livez",
                "--in-flight",
                "1",
            ],
            vec!["--target is deprecated", "write --url"],
        ),
        (
            vec![
                "load",
                "pull",
                "--protocol",
                "webdav",
                "--target",
                "http://127.0.0.1:1",
                "--basic-auth-file",
                auth_arg,
                "--vault",
                state_arg,
            ],
            vec![
                "--basic-auth-file is deprecated",
                "write --auth-file",
                "--target is deprecated",
            ],
        ),
        (
            vec![
                "load",
                "fanout",
                "--target",
                "http://127.0.0.1:1",
                "--devices",
                "2",
            ],
            vec!["--devices is deprecated", "write --waiters"],
        ),
    ] {
        let out = Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
            .env("XDG_STATE_HOME", dir.path())
            .args(&args)
            .args(["--state", state_arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        for n in notes {
            if !err.contains(n) {
                bad.push(format!("{args:?}: no note {n:?} in {err:?}"));
            }
        }
        // It went on to the target (nothing listens there): the old spelling still works.
        if !err.contains("127.0.0.1:1") {
            bad.push(format!("{args:?}: did not reach the target: {err:?}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

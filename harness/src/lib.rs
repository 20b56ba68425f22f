//! vaultbench: a signed load generator and scenario runner for note-vault sync servers.
//!
//! This crate is the glue: the CLI, sample subprocesses, server lifecycle, and the
//! record / ab / verify / compare flows. It is the only crate that knows the others.
//! The modules below read in pipeline order: the foundations (exit codes, interrupt, atomic
//! write, child processes), then sample (with the registry of protocols a sample speaks) ->
//! prepare (scenario, vault, target) -> gate -> recording, then `commands`, one file per subcommand on top of it. A module imports only
//! modules above it in this list (`contract/tests/layout.rs` checks that, and that no file
//! imports a file that imports it back).

use clap::{Parser, Subcommand};

// The foundations every stage uses.

/// Exit codes of the binary (`contract::exit`'s).
pub mod exit;
/// Ctrl-C: a flag the loops poll, and the error that stops them.
pub mod interrupt;
/// The harness's durable atomic write (`durable`, with the harness's error type).
pub mod atomic;
/// Child processes that answer with one JSON document, under a deadline.
pub mod subprocess;
/// A refusal a user can act on: who is busy, the bound, the ways forward; wrapped to the
/// terminal.
pub mod refusal;
/// Names close to a mistyped one (did you mean ...?).
pub mod hint;

/// The manifest and digest of a vault tree on disk.
pub mod tree;

// The pipeline. A sample (with the protocols it can speak) comes first: what is resolved
// before any sample builds sample plans.

/// One sample: plan, runner seam, parent and child sides, phases, target server, and the
/// registry of protocols a sample speaks.
pub mod sample;
/// Resolving a run before any sample: scenario, cached vault, work dir, gate, reference.
pub mod prepare;
/// The calibration gate over samples, and the A/B loop's retried gated sample.
pub mod gate;
/// The record loop: samples through a runner, the gate, the written recording and ledger.
pub mod recording;

// On top of the pipeline.

/// One file per subcommand: argument structs and flows.
pub mod commands;

use commands::{
    ab, bisect, calibrate, class, history, hlog, load, probe, record, report as report_cmd,
    sample as sample_cmd, scenario_list, trend, vault, verify,
};

/// Reproducible, gated performance numbers for self-hosted note-vault sync servers.
#[derive(Debug, Parser)]
#[command(name = "vaultbench", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate, verify and benchmark seeded synthetic vaults.
    #[command(subcommand)]
    Vault(vault::VaultCmd),
    /// Run the reference server (the default target).
    ServeRef(refserver::cli::ServeArgs),
    /// Drive a server over any registered protocol: route load, a whole-vault push/pull, many
    /// held devices, or the comparison with wrk.
    Load(load::LoadArgs),
    /// Measure this machine's calibration channels while quiet and store the reference.
    Calibrate(calibrate::CalibrateArgs),
    /// Probe what this machine can do (fsync throughput, the recording proxy's added latency).
    #[command(subcommand)]
    Probe(probe::ProbeCmd),
    /// List the built-in scenarios by protocol, with their phases; `scenarios show NAME`
    /// prints one's TOML.
    Scenarios(scenario_list::ScenariosArgs),
    /// Record a scenario into a gated baseline with a provenance sidecar.
    Record(record::RecordArgs),
    /// Compare two server builds by interleaved, order-balanced A/B rounds.
    Ab(ab::AbArgs),
    /// Find the commit that made a key worse: build, cache and compare commits between
    /// --good and --bad.
    Bisect(bisect::BisectArgs),
    /// Build the history a trend is found in: one line per accepted recording, kept in your
    /// repository.
    #[command(subcommand)]
    History(history::HistoryCmd),
    /// Find change points over a history: steps, drifts and machine changes; `--bisect`
    /// hands each step's commit range to bisect.
    #[command(subcommand)]
    Trend(trend::TrendCmd),
    /// Render a recording, an A/B result or a baselines history (md, html, json, bmf, gab).
    Report(report_cmd::ReportArgs),
    /// Compare a recording against a baseline; exit 1 on a regression beyond threshold.
    Compare(report_cmd::CompareArgs),
    /// Check committed baselines: a hand-edited value fails and names the key.
    Verify(verify::VerifyArgs),
    /// Print this machine's class: the `baselines/<class>/` directory its recordings go to.
    Class(class::ClassArgs),
    /// Work with HdrHistogram interval logs: merge several generators' logs exactly.
    #[command(subcommand)]
    Hlog(hlog::HlogCmd),
    /// Internal: run one sample plan in this fresh process (used by record and ab).
    #[command(hide = true)]
    Sample(sample_cmd::SampleArgs),
}

/// Runs one command and returns the process exit code (see [`exit`]).
pub fn run(cli: Cli) -> i32 {
    for note in deprecations(&cli.command) {
        eprintln!("vaultbench: {note}");
    }
    let result = match cli.command {
        Command::Vault(cmd) => vault::run(cmd),
        Command::ServeRef(args) => refserver::cli::run(args),
        Command::Load(args) => load::run(args),
        Command::Calibrate(args) => calibrate::run(args, &["calibrate"]),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Scenarios(args) => scenario_list::run(args),
        Command::Record(args) => record::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Class(args) => class::run(args),
        Command::Hlog(cmd) => hlog::run(cmd),
        Command::Ab(args) => ab::run(args),
        Command::Bisect(args) => bisect::run(args),
        Command::History(cmd) => history::run(cmd),
        Command::Trend(cmd) => trend::run(cmd),
        Command::Report(args) => report_cmd::run_report(args),
        Command::Compare(args) => report_cmd::run_compare(args),
        Command::Sample(args) => sample_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => report_error(&err),
    }
}

/// Notes for the deprecated flag spellings a command line used (they still work for one
/// release). Renamed flags the commands resolve themselves print their own.
fn deprecations(cmd: &Command) -> Vec<String> {
    match cmd {
        Command::Record(r) => r.common.deprecations(),
        Command::Ab(a) => a.common.deprecations(),
        Command::Bisect(b) => b.common.deprecations(),
        Command::Probe(probe::ProbeCmd::Fsync(a)) => a.deprecations(),
        _ => Vec::new(),
    }
}

/// Prints a command-line error as one line (`vaultbench: invalid value '5' for '--tau
/// <PERCENT>': ...`, the usage block and help pointer left out) and returns its exit code:
/// [`exit::ERROR`] for a usage error, 0 for `--help` and `--version` (printed as clap prints
/// them).
pub fn usage_error(e: &clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            exit::ERROR
        } else {
            exit::OK
        };
    }
    eprintln!("vaultbench: {}", one_line(&e.render().to_string()));
    exit::ERROR
}

/// The line [`report_error`] prints: `vaultbench: ` and the error chain, one line of at most
/// [`contract::quote::MAX_LINE_BYTES`] bytes with no control character.
pub fn error_line(err: &anyhow::Error) -> String {
    contract::quote::line(&format!("vaultbench: {err:#}"))
}

/// clap's rendered error on one line: its message and any `tip:`, without the usage block.
fn one_line(rendered: &str) -> String {
    let mut parts = Vec::new();
    for (i, chunk) in rendered.split("\n\n").enumerate() {
        let chunk = chunk.trim();
        if i == 0 || chunk.starts_with("tip:") {
            let words: Vec<&str> = chunk.split_whitespace().collect();
            parts.push(words.join(" "));
        }
    }
    let text = parts.join("; ");
    text.strip_prefix("error: ").unwrap_or(&text).to_owned()
}

/// Prints `vaultbench: <error chain>` on one line and maps typed failures to their codes.
/// The line is the last guard against a server's text: every control character in it is
/// escaped and it is clipped to [`contract::quote::MAX_LINE_BYTES`]
/// ([`contract::quote::line`]); the messages quote what a server sent already.
pub fn report_error(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<contract::exit::Refused>().is_some() {
        // A refusal is several lines (what, who, the ways forward): wrapped to a terminal's
        // width, whole otherwise (a log or a CI job keeps its lines); each line escaped as
        // the one-line error is (process names come from the machine).
        let text: Vec<String> = format!("vaultbench: {err:#}")
            .split('\n')
            .map(contract::quote::line)
            .collect();
        let text = text.join("\n");
        match refusal::stderr_width() {
            Some(w) => eprintln!("{}", refusal::wrap(&text, w)),
            None => eprintln!("{text}"),
        }
        return exit::REFUSED;
    }
    eprintln!("{}", error_line(err));
    if err.downcast_ref::<interrupt::Interrupted>().is_some() {
        return exit::INTERRUPTED;
    }
    if err.downcast_ref::<calibration::LockBusy>().is_some() {
        return exit::BUSY;
    }
    if err.downcast_ref::<contract::exit::BuildFailed>().is_some() {
        return exit::BUILD_FAILED;
    }
    exit::ERROR
}

#[cfg(test)]
mod cli_tests {
    use super::*;

    /// The CLI's error line is the last guard: whatever a server put in an error, the line is
    /// one line of at most 4 KiB with no byte under 0x20, and its escapes are not escaped
    /// twice.
    #[test]
    fn an_error_line_is_short_and_has_no_control_byte() {
        let hostile = format!(
            "\x1b]0;owned\x07\x1b[2J{}\nFAKE: pull ok\r{}",
            "x".repeat(1 << 20),
            "\u{9b}"
        );
        let e = anyhow::anyhow!(hostile).context("pulling into v");
        let line = error_line(&e);
        assert!(
            line.len() <= contract::quote::MAX_LINE_BYTES,
            "{}",
            line.len()
        );
        assert!(line.bytes().all(|b| b >= 0x20 && b != 0x7f), "{line:.200}");
        assert!(
            line.starts_with("vaultbench: pulling into v: \\x1b]0;owned\\x07\\x1b[2J"),
            "{line:.200}"
        );
        assert!(
            line.ends_with("more bytes)"),
            "{}",
            &line[line.len() - 60..]
        );
        let quoted = anyhow::anyhow!("a {}", contract::quote::quote("b\nc"));
        assert_eq!(error_line(&quoted), "vaultbench: a \"b\\nc\"");
    }

    fn usage(args: &[&str]) -> String {
        let e = Cli::try_parse_from(std::iter::once("vaultbench").chain(args.iter().copied()))
            .expect_err("a usage error");
        one_line(&e.render().to_string())
    }

    /// Usage errors are one line naming the flag and the value; percent flags share one
    /// parser, so `--tau` and `--threshold` word a bare number the same way.
    #[test]
    fn usage_errors_are_one_line() {
        let tau = usage(&["ab", "small", "--a", "ref", "--b", "ref", "--tau", "5"]);
        let thr = usage(&["compare", "x", "y", "--threshold", "5"]);
        for (flag, e) in [("--tau", &tau), ("--threshold", &thr)] {
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains(flag) && e.contains("has no unit"), "{e}");
        }
        let missing = usage(&["ab", "small", "--a", "ref"]);
        assert!(missing.contains("--b"), "{missing}");
        let typo = usage(&["record", "small", "--sampels", "3"]);
        assert!(
            typo.contains("--sampels") && typo.contains("--samples"),
            "{typo}"
        );
    }

    /// The scenario is given the same way to `record` and `ab`: positional or `--scenario`.
    #[test]
    fn the_scenario_is_positional_or_a_flag_in_both() {
        for args in [
            &["record", "small"][..],
            &["record", "--scenario", "small"],
            &["ab", "small", "--a", "ref", "--b", "ref"],
            &["ab", "--scenario", "small", "--a", "ref", "--b", "ref"],
        ] {
            Cli::try_parse_from(std::iter::once("vaultbench").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        let both = usage(&["record", "small", "--scenario", "small"]);
        assert!(both.contains("cannot be used with"), "{both}");
    }

    /// Durations are humantime; the old bare seconds still parse, with a note.
    #[test]
    fn durations_take_units_and_old_bare_seconds() {
        let Command::Record(r) =
            Cli::try_parse_from(["vaultbench", "record", "small", "--sample-timeout", "90s"])
                .unwrap()
                .command
        else {
            panic!("record")
        };
        assert_eq!(
            r.common.sample_timeout.duration,
            std::time::Duration::from_secs(90)
        );
        let Command::Record(r) =
            Cli::try_parse_from(["vaultbench", "record", "small", "--sample-timeout", "90"])
                .unwrap()
                .command
        else {
            panic!("record")
        };
        assert!(
            r.common
                .sample_timeout
                .deprecation("--sample-timeout")
                .is_some()
        );
        let bad = usage(&["probe", "fsync", "--duration", "3"]);
        assert!(
            bad.contains("--duration") && bad.contains("no unit"),
            "{bad}"
        );
    }

    /// `--feed-max-*` reach every target `record` and `ab` resolve (the sample's clients read
    /// them from its definition); none given leaves the definition as it was, and 0 is refused.
    #[test]
    fn feed_bounds_reach_the_resolved_targets() {
        let Command::Ab(a) = Cli::try_parse_from([
            "vaultbench",
            "ab",
            "--a",
            "ref",
            "--b",
            "ref --group-commit",
            "--scenario",
            "small",
            "--feed-max-pages",
            "7",
        ])
        .unwrap()
        .command
        else {
            panic!("ab")
        };
        let opts = a.common.target_opts().unwrap();
        for given in [&a.a, &a.b] {
            let (spec, _) = a.common.resolve_target(given, &opts).unwrap();
            assert_eq!(
                spec.def.feed,
                Some(loadgen::FeedOverrides {
                    max_entries: None,
                    max_pages: Some(7),
                    max_bytes: None,
                }),
                "{given}"
            );
        }
        let Command::Record(r) = Cli::try_parse_from(["vaultbench", "record", "small"])
            .unwrap()
            .command
        else {
            panic!("record")
        };
        let (spec, _) = r.common.resolve_target("ref", &opts).unwrap();
        assert_eq!(spec.def.feed, None);
        let zero = usage(&["record", "small", "--feed-max-entries", "0"]);
        assert!(zero.contains("--feed-max-entries"), "{zero}");
    }

    /// Every seed flag takes the same spellings (`contract::parse::seed`): `0x5e_ed` too.
    #[test]
    fn every_seed_flag_accepts_hex_with_separators() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("vaultbench").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"))
                .command
        };
        let Command::Record(r) = parse(&["record", "small", "--seed", "0x5e_ed"]) else {
            panic!("record")
        };
        assert_eq!(r.common.seed, Some(0x5eed));
        let Command::Ab(a) = parse(&[
            "ab",
            "--a",
            "ref",
            "--b",
            "ref --group-commit",
            "--scenario",
            "small",
            "--seed",
            "0x5e_ed",
            "--order-seed",
            "0x5e_ed",
        ]) else {
            panic!("ab")
        };
        assert_eq!((a.common.seed, a.order_seed), (Some(0x5eed), 0x5eed));
        let Command::Load(l) = parse(&["load", "--seed", "0x5e_ed"]) else {
            panic!("load")
        };
        assert_eq!(l.route.conn.seed, 0x5eed);
        let Command::Load(l) = parse(&["load", "push", "--vault", "v", "--seed", "0x5e_ed"]) else {
            panic!("load push")
        };
        let Some(load::LoadCmd::Push(t)) = l.cmd else {
            panic!("load push")
        };
        assert_eq!(t.common.conn.seed, 0x5eed);
        // `vault gen|verify|bench --seed` keep the text and parse it with the same parser.
        let small = vault::lookup_profile("small").unwrap();
        assert_eq!(
            vault::seed_or_default(&small, Some("0x5e_ed")).unwrap(),
            0x5eed
        );
        assert!(
            Cli::try_parse_from(["vaultbench", "load", "--seed", "0x5g"])
                .unwrap_err()
                .to_string()
                .contains("bad seed \"0x5g\"")
        );
    }
}

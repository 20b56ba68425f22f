//! `vaultbench report` and `vaultbench compare`: read recordings, A/B results and baselines
//! history from disk (and git), hand them to `reports` to render, and write the result
//! atomically. Which document a file is comes from its `kind`, never from its name.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

use reports::render::{Document, Format, HistoryPoint};
use reports::schema::{
    AbResult, Baseline, KIND_AB, KIND_BASELINE, KIND_PROVENANCE, KIND_SAMPLE, Provenance,
};

use crate::atomic::write_atomic;

/// Render a recording, an A/B result or a baselines history as Markdown, self-contained HTML,
/// JSON, or an export for Bencher (bmf) or github-action-benchmark (gab).
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A recording (`<scenario>.json` or its `.provenance.json`), an A/B result, or a directory
    /// of baselines: its git history (or, outside git, the recordings under it) becomes a trend.
    pub input: PathBuf,
    /// Output format: md, html, json, bmf (Bencher Metric Format), gab (github-action-benchmark
    /// customSmallerIsBetter; lower-is-better keys only).
    #[arg(long, default_value = "md", value_parser = parse_format)]
    pub format: Format,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write every chart as a PNG into this directory.
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// For a baselines directory: only this scenario's history.
    #[arg(long)]
    pub scenario: Option<String>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// `io_ms=50%` -> (`io_ms`, 0.5); the channel must be one of the calibration channels.
fn parse_tolerance(s: &str) -> Result<(String, f64), String> {
    let (channel, percent) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected CHANNEL=PERCENT, e.g. io_ms=50%"))?;
    if !contract::gate::KERNELS.contains(&channel) {
        return Err(format!(
            "{channel:?}: not a calibration channel (one of {})",
            contract::gate::KERNELS.join(", ")
        ));
    }
    Ok((channel.to_owned(), contract::parse::percent(percent)?))
}

/// Compare a recording with a baseline: per key the change and whether it is beyond both
/// recordings' own noise; exit 1 on a regression beyond the threshold.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline (`baselines/<class>/<scenario>.json`), a class directory, or the baselines
    /// directory: then the recording's machine class picks `<dir>/<class>/<scenario>.json`.
    pub baseline: PathBuf,
    /// The new recording (`<dir>/<scenario>.json`), or the directory `record --out` wrote.
    pub recording: PathBuf,
    /// Smallest change that counts, as a percentage (`5%`; a bare number is refused).
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = contract::parse::percent)]
    pub threshold: f64,
    /// Smallest change of a `cost` key (instructions retired) that counts.
    #[arg(long, value_name = "PERCENT", default_value = "1%", value_parser = contract::parse::percent)]
    pub cost_threshold: f64,
    /// Compare even when the two recordings come from different machine classes (otherwise
    /// refused with exit 7: the difference would be the machine, not the build).
    #[arg(long)]
    pub across_machines: bool,
    /// Refuse (exit 7) when a calibration channel's median differs from the baseline's beyond
    /// its tolerance, instead of reporting the keys that depend on it as not comparable.
    #[arg(long)]
    pub strict_machine: bool,
    /// How far a channel's median may differ from the baseline's before its keys are not
    /// comparable, as `CHANNEL=PERCENT` (`io_ms=50%`); repeatable. Defaults: cpu_ms 25%,
    /// io_ms 50%, rtt_ms 40% (docs/src/decisions/comparability.md).
    #[arg(long, value_name = "CHANNEL=PERCENT", value_parser = parse_tolerance)]
    pub machine_tolerance: Vec<(String, f64)>,
    /// When the baselines directory holds no baseline for the recording's class and scenario,
    /// say so and exit 0 (a trend job on a runner class without a baseline yet).
    #[arg(long)]
    pub missing_baseline_ok: bool,
    /// Write the Markdown comparison to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the comparison as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// What a file turned out to be.
enum Input {
    Recording(Box<(Baseline, Provenance)>),
    Ab(Box<AbResult>),
    Bisect(Box<contract::bisect::BisectResult>),
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<i32> {
    let history;
    let source;
    let input;
    let doc = if args.input.is_dir() {
        let (points, src) = history_points(&args.input, args.scenario.as_deref())?;
        history = points;
        source = src;
        Document::History {
            points: &history,
            source: &source,
        }
    } else {
        input = read_input(&args.input)?;
        match &input {
            Input::Recording(pair) => Document::Recording {
                baseline: &pair.0,
                provenance: &pair.1,
            },
            Input::Ab(v) => Document::Ab(v),
            Input::Bisect(v) => Document::Bisect(v),
        }
    };
    let what = args.input.display().to_string();
    let text = reports::render::render(&doc, args.format).with_context(|| what.clone())?;
    if args.format == Format::Gab
        && let Document::Recording {
            baseline,
            provenance,
        } = &doc
    {
        let left = reports::export::gab(baseline, Some(provenance)).omitted;
        if !left.is_empty() {
            eprintln!(
                "gab: {} higher-is-better key(s) left out of the smaller-is-better export (e.g. {})",
                left.len(),
                left[0]
            );
        }
    }
    if let Some(dir) = &args.png {
        let charts = reports::render::charts(&doc).with_context(|| what.clone())?;
        for c in &charts {
            let path = dir.join(format!("{}.png", c.slug));
            write_atomic(&path, &c.png().with_context(|| what.clone())?)?;
        }
        eprintln!("wrote {} chart(s) to {}", charts.len(), dir.display());
    }
    emit(args.out.as_deref(), &text)?;
    Ok(crate::exit::OK)
}

/// Writes to a file atomically, or to stdout.
fn emit(out: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match out {
        Some(p) => {
            write_atomic(p, text.as_bytes())?;
            eprintln!("wrote {}", p.display());
        }
        None => {
            use std::io::Write;
            let mut so = std::io::stdout().lock();
            match so.write_all(text.as_bytes()).and_then(|()| so.flush()) {
                // `vaultbench report x | head` closed the pipe: the reader has what it wanted.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r.context("writing to stdout")?,
            }
        }
    }
    Ok(())
}

/// Reads a file and decides by its `kind` what it is; anything else is named.
fn read_input(path: &Path) -> anyhow::Result<Input> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| anyhow::anyhow!("{} is not JSON: {}", path.display(), sniff(&bytes)))?;
    let header = contract::format::Header::of(&v);
    if header.is_ours() {
        contract::format::check_version(header.version)
            .map_err(|e| anyhow::anyhow!("{} {e}", path.display()))?;
    }
    match header.kind {
        KIND_BASELINE => Ok(Input::Recording(Box::new(
            crate::commands::verify::read_pair(path)?,
        ))),
        KIND_PROVENANCE => {
            let base = crate::commands::verify::baseline_files(path)?
                .into_iter()
                .next()
                .context("no baseline beside the sidecar")?;
            Ok(Input::Recording(Box::new(
                crate::commands::verify::read_pair(&base)?,
            )))
        }
        KIND_AB => contract::format::decode(v, KIND_AB)
            .map(|r| Input::Ab(Box::new(r)))
            .map_err(|e| anyhow::anyhow!("{} {e}", path.display())),
        contract::bisect::KIND_BISECT => contract::format::decode(v, contract::bisect::KIND_BISECT)
            .map(|r| Input::Bisect(Box::new(r)))
            .map_err(|e| anyhow::anyhow!("{} {e}", path.display())),
        KIND_SAMPLE => bail!(
            "{} is one sample's output (vaultbench.sample), not a recording: `vaultbench record` makes recordings",
            path.display()
        ),
        reports::render::KIND_REPORT => bail!(
            "{} is a rendered report (vaultbench.report), not a recording or a/b result",
            path.display()
        ),
        "" => bail!(
            "{} is not a vaultbench recording or a/b result: it has no `kind` and looks like {}",
            path.display(),
            looks_like(&v)
        ),
        other => bail!(
            "{} is not a vaultbench recording or a/b result: its kind is {other:?}",
            path.display()
        ),
    }
}

/// A guess at what a JSON document without `kind` is, for the error message.
fn looks_like(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Array(a)
            if !a.is_empty()
                && a.iter()
                    .all(|e| e.get("name").is_some() && e.get("value").is_some()) =>
        {
            "a github-action-benchmark export (an array of name/unit/value)"
        }
        Value::Object(o)
            if !o.is_empty()
                && o.values().all(|m| {
                    m.as_object()
                        .is_some_and(|m| m.values().all(|x| x.get("value").is_some()))
                }) =>
        {
            "a Bencher Metric Format export (benchmark -> measure -> value)"
        }
        Value::Object(o) if o.contains_key("metrics") && o.contains_key("scenario") => {
            "a baseline with its `kind` removed"
        }
        Value::Object(o) if o.contains_key("raw") || o.contains_key("exact_snapshot") => {
            "a provenance sidecar with its `kind` removed"
        }
        Value::Object(_) => "some other JSON object",
        Value::Array(_) => "some other JSON array",
        _ => "a bare JSON value",
    }
}

/// What a non-JSON file looks like.
fn sniff(bytes: &[u8]) -> &'static str {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
        .trim_start()
        .to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        "it looks like an HTML report"
    } else if head.starts_with('#') || head.starts_with("| ") {
        "it looks like a Markdown report"
    } else if head.starts_with("\u{89}png") || bytes.starts_with(b"\x89PNG") {
        "it looks like a PNG image"
    } else if head.contains("[[phase]]") || head.starts_with("name =") {
        "it looks like a scenario TOML file"
    } else if bytes.is_empty() {
        "it is empty"
    } else {
        "it does not parse"
    }
}

/// Versions of the baselines under `dir`: from git history when `dir` is in a git work tree
/// with commits touching it, otherwise the recordings found under it (ordered by recording time).
pub fn history_points(
    dir: &Path,
    only: Option<&str>,
) -> anyhow::Result<(Vec<HistoryPoint>, String)> {
    let (mut points, source) = match git_history(dir)? {
        Some(pts) if !pts.is_empty() => (
            pts,
            format!("Versions from the git history of {}.", dir.display()),
        ),
        _ => (
            dir_history(dir)?,
            format!(
                "Recordings found under {} (not in git history), ordered by recording time.",
                dir.display()
            ),
        ),
    };
    if let Some(s) = only {
        points.retain(|p| p.baseline.scenario == s);
        if points.is_empty() {
            bail!(
                "{}: no baselines of scenario {s:?} in its history",
                dir.display()
            );
        }
    }
    if points.is_empty() {
        bail!(
            "{}: no baselines in its git history or under it: nothing to trend",
            dir.display()
        );
    }
    Ok((points, source))
}

fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn is_baseline_name(p: &str) -> bool {
    p.ends_with(".json")
        && !p.ends_with(".provenance.json")
        && !p.rsplit('/').next().unwrap_or("").starts_with('.')
}

/// Every committed version of every baseline under `dir`, oldest first per file.
fn git_history(dir: &Path) -> anyhow::Result<Option<Vec<HistoryPoint>>> {
    let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]) else {
        return Ok(None);
    };
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim());
    let Some(names) = git(dir, &["log", "--format=", "--name-only", "--", "."]) else {
        return Ok(None);
    };
    let mut files: Vec<String> = String::from_utf8_lossy(&names)
        .lines()
        .map(str::trim)
        .filter(|l| is_baseline_name(l))
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    let mut points = Vec::new();
    for file in files {
        let Some(log) = git(&top, &["log", "--format=%H%x09%cI", "--", &file]) else {
            continue;
        };
        let log = String::from_utf8_lossy(&log).into_owned();
        let mut last_committed: Option<Vec<u8>> = None;
        for line in log.lines().rev() {
            let Some((rev, date)) = line.split_once('\t') else {
                continue;
            };
            let Some(text) = git(&top, &["show", &format!("{rev}:{file}")]) else {
                last_committed = None;
                continue;
            }; // deleted in this commit
            last_committed = Some(text.clone());
            let Some(baseline) = parse_versioned::<Baseline>(
                &text,
                KIND_BASELINE,
                &format!("{file} at {}", &rev[..12]),
            )?
            else {
                continue;
            };
            let side = format!("{}.provenance.json", file.trim_end_matches(".json"));
            let provenance = match git(&top, &["show", &format!("{rev}:{side}")]) {
                Some(t) => parse_versioned::<Provenance>(
                    &t,
                    KIND_PROVENANCE,
                    &format!("{side} at {}", &rev[..12]),
                )?,
                None => None,
            };
            points.push(HistoryPoint {
                label: rev[..7].to_owned(),
                commit: Some(rev.to_owned()),
                date: Some(date.to_owned()),
                baseline,
                provenance,
            });
        }
        // A re-recorded baseline not yet committed is the newest version: show it last.
        let wt = top.join(&file);
        if let Ok(text) = std::fs::read(&wt)
            && last_committed.as_deref() != Some(text.as_slice())
            && let Some(baseline) =
                parse_versioned::<Baseline>(&text, KIND_BASELINE, &wt.display().to_string())?
        {
            let side = crate::commands::verify::sidecar_of(&wt);
            let provenance = match std::fs::read(&side) {
                Ok(b) => {
                    parse_versioned::<Provenance>(&b, KIND_PROVENANCE, &side.display().to_string())?
                }
                Err(_) => None,
            };
            points.push(HistoryPoint {
                label: "working tree".into(),
                commit: None,
                date: None,
                baseline,
                provenance,
            });
        }
    }
    Ok(Some(points))
}

/// Parses a document of `kind`; `None` when it is some other JSON (a report, a ledger), an error
/// when it is ours but newer than this build.
fn parse_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    kind: &str,
    what: &str,
) -> anyhow::Result<Option<T>> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Ok(None);
    };
    if contract::format::Header::of(&v).kind != kind {
        return Ok(None);
    }
    contract::format::decode(v, kind)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{what} {e}"))
}

/// Recordings under `dir` (two levels deep: `results/<run>/<scenario>.json`), by recording time.
fn dir_history(dir: &Path) -> anyhow::Result<Vec<HistoryPoint>> {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let rd = std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && depth < 2 {
                stack.push((p, depth + 1));
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_baseline_name)
            {
                files.push(p);
            }
        }
    }
    let mut points = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        let Some(baseline) =
            parse_versioned::<Baseline>(&bytes, KIND_BASELINE, &f.display().to_string())?
        else {
            continue;
        };
        let side = crate::commands::verify::sidecar_of(&f);
        let provenance = match std::fs::read(&side) {
            Ok(b) => {
                parse_versioned::<Provenance>(&b, KIND_PROVENANCE, &side.display().to_string())?
            }
            Err(_) => None,
        };
        let label = f
            .parent()
            .filter(|p| p != &dir)
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| {
                f.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        let date = provenance.as_ref().map(|p| p.recorded_at.clone());
        points.push(HistoryPoint {
            label,
            commit: None,
            date,
            baseline,
            provenance,
        });
    }
    points.sort_by(|a, b| a.date.cmp(&b.date).then_with(|| a.label.cmp(&b.label)));
    Ok(points)
}

/// Resolves a compare argument: a baseline file, or a directory holding `<scenario>.json`
/// (when `scenario` is known) or exactly one baseline.
/// `what` names the argument in errors: `baseline`, or `recording` for the new one.
fn resolve(path: &Path, scenario: Option<&str>, what: &str) -> anyhow::Result<PathBuf> {
    if !path.is_dir() {
        return Ok(crate::commands::verify::baseline_files(path)?.remove(0));
    }
    if let Some(s) = scenario {
        let p = path.join(format!("{s}.json"));
        if !p.exists() {
            bail!("{} holds no {what} of scenario {s:?}", path.display());
        }
        return Ok(p);
    }
    let mut files = crate::commands::verify::baseline_files(path).map_err(|e| {
        if e.to_string().ends_with("holds no baselines") {
            anyhow::anyhow!(
                "{} holds no {what} (a `<scenario>.json` with its sidecar)",
                path.display()
            )
        } else {
            e
        }
    })?;
    if files.len() > 1 {
        bail!(
            "{} holds {} {what}s: name the file",
            path.display(),
            files.len()
        );
    }
    Ok(files.remove(0))
}

/// Where a recording's baseline is: the baseline file given, `<dir>/<scenario>.json`, or
/// `<dir>/<class>/<scenario>.json` for a baselines directory of class directories. `None` when
/// a directory holds no baseline for this scenario and class.
fn resolve_baseline(path: &Path, scenario: &str, class: Option<&str>) -> Option<PathBuf> {
    if !path.is_dir() {
        return Some(path.to_path_buf());
    }
    let direct = path.join(format!("{scenario}.json"));
    if direct.exists() {
        return Some(direct);
    }
    let in_class = path.join(class?).join(format!("{scenario}.json"));
    in_class.exists().then_some(in_class)
}

pub fn run_compare(args: CompareArgs) -> anyhow::Result<i32> {
    let (threshold, cost_threshold) = (args.threshold, args.cost_threshold);
    let rec_path = resolve(&args.recording, None, "recording")?;
    let (rb, rp) = crate::commands::verify::read_pair(&rec_path)?;
    let rec_class = crate::commands::class::of_recorded(&rp.machine);
    let Some(base_path) = resolve_baseline(&args.baseline, &rb.scenario, rec_class.as_deref())
    else {
        let class = rec_class.as_deref().unwrap_or("unknown");
        let msg = format!(
            "{} holds no baseline of scenario {:?} for machine class {class}",
            args.baseline.display(),
            rb.scenario
        );
        if args.missing_baseline_ok {
            eprintln!(
                "compare: {msg}: nothing to compare (record one on this class and commit it as {})",
                args.baseline
                    .join(class)
                    .join(format!("{}.json", rb.scenario))
                    .display()
            );
            return Ok(crate::exit::OK);
        }
        bail!("{msg} (--missing-baseline-ok passes when there is none)");
    };
    let base_path = resolve(&base_path, Some(&rb.scenario), "baseline")?;
    let (bb, bp) = crate::commands::verify::read_pair(&base_path)?;
    let base_class = crate::commands::class::of_recorded(&bp.machine);
    if let (Some(b), Some(r)) = (&base_class, &rec_class)
        && b != r
    {
        if !args.across_machines {
            eprintln!(
                "compare: refused: {} was recorded on machine class {b} and {} on {r}: the difference would be the machine, not the build (--across-machines compares anyway)",
                base_path.display(),
                rec_path.display()
            );
            return Ok(crate::exit::ACROSS_MACHINES);
        }
        eprintln!("compare: across machine classes ({b} vs {r}), as asked");
    }
    // A hand-edited input would compare numbers that were never measured together.
    for (path, b, p) in [(&base_path, &bb, &bp), (&rec_path, &rb, &rp)] {
        if let Some(m) = reports::schema::verify_pair(b, p).first() {
            bail!(
                "{} does not verify ({}: {}): run `vaultbench verify` on it",
                path.display(),
                m.key,
                m.detail
            );
        }
    }
    let opts = reports::compare::Options {
        machine_tolerance: args.machine_tolerance.iter().cloned().collect(),
        strict_machine: args.strict_machine,
        ..reports::compare::Options::new(threshold, cost_threshold)
    };
    let cmp = match reports::compare::compare_opts((&bb, &bp), (&rb, &rp), &opts) {
        Err(e @ reports::compare::CompareError::Machine { .. }) => {
            eprintln!(
                "compare: refused: {} vs {}: {e}",
                base_path.display(),
                rec_path.display()
            );
            return Ok(crate::exit::ACROSS_MACHINES);
        }
        other => other?,
    };
    let md = reports::compare::markdown(&cmp);
    if args.json {
        println!("{}", serde_json::to_string(&cmp)?);
        if let Some(p) = &args.out {
            emit(Some(p), &md)?;
        }
    } else {
        emit(args.out.as_deref(), &md)?;
    }
    eprintln!(
        "compare {} vs {}: {} regression(s) beyond {} and the recordings' noise",
        rec_path.display(),
        base_path.display(),
        cmp.regressions,
        reports::fmt::pct(threshold)
    );
    if cmp.not_comparable > 0 {
        let named: Vec<String> = cmp
            .machine
            .iter()
            .filter(|m| m.comparable == Some(false))
            .map(reports::comparability::ChannelMatch::label)
            .collect();
        eprintln!(
            "compare: {} timing/resource key(s) not comparable on this machine ({}): not judged",
            cmp.not_comparable,
            named.join(", ")
        );
    }
    Ok(if cmp.regressions > 0 {
        crate::exit::REGRESSION
    } else {
        crate::exit::OK
    })
}

//! The report of a `vaultbench bisect` result: the first bad commit with its estimate, the
//! commits measured with their verdicts, the comparisons in order, and the builds and wall
//! time used; as terminal text, Markdown and self-contained HTML.

use contract::bisect::{Answer, BisectOutcome, BisectResult, CommitVerdict};

use crate::fmt::{html_escape, html_table, md_table};

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |x| format!("{x:+.2} %"))
}

fn interval(r: Option<contract::ab::Interval>) -> String {
    r.map_or_else(
        || "[n/a]".into(),
        |c| format!("[{:+.2} %, {:+.2} %]", c.lo, c.hi),
    )
}

/// The answer in one sentence.
pub fn headline(r: &BisectResult) -> String {
    let est = format!(
        "{} {} (95 % interval)",
        pct(r.estimate_pct),
        interval(r.ci_pct)
    );
    match (r.outcome, &r.first_bad) {
        (BisectOutcome::Found, Some(c)) => format!(
            "First bad commit: {} ({} of {}) \"{}\": {} {est} against its last good neighbour",
            short(&c.commit),
            c.index,
            r.path_len,
            c.subject,
            r.key
        ),
        (BisectOutcome::Ambiguous, _) => format!(
            "The first bad commit is one of {}: the others did not build or stayed unknown; {} {est}",
            r.candidates
                .iter()
                .map(|c| format!("{} ({})", short(&c.commit), c.index))
                .collect::<Vec<_>>()
                .join(", "),
            r.key
        ),
        (BisectOutcome::NoRegression, _) => format!(
            "No regression: {} at --bad is not worse than at --good beyond ±{:.2} %: {est}",
            r.key,
            100.0 * r.tau
        ),
        _ => format!(
            "Unknown: --good against --bad stayed undecided after {} rounds: {est}; measure more (--max-rounds) or widen the threshold",
            r.max_rounds
        ),
    }
}

fn verdict_word(v: CommitVerdict) -> &'static str {
    match v {
        CommitVerdict::Good => "good",
        CommitVerdict::Bad => "bad",
        CommitVerdict::Skipped => "skipped (did not build)",
        CommitVerdict::Unknown => "unknown",
    }
}

fn answer_word(a: Answer) -> &'static str {
    match a {
        Answer::Different => "different",
        Answer::Same => "same",
        Answer::Unknown => "unknown",
    }
}

fn commit_rows(r: &BisectResult) -> Vec<Vec<String>> {
    r.commits
        .iter()
        .map(|c| {
            let values = if c.values.is_empty() {
                "–".to_owned()
            } else {
                c.values
                    .iter()
                    .map(|v| crate::fmt::num(*v))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                c.at.index.to_string(),
                short(&c.at.commit).to_owned(),
                verdict_word(c.verdict).to_owned(),
                values,
                if c.built_now { "built" } else { "cached" }.to_owned(),
                match &c.note {
                    Some(n) => format!("{} — {n}", c.at.subject),
                    None => c.at.subject.clone(),
                },
            ]
        })
        .collect()
}

fn step_rows(r: &BisectResult) -> Vec<Vec<String>> {
    r.steps
        .iter()
        .map(|s| {
            vec![
                s.candidate.to_string(),
                s.against.to_string(),
                answer_word(s.answer).to_owned(),
                s.rounds.to_string(),
                format!("{} {}", pct(s.estimate_pct), interval(s.ci_pct)),
                s.reason.clone(),
            ]
        })
        .collect()
}

const COMMIT_HEADERS: [&str; 6] = ["#", "commit", "verdict", "values", "build", "subject"];
const STEP_HEADERS: [&str; 6] = ["candidate", "against", "answer", "rounds", "change", "why"];

fn setup(r: &BisectResult) -> String {
    format!(
        "Key {} ({}), {} mode, threshold ±{:.2} %, {}–{} rounds per comparison, order seed {:#x}. \
         Scenario {} (profile {}, seed {:#x}). Repository {}, build `{}`, server {}. \
         Path: {} commit(s) after {} by first parents, ending at {}. \
         Builds: {} run, {} from the cache, {} beyond the two ends. Wall time {:.1} s{}. Recorded {}.",
        r.key,
        if r.unit.is_empty() { "–" } else { &r.unit },
        r.mode,
        100.0 * r.tau,
        r.rounds,
        r.max_rounds,
        r.order_seed,
        r.scenario,
        r.profile,
        r.seed,
        r.repo,
        r.build_command,
        r.run,
        r.path_len,
        short(&r.good.commit),
        short(&r.bad.commit),
        r.builds.built,
        r.builds.cached,
        r.builds.beyond_ends,
        r.wall_s,
        if r.resumed_measurements > 0 {
            format!(
                " ({} measurement(s) resumed from an interrupted run)",
                r.resumed_measurements
            )
        } else {
            String::new()
        },
        r.recorded_at
    )
}

/// The terminal summary (stderr).
pub fn summary(r: &BisectResult) -> String {
    let mut s = format!("\n{}\n", headline(r));
    for c in commit_rows(r) {
        s.push_str(&format!(
            "  {:>3}  {}  {:<24}  {}\n",
            c[0], c[1], c[2], c[5]
        ));
    }
    s.push_str(&format!(
        "builds: {} run, {} cached, {} beyond the two ends; wall time {:.1} s\n",
        r.builds.built, r.builds.cached, r.builds.beyond_ends, r.wall_s
    ));
    s
}

/// The Markdown report.
pub fn markdown(r: &BisectResult) -> String {
    format!(
        "# Bisect: {}\n\n**{}**\n\n{}\n\n## Commits measured\n\n{}\n## Comparisons, in order\n\n{}",
        r.key,
        headline(r),
        setup(r),
        md_table(&COMMIT_HEADERS, &commit_rows(r)),
        md_table(&STEP_HEADERS, &step_rows(r)),
    )
}

/// The HTML report (self-contained).
pub fn html(r: &BisectResult) -> String {
    format!(
        "{}<h1>Bisect: {}</h1>\n<p><strong>{}</strong></p>\n<p>{}</p>\n<h2>Commits measured</h2>\n{}<h2>Comparisons, in order</h2>\n{}{}",
        super::html::head(&format!("vaultbench bisect: {}", r.key)),
        html_escape(&r.key),
        html_escape(&headline(r)),
        html_escape(&setup(r)),
        html_table(&COMMIT_HEADERS, &commit_rows(r)),
        html_table(&STEP_HEADERS, &step_rows(r)),
        super::html::TAIL
    )
}

//! The pre-check's refusal as a user can act on it: who is busy (the busiest processes outside
//! vaultbench, with their shares of the machine's CPU), the bound, and the ways forward; and
//! wrapping a refusal to the terminal's width.

use std::time::Duration;

/// A machine the pre-check found busy: the refusing verdict and what was busy.
#[derive(Debug, Clone)]
pub struct PreCheckRefusal {
    pub verdict: calibration::GateVerdict,
    /// The busiest processes outside vaultbench over the look, by name: (name, share of all
    /// CPU time of the machine), largest first.
    pub busiest: Vec<(String, f64)>,
    /// `--wait-quiet`: how long the machine was watched before giving up.
    pub waited: Option<Duration>,
}

/// How many processes a refusal names.
pub const SHOWN: usize = 5;

/// A share as a whole percentage, `<1 %` below one.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p < 1.0 {
        "<1 %".to_owned()
    } else {
        format!("{p:.0} %")
    }
}

/// `cargo 48 %, chromium 31 %`: the busiest names with their shares.
pub fn busiest_line(busiest: &[(String, f64)]) -> String {
    // Those with at least half a per cent, and the busiest one whatever its share.
    busiest
        .iter()
        .enumerate()
        .filter(|(i, (_, s))| *i == 0 || *s >= 0.005)
        .map(|(_, b)| b)
        .take(SHOWN)
        .map(|(n, s)| format!("{n} {}", percent(*s)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl PreCheckRefusal {
    /// The full refusal: what refused, who was busy, and three ways forward. `written` says
    /// what the refused run left behind (`no recording written (the attempt is counted in
    /// PATH)`, or `nothing written`).
    pub fn message(&self, written: &str) -> String {
        let mut out = format!(
            "the machine is already busy, {written}.\n  {}",
            self.verdict.failures.join("\n  ")
        );
        if !self.busiest.is_empty() {
            out += &format!(
                "\n  Busiest outside vaultbench (share of the machine's CPU): {}",
                busiest_line(&self.busiest)
            );
        }
        if let Some(w) = self.waited {
            out += &format!(
                "\n  Still busy after --wait-quiet {} of watching.",
                contract::parse::format_duration(w)
            );
        }
        out += "\n  Ways forward:\
                \n  - wait for those to finish (or stop them), then run again;\
                \n  - add --wait-quiet 5m (or longer): vaultbench watches the machine and starts once it is quiet, and refuses if it is still busy after 5 minutes;\
                \n  - loosen the gate knowingly: `vaultbench calibrate --print-config > gate.toml`, raise `max_share` under [foreign_cpu] (or [foreign_io], [steal]), and pass --gate-config gate.toml; the report then names every loosened bound, and figures measured beside other work move by tens of per cent.";
        out
    }
}

/// The width of the terminal on stderr, when stderr is one.
pub fn stderr_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; a failure (not a terminal) returns -1.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col >= 20).then_some(usize::from(ws.ws_col))
}

/// `text` with every line longer than `width` broken at spaces; a continuation keeps the
/// line's indent (plus two spaces after a list dash), so the structure stays readable.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push(line.to_owned());
            continue;
        }
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let hang = if line.trim_start().starts_with("- ") {
            format!("{indent}  ")
        } else {
            indent.clone()
        };
        let mut cur = String::new();
        for word in line.trim_start().split(' ') {
            if cur.is_empty() {
                cur = format!("{indent}{word}");
            } else if cur.chars().count() + 1 + word.chars().count() <= width {
                cur.push(' ');
                cur.push_str(word);
            } else {
                out.push(std::mem::take(&mut cur));
                cur = format!("{hang}{word}");
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal() -> PreCheckRefusal {
        PreCheckRefusal {
            verdict: calibration::GateVerdict {
                accepted: false,
                drift_checked: false,
                reference_id: None,
                channels: Default::default(),
                in_sample: Default::default(),
                unavailable: Vec::new(),
                failures: vec![
                    "foreign_cpu 0.790 > 0.10 before the first sample (a 2.0 s pre-check)".into(),
                ],
                reported: Default::default(),
                warnings: Vec::new(),
                pre_check: Default::default(),
            },
            busiest: vec![
                ("cargo".into(), 0.48),
                ("chromium".into(), 0.31),
                ("sh".into(), 0.004),
            ],
            waited: None,
        }
    }

    #[test]
    fn the_refusal_names_who_is_busy_the_bound_and_three_ways_forward() {
        let m = refusal().message("nothing written");
        assert!(m.contains("cargo 48 %, chromium 31 %\n"), "{m}");
        assert!(m.contains("foreign_cpu 0.790 > 0.10"), "{m}");
        assert!(m.contains("--wait-quiet 5m"), "{m}");
        assert!(m.contains("--gate-config gate.toml"), "{m}");
        assert!(m.contains("wait for those to finish"), "{m}");
        assert!(!m.contains("Still busy"), "{m}");
        let mut r = refusal();
        r.waited = Some(Duration::from_secs(300));
        assert!(r.message("x").contains("Still busy after --wait-quiet 5m"));
    }

    #[test]
    fn wrapping_keeps_every_word_and_fits_the_width() {
        let m = refusal().message("no recording written (the attempt is counted in /a/b.jsonl)");
        let w = wrap(&m, 60);
        for line in w.lines() {
            // A single word longer than the width stays whole.
            assert!(
                line.chars().count() <= 60 || !line.trim().contains(' '),
                "{line:?}"
            );
        }
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words(&w), words(&m));
        assert!(w.lines().count() > m.lines().count());
        assert!(
            w.contains("\n    "),
            "a list item's continuation is indented:\n{w}"
        );
    }
}

//! The small parsers every command line shares: seeds, percentages (unsigned fractions for
//! thresholds, signed points for A/B rules), durations (through `humantime`). Each error is
//! one line naming the input.

use std::time::Duration;

/// Parses a seed: decimal, or hex with a `0x`/`0X` prefix; `_` separators are allowed in
/// both (`0x5e_ed`, `1_000`), surrounding whitespace is ignored.
pub fn seed(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => t.replace('_', "").parse::<u64>(),
    };
    parsed.map_err(|_| {
        format!("bad seed {s:?}: expected a decimal or 0x-prefixed hex number below 2^64")
    })
}

/// Parses a percentage flag's value: `5%`, `+5%`, `2.5 %` into a fraction (0.05 ...). Every
/// percent flag (`ab --tau`, `compare --threshold`) goes through here, so they mean the same.
///
/// A bare number is refused (except 0): `0.05` reads as 5 % to some and as 0.05 % to others,
/// and a threshold off by a factor of 100 silently passes or fails everything. Negative,
/// non-finite and unparsable values are refused; the error names the value.
pub fn percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_start_matches('+');
    let v = match t.strip_suffix('%') {
        Some(p) => {
            p.trim()
                .parse::<f64>()
                .map_err(|_| format!("{s:?} is not a percentage like 5%"))?
                / 100.0
        }
        None => match t.parse::<f64>() {
            Ok(0.0) => 0.0,
            Ok(_) => {
                return Err(format!(
                    "{s:?} has no unit: write a percentage like {t}% (a bare number is ambiguous)"
                ));
            }
            Err(_) => return Err(format!("{s:?} is not a percentage like 5%")),
        },
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s:?} must be a finite non-negative percentage"));
    }
    Ok(v)
}

/// Why a signed percentage was refused; the caller words the message for its context (an A/B
/// rule names "the threshold").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignedPercentError {
    /// The text does not end in `%`.
    #[error("{0:?} does not end in '%'")]
    NoPercentSign(String),
    /// What stands before the `%` (trailing spaces dropped) is not a signed decimal number.
    #[error("{0:?} is not a signed decimal number")]
    NotDecimal(String),
}

/// Parses a signed percentage, `-10%`, `+2.5 %`, `.5%`, `0%`, into percentage points (`-10.0`
/// for `-10%`, not a fraction: an A/B rule keeps its threshold as written). The number is
/// plain decimal: digits and at most one `.`-separated fraction, at most one leading sign,
/// nothing else (no exponent, `inf` or `nan`); spaces may stand around it and before the `%`,
/// not between the sign and the digits. Bounds are the caller's (a rule refuses -100 % and
/// below).
pub fn signed_percent_points(s: &str) -> Result<f64, SignedPercentError> {
    let t = s.trim();
    let Some(number) = t.strip_suffix('%') else {
        return Err(SignedPercentError::NoPercentSign(t.to_owned()));
    };
    let number = number.trim_end();
    let is_decimal = !number.is_empty()
        && number
            .trim_start_matches(['+', '-'])
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().any(|c| c.is_ascii_digit())
        && number.chars().filter(|c| matches!(c, '+' | '-')).count() <= 1;
    match number.parse::<f64>() {
        Ok(v) if is_decimal => Ok(v),
        _ => Err(SignedPercentError::NotDecimal(number.to_owned())),
    }
}

/// The longest duration a command accepts (a day): longer is a typo, not a benchmark.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Parses a duration with [`humantime::parse_duration`] (`10s`, `500ms`, `2m`, `1h`, `1.5s`,
/// and its other spellings: `90sec`, `2 min`, `1h 30m`, `1d`), under this project's rules:
/// more than 0, at most [`MAX_DURATION`], and a number without a unit is an error (`10` could
/// mean seconds or milliseconds).
///
/// humantime (2.2 and later) reads fractions, so `1.5s`, which `load --duration` has always
/// accepted, still parses. It wants a digit on both sides of the point: `.5s` and `5.s`, which
/// the hand-written parser before it took, are refused now. Its compound forms (`1h 30m`) and
/// its longer unit names are accepted: they cannot be misread, and a day is still the most.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("duration {s:?} has no unit (use ms, s, m or h)"));
    }
    let d = humantime::parse_duration(t).map_err(|e| match e {
        humantime::DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
            format!("duration {s:?} has no unit after its last number (use ms, s, m or h)")
        }
        humantime::DurationError::UnknownUnit { unit, .. } => {
            format!("duration {s:?} has unknown unit {unit:?} (use ms, s, m or h)")
        }
        humantime::DurationError::NumberOverflow => format!("duration {s:?} is out of range"),
        e => format!("duration {s:?} is not a number followed by a unit ({e})"),
    })?;
    if d.is_zero() {
        return Err(format!("duration {s:?} must be more than 0"));
    }
    if d > MAX_DURATION {
        return Err(format!("duration {s:?} is longer than 24h"));
    }
    Ok(d)
}

/// [`duration`], where zero is a value too (`0s`, or a bare `0`): for a flag whose zero turns
/// a step off, such as `--pre-check 0s`.
pub fn duration_or_zero(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" || humantime::parse_duration(t).is_ok_and(|d| d.is_zero()) {
        return Ok(Duration::ZERO);
    }
    duration(s)
}

/// A duration flag's value where, for one release, the bare number of seconds the flag took
/// before is still accepted (`--sample-timeout 1800` as well as `30m`), with a deprecation note
/// the command prints ([`SecondsOrDuration::deprecation`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondsOrDuration {
    pub duration: Duration,
    /// The value was a bare number of seconds (the old form).
    pub bare: bool,
}

impl SecondsOrDuration {
    /// The one-line note for a bare number given to `flag`; `None` for a humantime value.
    pub fn deprecation(&self, flag: &str) -> Option<String> {
        self.bare.then(|| {
            format!(
                "note: a bare number of seconds for {flag} is deprecated and will be refused in \
                 the next release: write {}",
                format_duration(self.duration)
            )
        })
    }
}

/// A duration the way [`duration`] reads it back (`30m`, `1h 30m`, `2s 500ms`).
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Parses a [`SecondsOrDuration`]: a [`duration`], or (deprecated) a bare positive number of
/// seconds, under the same bounds.
pub fn seconds_or_duration(s: &str) -> Result<SecondsOrDuration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = t.parse().map_err(|_| {
            format!("duration {s:?} is not a number followed by a unit (use ms, s, m or h)")
        })?;
        if secs <= 0.0 || secs.is_nan() {
            return Err(format!("duration {s:?} must be more than 0"));
        }
        if secs > MAX_DURATION.as_secs_f64() {
            return Err(format!("duration {s:?} is longer than 24h"));
        }
        return Ok(SecondsOrDuration {
            duration: Duration::from_secs_f64(secs),
            bare: true,
        });
    }
    duration(s).map(|duration| SecondsOrDuration {
        duration,
        bare: false,
    })
}

/// The `{name}` placeholders of a command line `s` (lowercase letters and `_` between
/// braces) that are not among `known`, in order. Other braces (a JSON header, `{Dir}`) are
/// text, not placeholders.
pub fn unknown_placeholders<'a>(s: &'a str, known: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        let Some(j) = rest.find('}') else { break };
        let name = &rest[..j];
        if !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            && !known.contains(&name)
        {
            out.push(name);
        }
        rest = &rest[j..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_or_zero_takes_zero_and_otherwise_reads_as_duration() {
        assert_eq!(duration_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(duration_or_zero("0ms"), Ok(Duration::ZERO));
        assert_eq!(duration_or_zero("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration_or_zero("500ms"), Ok(Duration::from_millis(500)));
        assert!(duration_or_zero("2").unwrap_err().contains("no unit"));
        assert!(
            duration_or_zero("25h")
                .unwrap_err()
                .contains("longer than 24h")
        );
        assert!(duration_or_zero("-1s").is_err());
    }

    #[test]
    fn seconds_or_durations() {
        let d = seconds_or_duration("30m").unwrap();
        assert_eq!((d.duration, d.bare), (Duration::from_secs(1800), false));
        assert_eq!(d.deprecation("--sample-timeout"), None);
        let d = seconds_or_duration("1800").unwrap();
        assert_eq!((d.duration, d.bare), (Duration::from_secs(1800), true));
        let note = d.deprecation("--sample-timeout").unwrap();
        assert!(
            note.contains("--sample-timeout") && note.ends_with("write 30m"),
            "{note}"
        );
        assert_eq!(
            seconds_or_duration("2.5").unwrap().duration,
            Duration::from_millis(2500)
        );
        assert!(
            seconds_or_duration("0")
                .unwrap_err()
                .contains("more than 0")
        );
        assert!(seconds_or_duration("90000").unwrap_err().contains("24h"));
        assert!(seconds_or_duration("1.2.3").is_err());
        assert!(
            seconds_or_duration("5 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
    }

    #[test]
    fn seeds() {
        assert_eq!(seed("42"), Ok(42));
        assert_eq!(seed("0x5e_ed"), Ok(0x5eed));
        assert_eq!(seed(" 0X5EED "), Ok(0x5eed));
        assert_eq!(seed("1_000"), Ok(1000));
        assert!(seed("-1").unwrap_err().contains("\"-1\""));
        assert!(seed("0x1_0000_0000_0000_0000").is_err());
    }

    #[test]
    fn percents() {
        assert_eq!(percent("3%"), Ok(0.03));
        assert_eq!(percent("+3%"), Ok(0.03));
        assert_eq!(percent(" 2.5 % "), Ok(0.025));
        assert_eq!(percent("0"), Ok(0.0));
        for bare in ["3", "0.05", "+3"] {
            let e = percent(bare).unwrap_err();
            assert!(e.contains("no unit") && e.contains(bare), "{e}");
        }
        assert!(percent("-1%").is_err());
        assert!(percent("inf%").is_err());
        assert!(percent("x").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn signed_percents() {
        for (s, v) in [
            ("-10%", -10.0),
            ("+2.5 %", 2.5),
            (" 5% ", 5.0),
            (".5%", 0.5),
            ("5.%", 5.0),
            ("0%", 0.0),
            ("-99.9%", -99.9),
        ] {
            assert_eq!(signed_percent_points(s), Ok(v), "{s}");
        }
        assert_eq!(
            signed_percent_points("-10"),
            Err(SignedPercentError::NoPercentSign("-10".into()))
        );
        for (s, number) in [
            ("%", ""),
            ("--5%", "--5"),
            ("+-5%", "+-5"),
            ("- 5%", "- 5"),
            ("1e2%", "1e2"),
            ("inf%", "inf"),
            ("1.2.3%", "1.2.3"),
            (".%", "."),
            ("5-%", "5-"),
        ] {
            assert_eq!(
                signed_percent_points(s),
                Err(SignedPercentError::NotDecimal(number.into())),
                "{s}"
            );
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration(" 10s "), Ok(Duration::from_secs(10)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        // humantime's other spellings: compound, long unit names, a whole day.
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("90sec"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1d"), Ok(MAX_DURATION));
        for bare in ["10", "1.5", "0", ""] {
            let e = duration(bare).unwrap_err();
            assert!(
                e.contains("no unit") && e.contains(&format!("{bare:?}")),
                "{e}"
            );
        }
        assert!(duration("1h30").unwrap_err().contains("no unit"));
        assert!(duration("10x").unwrap_err().contains("unknown unit \"x\""));
        assert!(duration("0s").unwrap_err().contains("more than 0"));
        assert!(duration("25h").unwrap_err().contains("longer than 24h"));
        assert!(duration("24h 1s").is_err());
        for bad in ["s", "-1s", ".5s", "5.s", "1e3s", "0.5ns"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}

//! The small parsers every command line shares: seeds, percentages, durations. Each error is
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

/// The longest duration a command accepts (a day): longer is a typo, not a benchmark.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Parses `10s`, `500ms`, `2m`, `1h`, `1.5s` (more than 0, at most [`MAX_DURATION`]); a
/// number without a unit is an error.
///
/// Not `humantime::parse_duration`: it refuses fractions (`1.5s`), which the load generator
/// has always accepted and its docs show.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration {s:?} has no unit (use ms, s, m or h)"))?;
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration {s:?} is not a number followed by a unit"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(format!(
                "duration {s:?} has unknown unit {unit:?} (use ms, s, m or h)"
            ));
        }
    };
    let d =
        Duration::try_from_secs_f64(secs).map_err(|_| format!("duration {s:?} is out of range"))?;
    if d.is_zero() {
        return Err(format!("duration {s:?} must be more than 0"));
    }
    if d > MAX_DURATION {
        return Err(format!("duration {s:?} is longer than 24h"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn durations() {
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert!(duration("10").unwrap_err().contains("no unit"));
        assert!(duration("0s").is_err());
        assert!(duration("25h").is_err());
    }
}

//! Number and table formatting shared by the Markdown and HTML renderers.

/// A number for people: integers with thousands separators, two decimals from 1 up, four
/// significant digits below 1 (so a CV of 0.0175 is not printed as 0.02).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "n/a".into()
        } else if v > 0.0 {
            "∞".into()
        } else {
            "−∞".into()
        };
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return group(&format!("{}", v as i64));
    }
    let a = v.abs();
    if a >= 1.0 {
        group(&format!("{v:.2}"))
    } else {
        let decimals = (3 - a.log10().floor() as i32).clamp(1, 9) as usize;
        format!("{v:.decimals$}")
    }
}

/// A value with its unit, `12.5 ms`; counts and bare ratios without one.
pub fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "" | "count" | "bool" => num(v),
        u => format!("{} {u}", num(v)),
    }
}

/// A share of an allowance (0.088 → `8.8%`).
pub fn pct(share: f64) -> String {
    if !share.is_finite() {
        return num(share);
    }
    format!("{:.1}%", share * 100.0)
}

/// A signed relative change (−0.57 → `−57.0%`, 0.032 → `+3.2%`).
pub fn signed_pct(change: f64) -> String {
    if change.is_infinite() {
        return if change > 0.0 {
            "+∞".into()
        } else {
            "−∞".into()
        };
    }
    if change.is_nan() {
        return "n/a".into();
    }
    let p = change * 100.0;
    if p.abs() < 0.05 {
        "±0.0%".into()
    } else if p > 0.0 {
        format!("+{p:.1}%")
    } else {
        format!("−{:.1}%", -p)
    }
}

/// Inserts thousands separators into the integer part of a formatted number.
fn group(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map_or(("", s), |r| ("−", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{out}.{f}"),
        None => format!("{sign}{out}"),
    }
}

/// A Markdown table; cells have `|` escaped.
pub fn md_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    out.push_str(&format!(
        "| {} |\n",
        headers
            .iter()
            .map(|h| esc(h))
            .collect::<Vec<_>>()
            .join(" | ")
    ));
    out.push_str(&format!(
        "|{}\n",
        headers
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    ));
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

/// Escapes text for HTML element content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for HTML and turns Markdown `code` spans into `<code>` elements.
pub fn html_inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        // Odd parts sit between a pair of backticks; an unpaired trailing one stays literal.
        if i % 2 == 1 && s.matches('`').count() > i {
            out.push_str(&format!("<code>{}</code>", html_escape(part)));
        } else {
            if i % 2 == 1 {
                out.push('`');
            }
            out.push_str(&html_escape(part));
        }
    }
    out
}

/// An HTML table; the first column is left-aligned, the rest right-aligned (numbers).
pub fn html_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in headers {
        out.push_str(&format!("<th>{}</th>", html_escape(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            out.push_str(&format!("<td>{}</td>", html_inline(c)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A file-name-safe slug.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_the_seed_report() {
        assert_eq!(num(1583.25), "1,583.25");
        assert_eq!(num(1_241_088.0), "1,241,088");
        assert_eq!(num(0.0175), "0.01750");
        assert_eq!(num(-12.5), "−12.50");
        assert_eq!(num(f64::NAN), "n/a");
        assert_eq!(pct(0.088), "8.8%");
        assert_eq!(signed_pct(-0.57), "−57.0%");
        assert_eq!(signed_pct(0.032), "+3.2%");
        assert_eq!(with_unit(3.0, "count"), "3");
        assert_eq!(with_unit(2.5, "ms"), "2.50 ms");
    }

    #[test]
    fn tables_escape_their_cells() {
        let t = md_table(&["a", "b"], &[vec!["x|y".into(), "1".into()]]);
        assert!(t.contains("x\\|y"));
        assert_eq!(
            html_escape("<a href=\"x\">"),
            "&lt;a href=&quot;x&quot;&gt;"
        );
        assert_eq!(
            html_inline("use `vaultbench ab` <now>"),
            "use <code>vaultbench ab</code> &lt;now&gt;"
        );
        assert_eq!(html_inline("a ` b"), "a ` b");
    }
}

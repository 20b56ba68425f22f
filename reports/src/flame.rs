//! Flame graphs as self-contained SVG from collapsed stacks (`main;serve;handler` with a
//! count): a plain one for a recording's phase, and a differential one for an A/B (B's stacks,
//! each frame coloured by its change against A's frame at the same stack). No script, no font
//! file, no URL: every frame carries a `<title>` that a browser shows on hover, and a frame too
//! narrow for its name shows none. Written here rather than taken from `inferno`, whose
//! licence (CDDL-1.0) this workspace does not carry (`docs/src/decisions/flame-graphs.md`).

use std::collections::BTreeMap;

use contract::profile::Stack;

/// The SVG's width in user units; frames narrower than `MIN_WIDTH` are not drawn.
pub const WIDTH: f64 = 1000.0;
const ROW: f64 = 16.0;
const MIN_WIDTH: f64 = 0.5;
/// Average advance of the 11-unit sans-serif text, for cutting a name to its frame.
const CHAR_W: f64 = 7.0;

/// One frame of the merged tree.
#[derive(Debug, Default)]
struct Node {
    value: f64,
    /// The other arm's value at this stack (differential graphs).
    other: f64,
    children: BTreeMap<String, Node>,
}

fn tree(stacks: &[Stack], other: &[Stack], scale: f64, other_scale: f64) -> Node {
    let mut root = Node::default();
    for s in stacks {
        let v = s.ir as f64 * scale;
        root.value += v;
        let mut n = &mut root;
        for f in s.frames.split(';') {
            n = n.children.entry(f.to_owned()).or_default();
            n.value += v;
        }
    }
    for s in other {
        let v = s.ir as f64 * other_scale;
        root.other += v;
        let mut n = &mut root;
        for f in s.frames.split(';') {
            n = n.children.entry(f.to_owned()).or_default();
            n.other += v;
        }
    }
    root
}

fn depth(n: &Node) -> usize {
    n.children.values().map(|c| 1 + depth(c)).max().unwrap_or(0)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A warm colour fixed by the name (the same function, the same colour in every graph).
fn warm(name: &str) -> String {
    let h = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let r = 205 + (h % 50);
    let g = 90 + ((h >> 8) % 110);
    let b = 40 + ((h >> 16) % 40);
    format!("rgb({r},{g},{b})")
}

/// Red for growth, blue for shrinkage, white for none; full colour at ±`full` of the total.
fn diff_colour(delta: f64, total: f64, full: f64) -> String {
    let x = if total > 0.0 {
        (delta / total / full).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    // Unchanged frames are light grey (not white), so the graph's shape shows.
    let fade = |x: f64| (225.0 - 195.0 * x.abs()).round() as u8;
    if x >= 0.0 {
        format!("rgb(255,{},{})", fade(x), fade(x))
    } else {
        format!("rgb({},{},255)", fade(x), fade(x))
    }
}

struct Draw<'a> {
    out: String,
    total: f64,
    diff: bool,
    unit: &'a str,
    rows: usize,
}

impl Draw<'_> {
    fn node(&mut self, name: &str, n: &Node, x: f64, level: usize) {
        let w = if self.total > 0.0 {
            n.value / self.total * WIDTH
        } else {
            0.0
        };
        if w < MIN_WIDTH {
            return;
        }
        // Flames grow upwards: the root row at the bottom.
        let y = (self.rows - 1 - level) as f64 * ROW;
        let share = n.value / self.total * 100.0;
        let (fill, title) = if self.diff {
            let delta = n.value - n.other;
            (
                diff_colour(delta, self.total, 0.01),
                format!(
                    "{name}: {} {} in B ({share:.2}%), {:+.0} against A",
                    n.value.round(),
                    self.unit,
                    delta
                ),
            )
        } else {
            (
                warm(name),
                format!("{name}: {} {} ({share:.2}%)", n.value.round(), self.unit),
            )
        };
        self.out.push_str(&format!(
            "<g><title>{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{fill}\" stroke=\"#fff\" stroke-width=\"0.5\"/>",
            escape(&title),
            ROW - 1.0
        ));
        let fit = ((w - 4.0) / CHAR_W).floor() as usize;
        if fit >= 3 {
            let label: String = if name.chars().count() > fit {
                let mut s: String = name.chars().take(fit.saturating_sub(2)).collect();
                s.push_str("..");
                s
            } else {
                name.to_owned()
            };
            self.out.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 2.0,
                y + ROW - 4.5,
                escape(&label)
            ));
        }
        self.out.push_str("</g>\n");
        let mut cx = x;
        for (child, c) in &n.children {
            self.node(child, c, cx, level + 1);
            cx += c.value / self.total * WIDTH;
        }
    }
}

/// A flame graph of `stacks` (values in `unit`); `other` gives a differential graph: each
/// frame of `stacks` coloured by its value minus `other`'s at the same stack, with `other`
/// scaled by `other_scale` first (A's per-request values against B's, say).
pub fn svg(title: &str, stacks: &[Stack], other: Option<(&[Stack], f64)>, unit: &str) -> String {
    let (o, os) = other.unwrap_or((&[], 1.0));
    let root = tree(stacks, o, 1.0, os);
    let rows = depth(&root).max(1) + 1;
    let height = rows as f64 * ROW + 22.0;
    let mut d = Draw {
        out: String::new(),
        total: root.value,
        diff: other.is_some(),
        unit,
        rows,
    };
    d.out.push_str(&format!(
        "<svg class=\"flame\" viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" font-family=\"DejaVu Sans,Verdana,sans-serif\" font-size=\"11\">\n<title>{}</title>\n<g transform=\"translate(0,20)\">\n",
        escape(title)
    ));
    d.node("all", &root, 0.0, 0);
    d.out.push_str("</g>\n");
    d.out.push_str(&format!(
        "<text x=\"0\" y=\"13\" font-size=\"12\">{}</text>\n</svg>\n",
        escape(title)
    ));
    d.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(frames: &str, ir: u64) -> Stack {
        Stack {
            frames: frames.into(),
            ir,
        }
    }

    #[test]
    fn frames_are_as_wide_as_their_stacks_and_names_are_escaped() {
        let stacks = [
            s("main;serve;handle<T>", 600),
            s("main;serve", 200),
            s("main;gc", 200),
        ];
        let svg = svg("p & q", &stacks, None, "instructions");
        assert!(svg.contains("width=\"1000.0\""), "the root spans the width");
        assert!(svg.contains("width=\"600.0\""), "{svg}");
        assert!(svg.contains("handle&lt;T&gt;"));
        assert!(svg.contains("<title>p &amp; q</title>"));
        assert!(!svg.contains("<script"));
    }

    #[test]
    fn a_differential_graph_colours_growth_red_and_shrinkage_blue() {
        let b = [s("main;grow", 600), s("main;keep", 400)];
        let a = [
            s("main;grow", 300),
            s("main;keep", 400),
            s("main;gone", 300),
        ];
        let svg = svg("d", &b, Some((&a, 1.0)), "instructions");
        assert!(
            svg.contains("grow: 600 instructions in B (60.00%), +300 against A"),
            "{svg}"
        );
        assert!(
            svg.contains("fill=\"rgb(255,30,30)\""),
            "full red: +30 % of the total"
        );
        assert!(
            svg.contains("fill=\"rgb(255,225,225)\""),
            "keep did not move"
        );
    }

    #[test]
    fn a_thousand_functions_stay_readable() {
        let stacks: Vec<Stack> = (0..1000).map(|i| s(&format!("main;f{i}"), 1)).collect();
        let svg = svg("many", &stacks, None, "instructions");
        // 1000 frames of 1 unit are 1.0 wide: drawn, but none carries a label.
        assert_eq!(svg.matches("<rect").count(), 1002);
        assert!(!svg.contains(">f1<"));
        assert!(svg.len() < 400_000, "{}", svg.len());
    }
}

//! Finds the links in a note and checks whether they resolve, the way Obsidian reads them
//! (`[[name]]`, `[[name|alias]]`, `[[#Heading]]`, `![[embed]]`, `[text](path%20enc.md)`).
//! Used by the tests and by anyone who wants to audit a generated vault.

use std::collections::BTreeSet;

use crate::text::percent_decode;

/// One link as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The target without alias: `Note`, `Folder/Note.md`, `#Heading`, `image.png`.
    pub target: String,
    /// `![[...]]` or `![](...)`.
    pub embed: bool,
    /// `[text](url)` rather than `[[...]]`.
    pub markdown: bool,
}

/// Every internal link in `text` (external `scheme:` URLs are skipped).
pub fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'['
            && b[i + 1] == b'['
            && let Some(end) = text[i + 2..].find("]]")
        {
            let inner = &text[i + 2..i + 2 + end];
            let target = inner.split('|').next().unwrap_or("").to_owned();
            out.push(Link {
                target,
                embed: i > 0 && b[i - 1] == b'!',
                markdown: false,
            });
            i += end + 4;
            continue;
        }
        if b[i] == b']'
            && b[i + 1] == b'('
            && let Some(end) = text[i + 2..].find(')')
        {
            let url = &text[i + 2..i + 2 + end];
            let open = text[..i].rfind('[');
            let embed = open.is_some_and(|o| o > 0 && b[o - 1] == b'!');
            // `scheme:` URLs (https:, data:) are external, not vault links.
            if !url.contains(':')
                && let Some(t) = percent_decode(url)
            {
                out.push(Link {
                    target: t,
                    embed,
                    markdown: true,
                });
            }
            i += end + 3;
            continue;
        }
        i += 1;
    }
    out
}

/// The headings of a note (`# Text` .. `###### Text`).
pub fn headings(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start_matches('#');
            (rest.len() < l.len() && l.len() - rest.len() <= 6).then_some(rest)
        })
        .filter_map(|r| r.strip_prefix(' '))
        .collect()
}

/// The files of a vault, for link resolution.
pub struct LinkIndex {
    paths: BTreeSet<String>,
    names: BTreeSet<String>,
}

impl LinkIndex {
    pub fn new<'a>(paths: impl IntoIterator<Item = &'a str>) -> LinkIndex {
        let mut idx = LinkIndex {
            paths: BTreeSet::new(),
            names: BTreeSet::new(),
        };
        for p in paths {
            idx.paths.insert(p.to_owned());
            let base = p.rsplit('/').next().unwrap_or(p);
            idx.names.insert(base.to_owned());
            if let Some(stem) = base.strip_suffix(".md") {
                idx.names.insert(stem.to_owned());
            }
        }
        idx
    }

    /// Whether `link`, found in a note whose text is `note`, points at something that exists.
    pub fn resolves(&self, note: &str, link: &Link) -> bool {
        let (file, heading) = match link.target.split_once('#') {
            Some((f, h)) => (f, Some(h)),
            None => (link.target.as_str(), None),
        };
        if file.is_empty() {
            return heading.is_some_and(|h| headings(note).contains(h));
        }
        if link.markdown {
            self.paths.contains(file)
        } else {
            self.paths.contains(file)
                || self.paths.contains(&format!("{file}.md"))
                || self.names.contains(file)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_kind() {
        let t = "# Top\nSee [[A note|alias]] and [[#Top]]. ![[img.png]]\n[x](Folder/B%20c.md) ![](attachments/i%20j.png) [w](https://e.org/x)\n";
        let l = links(t);
        let targets: Vec<&str> = l.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(
            targets,
            [
                "A note",
                "#Top",
                "img.png",
                "Folder/B c.md",
                "attachments/i j.png"
            ]
        );
        assert_eq!(l.iter().filter(|l| l.embed).count(), 2);
        let idx = LinkIndex::new(["Z/A note.md", "Folder/B c.md", "attachments/img.png"]);
        let ok: Vec<bool> = l.iter().map(|x| idx.resolves(t, x)).collect();
        assert_eq!(ok, [true, true, true, true, false]);
        assert!(!idx.resolves(
            t,
            &Link {
                target: "#Nope".into(),
                embed: false,
                markdown: false
            }
        ));
    }
}

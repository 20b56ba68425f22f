#!/usr/bin/env python3
"""Internal-link check of the book (docs/src) and of README.md's links into it.

mdBook 0.5 has no link check of its own. This script fails (exit 1, one line per problem) on:

- a SUMMARY.md entry whose file does not exist;
- a chapter under docs/src that SUMMARY.md does not list;
- a relative link in a chapter to a file that does not exist, to a page outside docs/src, or
  to an anchor that no heading of the target page produces;
- an `{{#include FILE[:ANCHOR]}}` whose file or `ANCHOR:` marker does not exist;
- a relative link in README.md that does not resolve (file, and anchor for a book chapter).

Heading anchors are computed as mdBook computes them: the heading's text without markup,
lower-cased (ASCII), whitespace to `-`, every character but letters, digits, `-` and `_`
dropped, and `-1`, `-2`, ... appended to repeats; `{#id}` after a heading sets it.

VAULTBENCH_BOOK_PARTIAL=1 skips SUMMARY entries whose files do not exist (and links to them),
for a branch that lists chapters other branches are writing. CI does not set it.

`--self-test` runs the check on a small made-up book with known faults and fails unless it
finds exactly those.
"""

import os
import re
import sys
import tempfile
from pathlib import Path

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CUSTOM_ID = re.compile(r"\s*\{#([A-Za-z0-9_-]+)\}\s*$")


def strip_code(text, inline=True):
    """The text with fenced code blocks blanked and, with `inline`, inline code spans emptied
    (keeping lines)."""
    out, fence = [], None
    for line in text.split("\n"):
        s = line.lstrip()
        if fence is None and (s.startswith("```") or s.startswith("~~~")):
            fence = s[:3]
            out.append("")
            continue
        if fence is not None:
            if s.startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"(`+)(.+?)\1", "``", line) if inline else line)
    return "\n".join(out)


def heading_text(raw):
    """A heading's text as rendered: links to their text, code spans and emphasis unwrapped."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.replace("`", "").replace("**", "").replace("__", "")
    t = re.sub(r"(?<!\w)[*_](\S(?:.*?\S)?)[*_](?!\w)", r"\1", t)
    return t


def normalize_id(text):
    out = []
    for ch in text:
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower() if ch.isascii() else ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def where(path):
    """A path relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def expand(path, text, problems, seen=()):
    """The text with `{{#include}}` directives replaced by what they include."""

    def one(m):
        arg = m.group(1)
        file, _, anchor = arg.partition(":")
        target = (path.parent / file).resolve()
        if not target.is_file():
            problems.append(f"{where(path)}: {{{{#include {arg}}}}}: no file {file}")
            return ""
        if target in seen:
            return ""
        body = target.read_text(encoding="utf-8")
        if anchor and not anchor.isdigit():
            m2 = re.search(
                r"ANCHOR:\s*" + re.escape(anchor) + r"\b[^\n]*\n(.*?)\n[^\n]*ANCHOR_END:\s*"
                + re.escape(anchor) + r"\b",
                body,
                re.S,
            )
            if not m2:
                problems.append(
                    f"{where(path)}: {{{{#include {arg}}}}}: no ANCHOR: {anchor} in {file}"
                )
                return ""
            body = m2.group(1)
        return expand(target, body, problems, seen + (target,))

    return INCLUDE.sub(one, text)


def anchors(text):
    ids, counts = set(), {}
    for line in strip_code(text, inline=False).split("\n"):
        m = HEADING.match(line)
        if not m:
            continue
        raw = m.group(2)
        c = CUSTOM_ID.search(raw)
        if c:
            ids.add(c.group(1))
            continue
        base = normalize_id(heading_text(raw))
        n = counts.get(base, 0)
        counts[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def summary_entries(src):
    text = strip_code((src / "SUMMARY.md").read_text(encoding="utf-8"))
    return [m.group(1) for m in LINK.finditer(text)]


def links(text):
    for lineno, line in enumerate(strip_code(text).split("\n"), 1):
        for m in LINK.finditer(line):
            yield lineno, m.group(1)


def external(target):
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) is not None


def check(root, partial):
    """Problems found in the book under root/docs/src and in root/README.md."""
    problems = []
    src = (root / "docs" / "src").resolve()
    listed, missing = set(), set()
    for entry in summary_entries(src):
        p = (src / entry.split("#")[0]).resolve()
        if p.is_file():
            listed.add(p)
        elif partial:
            missing.add(p)
        else:
            problems.append(f"docs/src/SUMMARY.md: {entry}: no such chapter")
    for md in sorted(src.rglob("*.md")):
        if md.name != "SUMMARY.md" and md.resolve() not in listed:
            problems.append(f"{md.relative_to(root)}: not listed in SUMMARY.md")
    cache = {}

    def ids_of(page):
        if page not in cache:
            cache[page] = anchors(expand(page, page.read_text(encoding="utf-8"), []))
        return cache[page]

    def resolve(page, lineno, target, book_only):
        where = f"{page.relative_to(root)}:{lineno}: {target}"
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if book_only and src not in dest.parents and dest != src:
            problems.append(f"{where}: points outside the book (docs/src)")
            return
        if dest in missing:
            return
        if not dest.exists():
            problems.append(f"{where}: no such file")
            return
        if (
            dest.suffix == ".md"
            and src in dest.parents
            and dest not in listed
            and dest != src / "SUMMARY.md"
        ):
            problems.append(f"{where}: a page SUMMARY.md does not list")
            return
        if anchor and dest.suffix == ".md" and anchor not in ids_of(dest):
            problems.append(f"{where}: no heading with anchor #{anchor}")

    for page in sorted(listed):
        text = expand(page, page.read_text(encoding="utf-8"), problems)
        for lineno, target in links(text):
            if not external(target):
                resolve(page, lineno, target, book_only=True)
    readme = root / "README.md"
    for lineno, target in links(readme.read_text(encoding="utf-8")):
        if not external(target) and not target.startswith("#"):
            resolve(readme, lineno, target, book_only=False)
    return problems


SELF_TEST = {
    "README.md": "[ok](docs/src/a.md#first) [bad anchor](docs/src/a.md#nope) "
    "[gone](docs/src/gone.md) [web](https://example.org/x)\n",
    "docs/src/SUMMARY.md": "# Summary\n\n- [A](a.md)\n- [B](b/b.md)\n- [Later](later.md)\n",
    "docs/src/a.md": "# First\n\n## `code` and *more*\n\n## First\n\n"
    "[b](b/b.md#b-heading) [dup](#first-1) [code](#code-and-more) "
    "[broken](#missing) [out](../../README.md)\n\n```\n[not a link](nowhere.md)\n```\n",
    "docs/src/b/b.md": "# B heading {#custom}\n\n[a](../a.md) [custom](#custom) "
    "[unlisted](c.md) [img](../img.png)\n\n{{#include ../../inc.md:part}}\n",
    "docs/src/b/c.md": "# C\n",
    "docs/inc.md": "x\n<!-- ANCHOR: part -->\n## Included\n[self](b.md#included)\n"
    "<!-- ANCHOR_END: part -->\n",
}

SELF_TEST_EXPECTED = [
    "docs/src/SUMMARY.md: later.md: no such chapter",
    "docs/src/b/c.md: not listed in SUMMARY.md",
    "docs/src/a.md:7: b/b.md#b-heading: no heading with anchor #b-heading",
    "docs/src/a.md:7: #missing: no heading with anchor #missing",
    "docs/src/a.md:7: ../../README.md: points outside the book (docs/src)",
    "docs/src/b/b.md:3: c.md: a page SUMMARY.md does not list",
    "docs/src/b/b.md:3: ../img.png: no such file",
    "README.md:1: docs/src/a.md#nope: no heading with anchor #nope",
    "README.md:1: docs/src/gone.md: no such file",
]


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = Path(d).resolve()
        for rel, text in SELF_TEST.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        found = check(root, partial=False)
        partial = check(root, partial=True)
    ok = True
    if sorted(found) != sorted(SELF_TEST_EXPECTED):
        ok = False
        print("linkcheck self-test: expected", *sorted(SELF_TEST_EXPECTED), sep="\n  ")
        print("found", *sorted(found), sep="\n  ")
    if any("later.md" in p for p in partial):
        ok = False
        print("linkcheck self-test: VAULTBENCH_BOOK_PARTIAL=1 still reports later.md")
    print("linkcheck self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    partial = os.environ.get("VAULTBENCH_BOOK_PARTIAL") == "1"
    problems = check(root, partial)
    for p in problems:
        print(f"linkcheck: {p}")
    print(f"linkcheck: {len(problems)} problem(s)" + (" (partial book)" if partial else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

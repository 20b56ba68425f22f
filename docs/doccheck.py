#!/usr/bin/env python3
"""Reading check of the documentation: the book (docs/src), README.md, ARCHITECTURE.md and the
comments of the code read as documentation, not as a work log.

It fails (exit 1, one line per problem) on:

- work-log language: an issue number or "the issue", a person's work sessions and helpers
  ("this session", "another helper's build"), "this stop", "this branch", other engineers,
  processes paused for a run (SIGSTOP) in the book, a temporary path such as `/tmp/...` in
  prose or a comment, and "here" or "this VM" meaning the machine a figure was taken on;
- a reference to a Markdown or Rust file that is not in the repository (a design note or a
  report kept somewhere else): every `name.md` (a lower-case name: capitalised ones are notes
  of example vaults) or `NAME.rs` a text names must exist, as a path from the repository root,
  from the naming file's folder, or as the name of a file the repository holds;
- a term of the concepts page (docs/src/concepts.md) whose first use, in README.md and in the
  book read in SUMMARY.md's order, does not link to its entry there.

`--fix-links` adds the missing concept links (the first use of each term, in place).
`--self-test` runs the checks on small made-up files with known faults and fails unless it
finds exactly those.

Code comments are `//` comments of `.rs` files and `#` comments of `.toml`, `.sh`, `.py` files
and `.ci/run`; string literals are not read (the flags test checks the help text).
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from linkcheck import HEADING, heading_text, normalize_id, strip_code, summary_entries  # noqa: E402

# Work-log phrases, matched case-insensitively. Each is narrow on purpose: "session" (a nonce
# session, a process session) and "helper" (a test helper) are ordinary words in this code.
DIARY = [
    (r"\bissue\s+#?\d+", "an issue number"),
    (r"\bthe issue('s)?\b", "the issue"),
    (r"\b(this|another|other|that) sessions?\b(?!\s+(number|salt|of))", "a work session"),
    (r"\bsession's (vm|machine|build)", "a work session"),
    (r"\b(another|other|a|both) helpers?'s?\s+(build|builds|process|processes|tests?|edited)", "a helper"),
    (r"\banother helper\b", "a helper"),
    (r"\bthis stop\b", "this stop"),
    (r"\b(this|another|other|the \w+) branch\b(?!es)", "a branch"),
    (r"\bbranch `", "a branch"),
    (r"\b(other|another|four|two) engineers?\b|\bengineers'", "other engineers"),
    (r"(?<![\w}{$)])/tmp/(?!vaultbench-machine\.lock)", "a temporary path"),
    (r"\b(this|the project's|this project's)( \d-(v?CPU|core))? VM\b", "this VM"),
    (r"\b(measured|available|ran|seen|installable|installed|runs?) here\b", "'here' meaning this machine"),
    (r"mcp-server-perf|obsync-speed-report|trip2g|calternal|crates-notes", "a report's file name outside the repository"),
]
DIARY_BOOK_ONLY = [(r"\bSIGSTOP\b", "processes paused for a run")]

FILE_REF = re.compile(r"(?<![\w/.<{$-])((?:[\w.-]+/)*[A-Za-z0-9_][\w-]*\.(?:md|rs))\b")

# The concepts page's terms: a pattern and the heading it links to.
TERMS = [
    (r"\bobsync\b", "obsync"),
    (r"\benrolled devices?\b", "Device, enrolled device"),
    (r"\bcoordinated omission\b", "Coordinated omission"),
    (r"\bcalibration channels?\b", "Calibration channel, kernel"),
    (r"\bprovenance sidecars?\b", "Provenance sidecar"),
    (r"\border-balanced\b", "Order-balanced rounds"),
    (r"\bsamples?\b", "Sample"),
    (r"\barms?\b", "A/B, arm"),
    (r"τ", "τ (tau)"),
    (r"\bledger\b", "Ledger (attempts ledger)"),
    (r"\bPinpoint's rule\b", "Pinpoint's rule"),
    (r"\bDerSimonian–Laird\b", "DerSimonian–Laird"),
    (r"\bmachine class(es)?\b", "Machine class"),
    (r"\bpre-check\b", "Pre-check"),
    (r"\bscenarios?\b", "Scenario"),
    (r"\bphases?\b", "Phase"),
    (r"\btwins?\b", "Twin"),
    (r"\bfan-out\b", "Long poll"),
    (r"\bA/A\b", "τ (tau)"),
    (r"\bcost keys?\b", "Key"),
    (r"\bforeign process(es)?\b", "Foreign process"),
    (r"\bsteal\b", "Steal"),
    (r"\bHdrHistogram\b", "HdrHistogram"),
    (r"\bbaselines?\b", "Recording, baseline"),
    (r"\bverdicts?\b", "Compare, verdict"),
    (r"\bpaired mode\b", "Paired mode"),
    (r"\bcalibration gate\b", "Calibration gate"),
    (r"\bcost channel\b", "Cost channel"),
    (r"\bshards?\b", "Shard"),
]

LINK_SPAN = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]*)[^)]*\)")


def git_files(root):
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout
        return [p for p in out.split("\n") if p]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "target" not in p.parts]


def docs_of(root, files):
    return [f for f in files if (f.startswith("docs/") and f.endswith(".md")) or f in ("README.md", "ARCHITECTURE.md")]


def comments_of(path, text):
    """(line number, comment text) of a code file's comments."""
    hash_comments = path.endswith((".toml", ".sh", ".py")) or path == ".ci/run"
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if path.endswith(".rs"):
            if s.startswith("//"):
                yield n, s
            else:
                i = line.find(" // ")
                if i >= 0 and line.count('"', 0, i) % 2 == 0:
                    yield n, line[i:]
        elif hash_comments and s.startswith("#") and not s.startswith("#!") and not s.startswith("#["):
            yield n, s


def prose_lines(text):
    """(line number, line) of a Markdown text outside fenced code, inline code kept."""
    for n, line in enumerate(strip_code(text, inline=False).split("\n"), 1):
        yield n, line


def check_diary(where, lines, book):
    out = []
    rules = DIARY + (DIARY_BOOK_ONLY if book else [])
    for n, line in lines:
        for pat, what in rules:
            m = re.search(pat, line, re.I)
            if m:
                out.append(f"{where}:{n}: reads as a work log ({what}): {m.group(0)!r}")
    return out


def check_refs(root, rel, lines, names):
    out = []
    folder = (root / rel).parent
    for n, line in lines:
        for m in FILE_REF.finditer(line):
            ref = m.group(1)
            base = Path(ref).name
            if ref.endswith(".md") and (not re.fullmatch(r"[a-z][a-z0-9_-]{2,}\.md", base) or "/_" in "/" + ref):
                continue  # a note of a vault (`Notes/MAAS.md`, `Index.md`), not a document
            if line.startswith("    ") and not line.lstrip().startswith(("//", "#")):
                continue  # an indented code block: example output
            if ref.startswith(("http", "www.")) or "://" in line[max(0, m.start() - 60):m.start()]:
                continue
            if (root / ref).exists() or (folder / ref).exists() or Path(ref).name in names:
                continue
            out.append(f"{rel}:{n}: names {ref}, which is not in the repository")
    return out


def anchor(heading):
    return normalize_id(heading_text(heading))


def concept_ids(root):
    text = (root / "docs/src/concepts.md").read_text(encoding="utf-8")
    ids = set()
    for line in strip_code(text, inline=False).split("\n"):
        m = HEADING.match(line)
        if m:
            ids.add(anchor(m.group(2)))
    return ids


def reading_order(root):
    src = root / "docs/src"
    pages = ["README.md"]
    for entry in summary_entries(src):
        p = (src / entry).resolve()
        rel = str(p.relative_to(root.resolve()))
        if p.exists() and rel not in pages and p.name != "concepts.md":
            pages.append(rel)
    return pages


def concept_link(rel, root):
    return os.path.relpath(root / "docs/src/concepts.md", (root / rel).parent)


def first_uses(text):
    """For each term, the first use outside code, headings, and links elsewhere:
    (term index, line index, start, end, already linked to the concepts page)."""
    code_blanked = strip_code(text, inline=False).split("\n")
    found = {}
    included = False
    for li, line in enumerate(code_blanked):
        # Text between ANCHOR markers is included into other pages, where a relative link
        # would not resolve.
        if "ANCHOR:" in line or "ANCHOR_END:" in line:
            included = "ANCHOR:" in line
            continue
        if included or HEADING.match(line) or line.lstrip().startswith(("{{#", "<")):
            continue
        if line.startswith(("    ", "\t")) and not re.match(r"\s+([-*+]|\d+\.)\s", line) \
                and (li == 0 or not code_blanked[li - 1].strip() or code_blanked[li - 1].startswith(("    ", "\t"))):
            continue  # an indented code block
        # Inline code spans and link URLs are not prose: mask them, keeping offsets.
        masked = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)
        spans = [(m.start(), m.end(), m.start(2), m.group(2)) for m in LINK_SPAN.finditer(masked)]
        for start, end, url_start, url in spans:
            masked = masked[:url_start] + " " * (end - url_start) + masked[end:]
        masked = re.sub(r"<[^>]+>|https?://\S+", lambda m: " " * len(m.group(0)), masked)
        for ti, (pat, _) in enumerate(TERMS):
            if ti in found:
                continue
            for m in re.finditer(pat, masked, 0 if pat == "τ" else re.I):
                inside = [s for s in spans if s[0] <= m.start() < s[2]]
                if inside and "concepts.md#" not in inside[0][3]:
                    continue  # a link to another page: not the term's use
                if m.start() > 0 and masked[m.start() - 1] in "_-./" or masked[m.end():m.end() + 1] in ("_", "-", "/"):
                    continue  # part of a name (`cold_push`, `foreign-cpu`, a path)
                found[ti] = (li, m.start(), m.end(), bool(inside))
                break
    return found


def check_concepts(root, fix=False):
    out = []
    ids = concept_ids(root)
    for _, heading in TERMS:
        if anchor(heading) not in ids:
            out.append(f"docs/doccheck.py: term heading {heading!r} is not a heading of docs/src/concepts.md")
    if out:
        return out
    seen = set()
    for rel in reading_order(root):
        if rel == "README.md" or rel.endswith("introduction.md"):
            seen = set()  # the README and the book are each read from the start
        path = root / rel
        text = path.read_text(encoding="utf-8")
        uses = first_uses(text)
        lines = text.split("\n")
        edits = []
        for ti, (li, s, e, linked) in sorted(uses.items()):
            if ti in seen:
                continue
            seen.add(ti)
            if linked:
                continue
            if fix:
                edits.append((li, s, e, ti))
            else:
                out.append(f"{rel}:{li + 1}: first use of {TERMS[ti][1]!r} ({lines[li][s:e]!r}) does not link to the concepts page")
        if edits:
            link = concept_link(rel, root)
            for li, s, e, ti in sorted(edits, key=lambda x: (x[0], -x[1])):
                line = lines[li]
                lines[li] = f"{line[:s]}[{line[s:e]}]({link}#{anchor(TERMS[ti][1])}){line[e:]}"
            path.write_text("\n".join(lines), encoding="utf-8")
    return out


def check(root, files=None, concepts=True):
    files = files if files is not None else git_files(root)
    names = {Path(f).name for f in files}
    out = []
    for rel in docs_of(root, files):
        text = (root / rel).read_text(encoding="utf-8")
        lines = list(prose_lines(text))
        out += check_diary(rel, lines, book=True)
        out += check_refs(root, rel, [(n, re.sub(r"\]\([^)]*\)", "]", l)) for n, l in lines], names)
    for rel in files:
        if rel.startswith(("target/", "fuzz/seeds/", "fuzz/corpus/")) or "/node_modules/" in rel:
            continue
        if not (rel.endswith((".rs", ".toml", ".sh", ".py")) or rel == ".ci/run"):
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines = list(comments_of(rel, text))
        out += check_diary(rel, lines, book=False)
        out += check_refs(root, rel, lines, names)
    if concepts and (root / "docs/src/concepts.md").exists():
        out += check_concepts(root)
    return out


SELF_TEST = {
    "README.md": "# x\n\nA [scenario](docs/src/concepts.md#scenario) runs.\n",
    "docs/src/SUMMARY.md": "- [a](a.md)\n- [Concepts](concepts.md)\n",
    "docs/src/a.md": "# A\n\nMeasured on this session's VM; see design.md.\n\n```sh\nx /tmp/ok\n```\n"
                     "One scenario again, then a sample.\n",
    "docs/src/concepts.md": "# C\n\n" + "".join(f"### {h}\n\nx\n\n" for _, h in TERMS),
    "src/lib.rs": "//! Fine (docs/src/a.md).\n// As issue 4 asks, at /tmp/x.\nfn f() { let s = \"issue 9\"; } // ok\n",
}
SELF_TEST_EXPECTED = [
    "docs/src/a.md:3: reads as a work log (a work session): 'this session'",
    "docs/src/a.md:3: reads as a work log (a work session): \"session's VM\"",
    "docs/src/a.md:3: names design.md, which is not in the repository",
    "src/lib.rs:2: reads as a work log (an issue number): 'issue 4'",
    "src/lib.rs:2: reads as a work log (a temporary path): '/tmp/'",
    "docs/src/a.md:8: first use of 'Sample' ('sample') does not link to the concepts page",
]


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = Path(d).resolve()
        for rel, text in SELF_TEST.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        found = check(root, files=list(SELF_TEST))
    ok = sorted(found) == sorted(SELF_TEST_EXPECTED)
    if not ok:
        print("doccheck self-test: expected", *sorted(SELF_TEST_EXPECTED), sep="\n  ")
        print("found", *sorted(found), sep="\n  ")
    print("doccheck self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    if sys.argv[1:] == ["--fix-links"]:
        check_concepts(root, fix=True)
    problems = check(root)
    for p in problems:
        print(f"doccheck: {p}")
    print(f"doccheck: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

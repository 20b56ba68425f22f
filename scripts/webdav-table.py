#!/usr/bin/env python3
"""Turns `vaultbench record small-webdav --target <preset>` recordings into the
WebDAV table of docs/src/measured.md: cold push and pull wall time, files/s, server CPU per file (the per-phase cost
over the preset's whole process tree) and peak RSS of the process tree, one row per
recording, with the machine and the load average the sidecars recorded.

Usage: scripts/webdav-table.py DIR [DIR ...]
Each DIR holds one recording (`<scenario>.json` + `<scenario>.provenance.json`, as `record
--out DIR` writes them). Only the standard library: CI has Python 3 and nothing else.
"""

import json
import sys
from pathlib import Path

COLUMNS = [
    ("cold push wall (ms)", "cold_push.wall_ms", "{:.0f}"),
    ("push files/s", "cold_push.files_per_s", "{:.0f}"),
    ("server CPU per file pushed (µs)", "cold_push.server.cpu_us_per_file", "{:.0f}"),
    ("cold pull wall (ms)", "cold_pull.wall_ms", "{:.0f}"),
    ("pull files/s", "cold_pull.files_per_s", "{:.0f}"),
    ("server CPU per file pulled (µs)", "cold_pull.server.cpu_us_per_file", "{:.0f}"),
    ("peak RSS, process tree (MiB)", "server.peak_rss_mib", "{:.1f}"),
]


def load(d: Path):
    provs = sorted(d.glob("*.provenance.json"))
    if len(provs) != 1:
        sys.exit(f"{d}: expected one *.provenance.json, found {len(provs)}")
    prov = json.loads(provs[0].read_text())
    base = json.loads(provs[0].with_name(provs[0].name.replace(".provenance", "")).read_text())
    return base, prov


def main(dirs):
    if not dirs:
        sys.exit(__doc__.strip().splitlines()[-3])
    rows, machines, notes = [], set(), []
    for d in map(Path, dirs):
        base, prov = load(d)
        m = base["metrics"]
        missing = [k for _, k, _ in COLUMNS if k not in m]
        if missing:
            sys.exit(f"{d}: recording lacks {', '.join(missing)}")
        target = prov["target"]
        files = m["cold_push.files"]["value"]
        ok = m.get("cold_pull.byte_identical", {}).get("value") == 1.0
        row = [target["command"], f"{files:.0f}"]
        row += [fmt.format(m[k]["value"]) for _, k, fmt in COLUMNS]
        row.append("byte-identical" if ok else "NOT byte-identical")
        rows.append(row)
        ident = prov["machine"]["identity"]
        machines.add(
            f"{ident['logical_cpus']}-CPU {ident['cpu_model']} {ident['virtualisation'].split(' ')[0]}, "
            f"{ident['memory_gib']} GiB, {ident['os']}, {ident['fs_type']}"
        )
        notes.append(
            f"{target['command']}: {target['version'].splitlines()[0]}, "
            f"{base['samples']} samples, load average {prov['loadavg_before'][0]} before, "
            f"{prov['loadavg_after'][0]} after"
        )
    head = ["server", "files"] + [c for c, _, _ in COLUMNS] + ["pull"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 2) + "---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    for mc in sorted(machines):
        print(f"Machine: {mc}.")
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    main(sys.argv[1:])

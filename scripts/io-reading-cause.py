#!/usr/bin/env python3
"""What makes one io reading many times the other in a quiet sample?

Reproduces what a sample child does around its second calibration reading: a server has just
stored a data dir durably (files written and fsynced, as the reference server stores chunks
and journal frames); the old child then deleted the data dir and took the reading at once.
Three conditions, interleaved, N rounds each, every reading in a fresh `vaultbench calibrate
--one-reading` process on the same filesystem:

  delete-then-read   rm -rf the data dir, then the reading (the old order)
  read-then-delete   the reading, then rm -rf (the new order)
  delete-syncfs-read rm -rf, syncfs on the filesystem, then the reading (the new settle step)

Usage: scripts/io-reading-cause.py VAULTBENCH [N] [DIR]
Prints each condition's io_ms median, max and max/min, and the per-round readings.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

FILES = 400  # about the `small` vault's chunks plus its notes' versions
SIZE = 8 * 1024


def store(d):
    os.makedirs(d)
    for i in range(FILES):
        p = os.path.join(d, f"c{i}")
        with open(p + ".tmp", "wb") as f:
            f.write(bytes([i % 251]) * SIZE)
            f.flush()
            os.fsync(f.fileno())
        os.rename(p + ".tmp", p)
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def reading(vb, d):
    out = subprocess.run([vb, "calibrate", "--one-reading", d], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return json.loads(out)["io_ms"]


def syncfs(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.syncfs(fd) if hasattr(os, "syncfs") else subprocess.run(["sync", "-f", d], check=True)
    finally:
        os.close(fd)


def main():
    vb = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    base = sys.argv[3] if len(sys.argv) > 3 else tempfile.gettempdir()
    work = tempfile.mkdtemp(prefix="io-cause-", dir=base)
    res = {"delete-then-read": [], "read-then-delete": [], "delete-syncfs-read": []}
    try:
        for r in range(n):
            for cond in res:
                data = os.path.join(work, "data")
                store(data)
                if cond == "delete-then-read":
                    shutil.rmtree(data)
                    res[cond].append(reading(vb, work))
                elif cond == "read-then-delete":
                    res[cond].append(reading(vb, work))
                    shutil.rmtree(data)
                else:
                    shutil.rmtree(data)
                    syncfs(work)
                    res[cond].append(reading(vb, work))
                # Settle between conditions, so one condition's writeback does not reach into
                # the next one's reading.
                syncfs(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for cond, v in res.items():
        print(f"{cond:20} io_ms median {statistics.median(v):7.2f}  max {max(v):7.2f}  "
              f"max/min {max(v) / min(v):5.2f}  [{', '.join(f'{x:.1f}' for x in v)}]")


if __name__ == "__main__":
    main()

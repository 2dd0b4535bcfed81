#!/usr/bin/env python3
"""Removes superseded executables from a cached cargo target directory.

Every build with changed code links a new test executable under a new
hash (`deps/cli-1a2b…`) and leaves the old one: 50-odd test binaries of
100-300 MB each per change, so a cache that CI keeps between runs grew to
tens of gigabytes and filled the disk. An executable is removed when a
newer one of the same name sits beside it and it has not been written for
`--days` (default 2): the current ones, of every profile sharing the
folder, stay, and cargo relinks anything it still wants. Libraries and
build scripts are left alone (they are shared and small).

    scripts/prune_target.py TARGET_DIR [--days N] [--dry-run]
"""

import argparse
import collections
import os
import pathlib
import sys
import time


def superseded(deps, days):
    """(path, size) of each executable in `deps` older than `days` with a
    newer one of the same name."""
    by_name = collections.defaultdict(list)
    for entry in os.scandir(deps):
        name = entry.name
        if "." in name or "-" not in name or not entry.is_file(follow_symlinks=False):
            continue
        if not os.access(entry.path, os.X_OK):
            continue
        st = entry.stat(follow_symlinks=False)
        by_name[name.rsplit("-", 1)[0]].append((st.st_mtime, entry.path, st.st_size))
    cutoff = time.time() - days * 86400
    out = []
    for files in by_name.values():
        files.sort(reverse=True)
        out.extend((p, size) for mtime, p, size in files[1:] if mtime < cutoff)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target")
    ap.add_argument("--days", type=float, default=2)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    freed, n = 0, 0
    for profile in ("debug", "release"):
        deps = pathlib.Path(a.target) / profile / "deps"
        if not deps.is_dir():
            continue
        for path, size in superseded(deps, a.days):
            if not a.dry_run:
                os.remove(path)
            freed += size
            n += 1
    verb = "would remove" if a.dry_run else "removed"
    print(f"prune_target: {verb} {n} superseded executables, {freed / 2**30:.1f} GiB", file=sys.stderr)


if __name__ == "__main__":
    main()

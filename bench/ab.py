#!/usr/bin/env python3
"""Two shoal builds side by side: the same rows, interleaved, medians.

A change that should not change behaviour (a restructuring) is shown to
be within noise by measuring the build before it and the build after it
in one run, alternating (run i of each build before run i+1 of either, the
order swapped every round), on the same servers:

- shoal-benchserver (started here; it generates bytes and discards
  uploads, so its rows show the client's own cost): one 1 GiB object down
  over S3 and over GCS, one 256 MiB object up over S3, and a full listing
  of 1,000,000 keys;
- MinIO (the one `scripts/servers.sh` runs; `SHOAL_TEST_S3`): 1,000 files
  of 16 KiB up (`cp -r`) and down (`cp -r`), every file's bytes compared.

Each row gives the median wall time, the client's CPU seconds (user+sys
of the process, `wait4`) and its peak RSS, for each build, and after/before
(Linux counts a child's peak RSS from its parent's at the fork, so this
script keeps its own small: ~20 MiB is the floor of that column).

    bench/ab.py --before OLD_SHOAL --after NEW_SHOAL [--runs 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one run; exits on failure."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ab: {' '.join(cmd)} failed: {err.strip()[-400:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss // 1024


def tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(folder)).encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--benchserver", default=str(Path.home() / ".cache/shoal/target/release/shoal-benchserver"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", help="write the table here (Markdown) as well as to stdout")
    args = ap.parse_args()
    minio = os.environ.get("SHOAL_TEST_S3")
    if not minio:
        sys.exit('ab: SHOAL_TEST_S3 is not set (eval "$(scripts/servers.sh env)" first)')
    builds = {"before": args.before, "after": args.after}

    work = Path(tempfile.mkdtemp(prefix="shoal-ab-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    port = free_port()
    server = subprocess.Popen(
        [args.benchserver, "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        bench = f"http://127.0.0.1:{port}"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STORAGE_EMULATOR", "GOOGLE_"))}
        base.update(
            NO_PROXY="*",
            AWS_EC2_METADATA_DISABLED="true",
            AWS_REGION="us-east-1",
            AWS_ACCESS_KEY_ID=os.environ.get("SHOAL_TEST_S3_KEY", "minioadmin"),
            AWS_SECRET_ACCESS_KEY=os.environ.get("SHOAL_TEST_S3_SECRET", "minioadmin"),
        )
        on_bench = dict(base, AWS_ENDPOINT_URL=bench, STORAGE_EMULATOR_HOST=bench)
        on_minio = dict(base, AWS_ENDPOINT_URL=minio)

        # The small files, once: made locally, uploaded once as the download source.
        src = work / "src"
        src.mkdir()
        for i in range(1000):
            (src / f"d{i % 10}" / f"f{i:04}.bin").parent.mkdir(exist_ok=True)
            (src / f"d{i % 10}" / f"f{i:04}.bin").write_bytes(os.urandom(16 << 10))
        want = tree_digest(src)
        bucket = f"ab-{uuid.uuid4().hex[:10]}"
        subprocess.run([args.after, "mb", f"s3://{bucket}"], env=on_minio, check=True, capture_output=True)
        # `cp -r DIR s3://b/` makes s3://b/src/... (the folder's name kept).
        subprocess.run(
            [args.after, "cp", "-r", str(src), f"s3://{bucket}/"], env=on_minio, check=True, capture_output=True
        )
        up = work / "up.bin"
        # Written a block at a time: a child's peak RSS as wait4 reports it
        # starts from this process's at the fork, so this one stays small.
        block = os.urandom(1 << 20)
        with open(up, "wb") as f:
            for _ in range(256):
                f.write(block)
        del block

        def down_big(b: str, scheme: str):
            out = work / f"big-{scheme}"
            return [b, "cp", f"{scheme}://bench/size-{GIB}", str(out)], on_bench, lambda: out.unlink()

        def rows():
            yield "download 1 GiB, S3 (benchserver)", lambda b: down_big(b, "s3")
            yield "download 1 GiB, GCS (benchserver)", lambda b: down_big(b, "gs")
            yield (
                "upload 256 MiB, S3 (benchserver)",
                lambda b: ([b, "cp", str(up), f"s3://benchup/ab-{uuid.uuid4().hex[:8]}"], on_bench, None),
            )
            yield (
                "ls -r 1,000,000 keys, S3 (benchserver)",
                lambda b: ([b, "ls", "-r", "s3://list-1000000/"], on_bench, None),
            )

            def small_up(b):
                dst = f"s3://{bucket}/up-{uuid.uuid4().hex[:8]}/"
                return [b, "cp", "-r", str(src), dst], on_minio, None

            def small_down(b):
                out = work / f"down-{uuid.uuid4().hex[:8]}"

                def check():
                    if tree_digest(out / "src") != want:
                        sys.exit(f"ab: {b}: downloaded tree differs from the source")
                    shutil.rmtree(out)

                return [b, "cp", "-r", f"s3://{bucket}/src", f"{out}/"], on_minio, check

            yield "upload 1,000 x 16 KiB, cp -r (MinIO)", small_up
            yield "download 1,000 x 16 KiB, cp -r (MinIO)", small_down

        results: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        names = []
        for name, make in rows():
            names.append(name)
            for r in range(args.runs):
                order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
                for which in order:
                    cmd, env, after_run = make(builds[which])
                    results.setdefault((name, which), []).append(timed(cmd, env))
                    if after_run:
                        after_run()
            print(f"ab: {name} done", file=sys.stderr)
        subprocess.run([args.after, "rb", "--force", f"s3://{bucket}"], env=on_minio, capture_output=True)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)

    med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/ab.py --runs {args.runs}` "
        f"(before: `{args.before}`, after: `{args.after}`), runs interleaved, medians; load average at the end "
        f"{os.getloadavg()[0]:.2f}.",
        "",
        "| row | wall s before | wall s after | after ÷ before | CPU s before | CPU s after | after ÷ before | peak "
        "RSS MiB before / after |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in names:
        b, a = results[(name, "before")], results[(name, "after")]
        wb, wa, cb, ca = med(b, 0), med(a, 0), med(b, 1), med(a, 1)
        lines.append(
            f"| {name} | {wb:.2f} | {wa:.2f} | {wa / wb:.2f} | {cb:.2f} | {ca:.2f} | {ca / cb:.2f} | "
            f"{med(b, 2):.0f} / {med(a, 2):.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()

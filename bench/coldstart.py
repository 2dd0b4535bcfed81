#!/usr/bin/env python3
"""Where a cold `shoal ls 'gs://B/P/ABC*.zip'` spends its time.

    bench/coldstart.py [--runs 30]

It starts a fake-gcs-server of its own (port SHOAL_COLDSTART_PORT, default
31390; the binary scripts/servers.sh builds) loaded with the bench's glob
shape (10,000 keys under `glob/`, 150 named `ABC*.zip`), and with a shoal
release binary ($CARGO_TARGET_DIR or target/release) times, each as a new
process, median of --runs:

- `shoal --version`: exec, dynamic loading, argument parsing: the floor of
  any command;
- `curl` of the same JSON-API list request shoal sends: one round trip and
  the server's own time;
- `shoal ls` of the glob.

Then one `strace -f -ttt` of the `ls` splits its wall time into phases by
the first system call of each: exec to the first socket (start-up), socket
to the request written (connect, request built), request to the last
response byte read (the server), and from there to exit (parse, print,
exit). Prints a Markdown table (docs/cold-start.md quotes it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUCKET = "coldstart"
PREFIX = "glob/"
GLOB = "ABC*.zip"


def start_server(work: Path, port: int) -> subprocess.Popen:
    """fake-gcs-server (from $SHOAL_CACHE/bin, as scripts/servers.sh builds
    it) loaded at start-up with the bench's glob shape: 10,000 keys under
    `glob/`, 150 named `ABC*.zip` (inserting them through its API takes
    minutes: every insert scans the bucket)."""
    g = work / "data" / BUCKET / PREFIX.rstrip("/")
    g.mkdir(parents=True)
    for i in range(10_000):
        name = f"ABC{i:05d}.zip" if i % 66 == 0 and i // 66 < 150 else f"f{i:05d}.dat"
        (g / name).write_text("x")
    cache = Path(os.environ.get("SHOAL_CACHE", Path.home() / ".cache" / "shoal"))
    proc = subprocess.Popen(
        [
            str(cache / "bin" / "fake-gcs-server"),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-backend",
            "memory",
            "-data",
            str(work / "data"),
            "-external-url",
            f"http://127.0.0.1:{port}",
            "-public-host",
            f"127.0.0.1:{port}",
            "-log-level",
            "warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_internal/healthcheck", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("coldstart: fake-gcs-server did not start")


def timed(cmd: list[str], runs: int) -> float:
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def phases(shoal: str, url: str) -> list[tuple[str, float]]:
    """One strace'd run, cut at the first socket, the request written, the
    last read from the socket, and exit."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
        subprocess.run(
            [
                "strace",
                "-f",
                "-ttt",
                "-e",
                "trace=execve,socket,connect,sendto,write,writev,recvfrom,read,exit_group",
                "-o",
                log.name,
                shoal,
                "ls",
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        lines = log.read().splitlines()
    ts = lambda line: float(line.split()[1])  # noqa: E731  "PID SECONDS call(...)"
    start = ts(lines[0])
    sock = next(ts(line) for line in lines if " socket(AF_INET" in line)
    # The socket's fd, so its reads and writes can be told from stdout's.
    fd = next(re.search(r"= (\d+)$", line).group(1) for line in lines if " socket(AF_INET" in line)
    sent = next(ts(line) for line in lines if re.search(rf" (sendto|write|writev)\({fd},", line))
    reads = [ts(line) for line in lines if re.search(rf" (recvfrom|read)\({fd},", line)]
    end = ts(lines[-1])
    return [
        ("exec → first socket (loading, runtime, config, HTTP client)", sock - start),
        ("socket → request sent (connect, request built)", sent - sock),
        ("request sent → last response byte (server + network)", max(reads) - sent),
        ("last byte → exit (parse, glob check, print)", end - max(reads)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    shoal = str(target / "release" / "shoal")
    port = int(os.environ.get("SHOAL_COLDSTART_PORT", "31390"))
    ep = f"http://127.0.0.1:{port}"
    os.environ["STORAGE_EMULATOR_HOST"] = ep
    with tempfile.TemporaryDirectory() as work:
        server = start_server(Path(work), port)
        try:
            measure(shoal, ep, args.runs)
        finally:
            server.terminate()
            server.wait()


def measure(shoal: str, ep: str, runs: int) -> None:
    url = f"gs://{BUCKET}/{PREFIX}{GLOB}"
    got = subprocess.run([shoal, "ls", url], capture_output=True, text=True, check=True).stdout.splitlines()
    if len(got) != 150:
        sys.exit(f"coldstart: shoal ls printed {len(got)} lines, expected 150")
    # The request shoal sends for this glob (what `-v -v` logs), sent raw by curl.
    q = urllib.parse.urlencode(
        {
            "prefix": PREFIX,
            "delimiter": "/",
            "matchGlob": PREFIX + GLOB,
            "fields": "items(name),prefixes,nextPageToken",
            "maxResults": "1000",
        }
    )
    curl = ["curl", "-sf", "-o", "/dev/null", f"{ep}/storage/v1/b/{BUCKET}/o?{q}"]
    rows = [
        ("`shoal --version` (process start-up floor)", timed([shoal, "--version"], runs)),
        ("`curl` of the list request (one round trip)", timed(curl, runs)),
        (f"`shoal ls '{url}'`", timed([shoal, "ls", url], runs)),
    ]
    print(f"| command (median of {runs}, new process each) | wall ms |\n|---|--:|")
    for name, s in rows:
        print(f"| {name} | {s * 1000:.1f} |")
    if shutil.which("strace"):
        print("\n| phase of one `shoal ls` (strace -f -ttt; strace slows system calls) | ms |\n|---|--:|")
        for name, s in phases(shoal, url):
            print(f"| {name} | {s * 1000:.1f} |")


if __name__ == "__main__":
    main()

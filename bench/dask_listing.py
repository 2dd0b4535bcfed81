"""Listing split across Dask workers (shoal.dask.list_partitions): keys/s
by number of worker processes, and per worker, beside ``shoal ls -r`` of the
same bucket in the same run, against an S3 endpoint (e.g.
shoal-benchserver's ``list-N`` buckets behind toxiproxy for latency).

    python bench/dask_listing.py --endpoint http://127.0.0.1:PORT \\
        --bucket list-10000000 --workers 1 2 4 [--keys-per-task 100000] \\
        [--connections 16] [--max-tasks N] [--cli target/release/shoal] [--runs 1] [--drop] \\
        [--trace]

Each worker process has one thread; each listing task runs shoal's
parallel lister on its range with ``--connections`` requests at once. The
records stay on the workers (the client gathers only each partition's
length). With ``--cli``, one ``shoal ls -r`` and one ``shoal ls -r
--sorted`` (output to /dev/null; the partitions are in key order, as the
second) run before each Dask measurement, so they share the machine's state;
medians over ``--runs``. The client's RSS is this process's peak, which
includes the listing's bookkeeping and nothing per key.

``--drop``: each task lists its range and drops the keys (what
``shoal.dask.sync`` does to find its ranges), so a listing bigger than the
workers' memory (100 million keys on one machine: ~170 bytes a key held)
measures the listing itself; worker memory is then the lister's own.

``--trace``: Dask's task stream of each listing: every listing task's
start and end (seconds from the call), its keys and rate, and how long
0, 1, 2, ... listing tasks were running at once (where the wall went).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import time


def cli_run(cli: str, url: str, sort: bool = False) -> tuple[float, float, float]:
    """Seconds, CPU seconds and peak RSS (MiB) of one ``shoal ls -r``. The
    peak is GNU time's for that one process (``RUSAGE_CHILDREN`` would be
    the largest of every child so far, the Dask workers holding their
    partitions included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", cli, "ls", "-r", *(["--sorted"] if sort else []), url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"shoal ls -r {url} failed: {p.stderr.strip()}")
    secs = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return secs, cpu, int(p.stderr.strip().splitlines()[-1]) / 1024


def _cpu() -> float:
    """This process's CPU seconds (run on each worker)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def trace(events: list[dict], t0: float, secs: float, keys: dict[int, int]) -> str:
    """The listing tasks of one run from Dask's task stream: each one's
    start, end, keys and rate, then the wall by listing tasks at once."""
    spans = []
    for e in events:
        name = e["key"] if isinstance(e["key"], str) else str(e["key"])
        if not name.startswith("shoal-list-") or name.startswith("shoal-list-summary"):
            continue
        i = int(name.split("-")[2])
        for ss in e["startstops"]:
            if ss["action"] == "compute":
                spans.append((ss["start"] - t0, ss["stop"] - t0, i))
    spans.sort()
    lines = []
    for a, b, i in spans:
        k = keys.get(i, 0)
        lines.append(
            f"  task {i:3d}: {a:7.3f} - {b:7.3f} s ({b - a:6.3f} s) {k:8,d} keys {k / max(b - a, 1e-9):10,.0f}/s"
        )
    # Wall by how many listing tasks ran at once (0 = the client's or the
    # scheduler's time between tasks, or before the first / after the last).
    cuts = sorted({0.0, secs, *(x for a, b, _ in spans for x in (a, b))})
    by: dict[int, float] = {}
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        mid = (lo + hi) / 2
        n = sum(1 for a, b, _ in spans if a <= mid < b)
        by[n] = by.get(n, 0.0) + (hi - lo)
    lines.append(
        "  wall by listing tasks at once: "
        + ", ".join(f"{n}: {t:.3f} s ({t / secs:.0%})" for n, t in sorted(by.items()))
        + f" of {secs:.3f} s"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", default="list-1000000")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--keys-per-task", type=int, default=100_000)
    ap.add_argument("--connections", type=int, default=None)
    ap.add_argument(
        "--max-tasks", type=int, default=None, help="most listing tasks at once (default: twice the workers' threads)"
    )
    ap.add_argument("--cli", default=None, help="a shoal binary to list the same bucket with, for comparison")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--drop", action="store_true", help="keep no keys on the workers (list and count only)")
    ap.add_argument("--trace", action="store_true", help="print each listing task's span from Dask's task stream")
    a = ap.parse_args()
    os.environ.update(
        AWS_ENDPOINT_URL=a.endpoint,
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    import distributed

    import shoal.dask as sd

    url = f"s3://{a.bucket}/"
    cli_rates: list[float] = []
    for n in a.workers:
        with (
            distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as c,
        ):
            c.run(lambda: None)  # workers up before the clock starts
            rates, cli_here, cli_sorted, wcpu, ccpu = [], [], [], [], []
            for _ in range(a.runs):
                if a.cli:
                    cli_here.append(cli_run(a.cli, url))
                    cli_sorted.append(cli_run(a.cli, url, sort=True))
                stats = sd.ListingStats()
                cpu0 = sum(c.run(_cpu).values())
                own0 = _cpu()
                ts = distributed.get_task_stream(client=c) if a.trace else contextlib.nullcontext()
                ts.__enter__()
                t0 = time.time()
                t = time.perf_counter()
                if a.drop:
                    from shoal._session import resolve

                    parts = sd._list_ranges(
                        url,
                        c,
                        a.keys_per_task,
                        a.max_tasks,
                        "size",
                        stats,
                        resolve(None, {}),
                        keep=False,
                        connections=a.connections,
                    )
                    total = stats.objects
                else:
                    parts = sd.list_partitions(
                        url,
                        client=c,
                        keys_per_task=a.keys_per_task,
                        max_tasks=a.max_tasks,
                        stats=stats,
                        list_connections=a.connections,
                    )
                    total = sum(c.gather([c.submit(len, p) for p in parts]))
                secs = time.perf_counter() - t
                ccpu.append(_cpu() - own0)
                if a.trace:
                    ts.__exit__(None, None, None)
                    keys = {}
                    if not a.drop:
                        for p, n_ in zip(parts, c.gather([c.submit(len, p) for p in parts]), strict=True):
                            keys[int(p.key.split("-")[2])] = n_
                    print(trace(ts.data, t0, secs, keys), flush=True)
                rates.append(total / secs)
                wcpu.append(sum(c.run(_cpu).values()) - cpu0)
                del parts
            rate = statistics.median(rates)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            # The workers hold the partitions (as columns): their peak.
            wrss = max(c.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values()) / 1024
            wrss_each = sorted(
                round(v / 1024) for v in c.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values()
            )
            line = (
                f"workers={n}: {total} keys, {rate:,.0f} keys/s ({rate / n:,.0f} per worker); "
                f"{stats.tasks} tasks, {stats.splits} splits; workers' CPU {statistics.median(wcpu):.1f} s; "
                f"client (+ scheduler) CPU "
                f"{statistics.median(ccpu):.2f} s; client "
                f"peak RSS {rss:.0f} MiB, "
                f"largest worker peak RSS {wrss:.0f} MiB (each: {wrss_each} MiB)"
            )
            if cli_here:
                cs = statistics.median(x[0] for x in cli_here)
                cli_rate = total / cs
                cli_rates.append(cli_rate)
                line += (
                    f" | shoal ls -r: {cli_rate:,.0f} keys/s, CPU {statistics.median(x[1] for x in cli_here):.1f} s, "
                    f"peak RSS {max(x[2] for x in cli_here):.0f} MiB; one worker = {rate / n / cli_rate:.2f}x the CLI"
                )
                sorted_rate = total / statistics.median(x[0] for x in cli_sorted)
                line += (
                    f" | shoal ls -r --sorted: {sorted_rate:,.0f} keys/s, CPU "
                    f"{statistics.median(x[1] for x in cli_sorted):.1f} s; "
                    f"one worker = {rate / n / sorted_rate:.2f}x"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()

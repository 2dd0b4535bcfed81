"""Dask copy of big objects (shoal.dask.copy): several objects of one task
each, and one object bigger than a task split across tasks (one multipart
upload, parts written by different workers), with 1 and 2 worker
processes, against MinIO (and fake-gcs-server as a destination).

    python bench/dask_copy.py --s3 http://127.0.0.1:9000 [--gcs http://127.0.0.1:4443] \\
        --object-mib 1024 --objects 4 --big-mib 4096 --workers 1 2 [--runs 1] \
        [--budgets object default 1024]

Sources are written once with random bytes (by shoal, so they carry a
CRC32C); each run copies to a fresh prefix, which is deleted afterwards.
Prints wall seconds, MB/s, tasks, and the client's peak RSS (this process,
which holds no data: parts go worker to server). The server floor is
measured the same way: one `shoal cp` of the big object in one process
(no Dask), beside the Dask runs.

``--budgets``: the ``bytes_per_task`` of each run: ``object`` (one object's
size, the default of this script), ``default`` (none given: shoal chooses
from the plan and the cluster) or a number of MiB (``1024``: the fixed
default before issue #56); runs of the budgets are interleaved. Each line
also says how many worker processes ran the copy's tasks (from Dask's
task stream).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--s3", required=True)
    ap.add_argument("--gcs", default=None)
    ap.add_argument("--object-mib", type=int, default=1024)
    ap.add_argument("--objects", type=int, default=4)
    ap.add_argument("--big-mib", type=int, default=4096)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument(
        "--cli", default=None, help="a shoal binary: one `shoal cp` of the big object per run, for the floor"
    )
    ap.add_argument(
        "--budgets", nargs="+", default=["object"], help="bytes_per_task of the runs: object, default, or MiB"
    )
    a = ap.parse_args()
    os.environ.update(
        AWS_ENDPOINT_URL=a.s3,
        AWS_ACCESS_KEY_ID=os.environ.get("AWS_ACCESS_KEY_ID", "minioadmin"),
        AWS_SECRET_ACCESS_KEY=os.environ.get("AWS_SECRET_ACCESS_KEY", "minioadmin"),
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    if a.gcs:
        os.environ.update(STORAGE_EMULATOR_HOST=a.gcs, GOOGLE_CLOUD_PROJECT="shoal-bench")
    import distributed

    import shoal
    import shoal.dask as sd

    mib = 1 << 20
    src = "s3://dask-bench-src"
    try:
        shoal.mb(src)
    except Exception:  # noqa: BLE001 - already there
        pass
    dsts = {"s3": "s3://dask-bench-dst"}
    if a.gcs:
        dsts["gs"] = "gs://dask-bench-dst"
    for d in dsts.values():
        try:
            shoal.mb(d)
        except Exception:  # noqa: BLE001
            pass
    block = os.urandom(64 * mib)

    def write(url: str, n_mib: int) -> None:
        try:
            if shoal.stat(url).size == n_mib * mib:
                return
        except FileNotFoundError:
            pass
        path = f"/tmp/dask-bench-{n_mib}.bin"
        with open(path, "wb") as f:
            left = n_mib * mib
            while left:
                f.write(block[: min(left, len(block))])
                left -= min(left, len(block))
        shoal.upload(path, url)
        os.remove(path)

    for i in range(a.objects):
        write(f"{src}/many/o{i}", a.object_mib)
    write(f"{src}/big/one", a.big_mib)
    budgets = {
        b: (a.object_mib * mib if b == "object" else None if b == "default" else int(b) * mib) for b in a.budgets
    }
    cases = [("many", f"{src}/many/", a.objects * a.object_mib * mib), ("big", f"{src}/big/", a.big_mib * mib)]
    for scheme, dst in dsts.items():
        for n in a.workers:
            with (
                distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
                ) as cluster,
                distributed.Client(cluster) as c,
            ):
                c.run(lambda: None)
                for name, url, nbytes in cases:
                    secs: dict = {b: [] for b in budgets}
                    seen: dict = {}
                    for r in range(a.runs):
                        for b, budget in budgets.items():
                            out = f"{dst}/run-{name}-{n}-{r}-{b}/"
                            with distributed.get_task_stream(client=c) as ts:
                                t = time.perf_counter()
                                res = sd.copy(url, out, client=c, bytes_per_task=budget)
                                secs[b].append(time.perf_counter() - t)
                            assert not res.failures and res.bytes == nbytes, res
                            workers = {
                                x["worker"]
                                for x in ts.data
                                if "shoal-copy" in str(x["key"]) and "shoal-copy-big" not in str(x["key"])
                            }
                            seen[b] = (res.tasks, res.split_objects, res.bytes_per_task, len(workers))
                            shoal.rm([o.url for o in shoal.ls(out, recursive=True).objects])
                    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                    for b in budgets:
                        s = statistics.median(secs[b])
                        tasks, split, chosen, nw = seen[b]
                        print(
                            f"{scheme} workers={n} {name} bytes_per_task={b} ({chosen / mib:.0f} MiB): "
                            f"{nbytes / mib:.0f} MiB in {s:.2f} s = "
                            f"{nbytes / s / 1e6:,.0f} MB/s; {tasks} tasks on {nw} worker(s), split objects {split}; "
                            f"client peak RSS {rss:.0f} MiB",
                            flush=True,
                        )
        if a.cli:
            secs = []
            for r in range(a.runs):
                t = time.perf_counter()
                subprocess.run([a.cli, "cp", f"{src}/big/one", f"{dst}/cli-{r}"], check=True, stdout=subprocess.DEVNULL)
                secs.append(time.perf_counter() - t)
                shoal.rm(f"{dst}/cli-{r}")
            s = statistics.median(secs)
            print(
                f"{scheme} shoal cp (one process): {a.big_mib} MiB in {s:.1f} s = {a.big_mib * mib / s / 1e6:,.0f} "
                "MB/s",
                flush=True,
            )


if __name__ == "__main__":
    main()

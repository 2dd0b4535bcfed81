"""Listing split across Dask workers (shoal.dask.list_partitions): keys/s
by number of worker processes, and the client's peak RSS, against an S3
endpoint (e.g. shoal-benchserver's ``list-N`` buckets behind toxiproxy
for latency).

    python bench/dask_listing.py --endpoint http://127.0.0.1:PORT \\
        --bucket list-10000000 --workers 1 2 4 [--keys-per-task 100000]

Each worker process has one thread; the records stay on the workers (the
client gathers only each partition's length). Prints one line per worker
count; the client's RSS is this process's peak, which includes the
listing's bookkeeping and nothing per key.
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", default="list-1000000")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--keys-per-task", type=int, default=100_000)
    a = ap.parse_args()
    os.environ.update(AWS_ENDPOINT_URL=a.endpoint, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
                      AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    import distributed

    import shoal.dask as sd

    for n in a.workers:
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            c.run(lambda: None)  # workers up before the clock starts
            stats = sd.ListingStats()
            t = time.perf_counter()
            parts = sd.list_partitions(f"s3://{a.bucket}/", client=c, keys_per_task=a.keys_per_task, stats=stats)
            total = sum(c.gather([c.submit(len, p) for p in parts]))
            secs = time.perf_counter() - t
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"workers={n}: {total} keys in {secs:.1f} s = {total / secs:,.0f} keys/s; "
                  f"{stats.tasks} tasks, {stats.splits} splits; client peak RSS {rss:.0f} MiB", flush=True)
            del parts


if __name__ == "__main__":
    main()

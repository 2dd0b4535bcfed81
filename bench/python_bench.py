#!/usr/bin/env python3
"""shoal from Python against the Python peers, on the local servers.

    bench/python_bench.py [--big-mib 1024] [--files 2000] [--file-kib 16] [--runs 1]

Runs in the bench venv (~/.cache/shoal/bench-venv: google-cloud-storage,
boto3, obstore, s3fs, gcsfs, dask[distributed], and shoal built with
`maturin develop --release`), against servers already running
(`scripts/servers.sh start gcs s3` + `eval "$(scripts/servers.sh env)"`:
SHOAL_TEST_GCS, SHOAL_TEST_S3). Each (scenario, client) is its own child
process: wall time around it, CPU seconds (user+sys, children included, so
process pools count) from its rusage. Every download is compared with the
source bytes, every upload read back by size. Writes
bench/results/PYTHON.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKERS = 16  # requests in flight for every peer that has such a knob (shoal: its defaults)

# ---------------------------------------------------------------- clients
# Each takes (src, dst, spec) and moves bytes; they run in a child process.


def _s3_boto():
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=os.environ["SHOAL_TEST_S3"],
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=64),
    )


def _obstore(bucket):
    from obstore.store import S3Store

    return S3Store(
        bucket,
        endpoint=os.environ["SHOAL_TEST_S3"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
    )


def _s3fs():
    import s3fs

    return s3fs.S3FileSystem(
        key=os.environ["AWS_ACCESS_KEY_ID"],
        secret=os.environ["AWS_SECRET_ACCESS_KEY"],
        client_kwargs={"endpoint_url": os.environ["SHOAL_TEST_S3"]},
        config_kwargs={"s3": {"addressing_style": "path"}},
    )


def _gcsfs():
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    import gcsfs

    return gcsfs.GCSFileSystem(endpoint_url=os.environ["SHOAL_TEST_GCS"], token="anon")


def _gcs_bucket(name):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    c = storage.Client(
        project="test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": os.environ["SHOAL_TEST_GCS"]},
    )
    return c.bucket(name)


def big_down(client, scheme, bucket, key, out):
    url = f"{scheme}://{bucket}/{key}"
    if client == "shoal":
        import shoal

        shoal.download(url, out)
    elif client == "boto3":
        from boto3.s3.transfer import TransferConfig

        _s3_boto().download_file(
            bucket, key, out, Config=TransferConfig(max_concurrency=WORKERS, multipart_chunksize=32 << 20)
        )
    elif client == "obstore":
        import obstore as obs

        store = _obstore(bucket)
        size = obs.head(store, key)["size"]
        step = 32 << 20
        starts = list(range(0, size, step))
        parts = obs.get_ranges(store, key, starts=starts, ends=[min(s + step, size) for s in starts])
        with open(out, "wb") as f:
            for p in parts:
                f.write(p)
    elif client == "s3fs":
        _s3fs().get(f"{bucket}/{key}", out)
    elif client == "gcsfs":
        _gcsfs().get(f"{bucket}/{key}", out)
    elif client.startswith("tm-"):
        from google.cloud.storage import transfer_manager as tm

        tm.download_chunks_concurrently(
            _gcs_bucket(bucket).blob(key),
            out,
            chunk_size=32 << 20,
            max_workers=WORKERS if client == "tm-threads" else 2,
            worker_type="thread" if client == "tm-threads" else "process",
        )
    else:
        raise SystemExit(f"no such client {client}")


def big_up(client, scheme, bucket, key, src):
    url = f"{scheme}://{bucket}/{key}"
    if client == "shoal":
        import shoal

        shoal.upload(src, url)
    elif client == "boto3":
        from boto3.s3.transfer import TransferConfig

        _s3_boto().upload_file(
            src, bucket, key, Config=TransferConfig(max_concurrency=WORKERS, multipart_chunksize=16 << 20)
        )
    elif client == "obstore":
        import obstore as obs

        obs.put(_obstore(bucket), key, Path(src), chunk_size=16 << 20, max_concurrency=WORKERS)
    elif client == "s3fs":
        _s3fs().put(src, f"{bucket}/{key}")
    else:
        raise SystemExit(f"no such client {client}")


def many_down(client, scheme, bucket, names, outdir):
    if client == "shoal":
        from shoal import transfer_manager as tm

        r = tm.download_many_to_path(f"{scheme}://{bucket}", names, destination_directory=outdir)
        assert all(x is None for x in r), r[:3]
    elif client == "shoal-dask":
        import distributed

        import shoal.dask

        with (
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
            distributed.Client(cl) as c,
        ):
            t0 = time.perf_counter()
            r = shoal.dask.copy(f"{scheme}://{bucket}/", outdir, client=c, npartitions=2)
            # Cluster start-up excluded: report the copy itself.
            print(json.dumps({"inner_wall": time.perf_counter() - t0}))
            assert not r.failures, r.failures[:3]
    elif client == "boto3":
        from concurrent.futures import ThreadPoolExecutor

        s3 = _s3_boto()
        with ThreadPoolExecutor(WORKERS) as ex:
            list(ex.map(lambda n: s3.download_file(bucket, n, os.path.join(outdir, n)), names))
    elif client == "obstore":
        import asyncio

        import obstore as obs

        store = _obstore(bucket)

        async def main():
            sem = asyncio.Semaphore(WORKERS)

            async def one(n):
                async with sem:
                    r = await obs.get_async(store, n)
                    data = await r.bytes_async()
                Path(outdir, n).write_bytes(data)

            await asyncio.gather(*(one(n) for n in names))

        asyncio.run(main())
    elif client in ("s3fs", "gcsfs"):
        fs = _s3fs() if client == "s3fs" else _gcsfs()
        fs.get([f"{bucket}/{n}" for n in names], [os.path.join(outdir, n) for n in names])
    elif client.startswith("tm-"):
        from google.cloud.storage import transfer_manager as tm

        r = tm.download_many_to_path(
            _gcs_bucket(bucket),
            names,
            destination_directory=outdir,
            max_workers=WORKERS if client == "tm-threads" else 2,
            worker_type="thread" if client == "tm-threads" else "process",
        )
        assert all(x is None for x in r), r[:3]
    else:
        raise SystemExit(f"no such client {client}")


def many_up(client, scheme, bucket, names, srcdir):
    if client == "shoal":
        from shoal import transfer_manager as tm

        r = tm.upload_many_from_filenames(f"{scheme}://{bucket}", names, source_directory=srcdir)
        assert all(x is None for x in r), r[:3]
    elif client == "boto3":
        from concurrent.futures import ThreadPoolExecutor

        s3 = _s3_boto()
        with ThreadPoolExecutor(WORKERS) as ex:
            list(ex.map(lambda n: s3.upload_file(os.path.join(srcdir, n), bucket, n), names))
    elif client == "obstore":
        import asyncio

        import obstore as obs

        store = _obstore(bucket)

        async def main():
            sem = asyncio.Semaphore(WORKERS)

            async def one(n):
                async with sem:
                    await obs.put_async(store, n, Path(srcdir, n).read_bytes())

            await asyncio.gather(*(one(n) for n in names))

        asyncio.run(main())
    elif client == "s3fs":
        _s3fs().put([os.path.join(srcdir, n) for n in names], [f"{bucket}/{n}" for n in names])
    else:
        raise SystemExit(f"no such client {client}")


# ---------------------------------------------------------------- driver


def child(args):
    spec = json.loads(args.case)
    fn = {"big_down": big_down, "big_up": big_up, "many_down": many_down, "many_up": many_up}[spec["op"]]
    fn(spec["client"], spec["scheme"], spec["bucket"], spec["arg"], spec["path"])


def best_of(runs: int, specs_check):
    """Round-robin ``runs`` times over ``(name, spec, check)``; keeps each
    client's fastest checked run. A wrong result or an error anywhere is the
    result. A run killed by a signal is counted and not timed (obstore's
    many-file download aborts now and then as its process exits, 1 run in
    ~6 here, with nothing on stderr); a client every run of which crashed is
    failed."""
    best: dict[str, dict] = {}
    crashed: dict[str, int] = {}
    for _ in range(runs):
        for name, spec, check in specs_check:
            if "error" in best.get(name, {}):
                continue
            r = run_case(spec)
            if r.get("signal"):
                crashed[name] = crashed.get(name, 0) + 1
                continue
            if "error" not in r:
                err = check()
                if err:
                    r = {"error": err}
            if (
                "error" in r
                or name not in best
                or r.get("inner_wall", r["wall"]) < best[name].get("inner_wall", best[name]["wall"])
            ):
                best[name] = r
    for name, n in crashed.items():
        if name not in best:
            best[name] = {"error": f"killed by a signal in all {n} runs"}
        elif "error" not in best[name]:
            best[name]["crashed"] = n
    return best


def run_case(spec) -> dict:
    t0 = time.perf_counter()
    # Output goes to files, not pipes: wait4 (for the child's rusage) reads
    # nothing, so a child writing more than a pipe holds would block forever.
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen([sys.executable, __file__, "--case", json.dumps(spec)], stdout=fo, stderr=fe, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    status = os.waitstatus_to_exitcode(status)
    if status < 0 and not err.strip():
        return {"error": f"killed by signal {-status}", "signal": -status}
    if status != 0:
        return {"error": (err.strip().splitlines() or [f"exit {status}"])[-1][:160]}
    res = {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime}
    for line in out.splitlines():
        if line.startswith("{"):
            res.update(json.loads(line))
    return res


def sha(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case")
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--file-kib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "PYTHON.md"))
    args = ap.parse_args()
    if args.case:
        return child(args)

    import shoal

    # Files on tmpfs: on disk, the writeback of one client's 1 GiB lands in
    # the next client's time (seen: the same download 0.7 s and 3.3 s).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    tmp = Path(tempfile.mkdtemp(prefix="shoal-pybench-", dir=os.environ.get("SHOAL_BENCH_TMP", shm)))
    big = tmp / "big.bin"
    with open(big, "wb") as f:
        for _ in range(args.big_mib):
            f.write(os.urandom(1 << 20))
    big_sha = sha(big)
    small = tmp / "small"
    small.mkdir()
    names = [f"f{i:05d}.bin" for i in range(args.files)]
    for n in names:
        (small / n).write_bytes(os.urandom(args.file_kib << 10))
    many_bytes = args.files * (args.file_kib << 10)
    big_bytes = args.big_mib << 20

    rows = []  # (scenario, client, result, bytes)

    def bucket(scheme):
        b = f"pybench-{uuid.uuid4().hex[:8]}"
        shoal.mb(f"{scheme}://{b}")
        return b

    S3_PEERS = ["shoal", "boto3", "obstore", "s3fs"]
    GS_PEERS = ["shoal", "tm-threads", "tm-processes", "gcsfs"]

    # Big object, S3 (MinIO): upload by each client into a fresh key, then
    # download of one seeded object.
    b = bucket("s3")

    def size_is(url, n):
        def check():
            ok = shoal.stat(url).size == n
            shoal.rm(url)  # keep the server's disk free for the next client
            return None if ok else "wrong size read back"

        return check

    res = best_of(
        args.runs,
        [
            (
                c,
                {"op": "big_up", "client": c, "scheme": "s3", "bucket": b, "arg": f"up-{c}", "path": str(big)},
                size_is(f"s3://{b}/up-{c}", big_bytes),
            )
            for c in S3_PEERS
        ],
    )
    rows += [(f"upload {args.big_mib} MiB (S3/MinIO)", c, res[c], big_bytes) for c in S3_PEERS]

    def same_bytes(path):
        def check():
            ok = sha(path) == big_sha
            Path(path).unlink(missing_ok=True)
            return None if ok else "wrong bytes"

        return check

    def seed_big(url):
        # MinIO purges deleted objects every 5 s (servers.sh): right after a
        # dozen 1 GiB uploads its 8 GiB tmpfs can still hold their trash and
        # answer 507 XMinioStorageFull until the purge has run.
        for attempt in range(12):
            try:
                return shoal.upload(big, url)
            except shoal.errors.ServerBusyError:
                if attempt == 11:
                    raise
                time.sleep(5)

    # Downloads: the object is read once before any client is timed, so the
    # first client does not pay the server's cold cache alone.
    for scheme, where, peers in (("s3", "S3/MinIO", S3_PEERS), ("gs", "GCS/fake-gcs-server", GS_PEERS)):
        bk = b if scheme == "s3" else bucket("gs")
        seed_big(f"{scheme}://{bk}/big")
        shoal.cat(f"{scheme}://{bk}/big", 0, 1)
        shoal.download(f"{scheme}://{bk}/big", tmp / "warm")
        (tmp / "warm").unlink()
        res = best_of(
            args.runs,
            [
                (
                    c,
                    {
                        "op": "big_down",
                        "client": c,
                        "scheme": scheme,
                        "bucket": bk,
                        "arg": "big",
                        "path": str(tmp / f"down-{c}"),
                    },
                    same_bytes(tmp / f"down-{c}"),
                )
                for c in peers
            ],
        )
        rows += [(f"download {args.big_mib} MiB ({where})", c, res[c], big_bytes) for c in peers]
        shoal.rm(f"{scheme}://{bk}/big")

    # Many small files, S3: upload into a fresh bucket per client, download
    # from one seeded bucket; Dask (2 local worker processes) next to them.
    ub = {c: bucket("s3") for c in S3_PEERS}

    def all_there(bk):
        def check():
            objs = shoal.ls(f"s3://{bk}/").objects
            n = len(objs)
            shoal.rm([o.url for o in objs])
            return None if n == len(names) else "objects missing"

        return check

    res = best_of(
        args.runs,
        [
            (
                c,
                {"op": "many_up", "client": c, "scheme": "s3", "bucket": ub[c], "arg": names, "path": str(small)},
                all_there(ub[c]),
            )
            for c in S3_PEERS
        ],
    )
    rows += [(f"upload {args.files} × {args.file_kib} KiB (S3/MinIO)", c, res[c], many_bytes) for c in S3_PEERS]
    sb = bucket("s3")
    shoal.transfer_manager.upload_many_from_filenames(
        f"s3://{sb}", names, source_directory=str(small), raise_exception=True
    )
    g2 = bucket("gs")
    shoal.transfer_manager.upload_many_from_filenames(
        f"gs://{g2}", names, source_directory=str(small), raise_exception=True
    )

    def files_there(out):
        def check():
            ok = sorted(p.name for p in out.iterdir()) == names
            subprocess.run(["rm", "-rf", str(out)])
            out.mkdir()
            return None if ok else "files missing"

        return check

    for scheme, bk, peers in (("s3", sb, S3_PEERS + ["shoal-dask"]), ("gs", g2, GS_PEERS + ["shoal-dask"])):
        outs = {c: tmp / f"many-{scheme}-{c}" for c in peers}
        for o in outs.values():
            o.mkdir()
        res = best_of(
            args.runs,
            [
                (
                    c,
                    {
                        "op": "many_down",
                        "client": c,
                        "scheme": scheme,
                        "bucket": bk,
                        "arg": names,
                        "path": str(outs[c]),
                    },
                    files_there(outs[c]),
                )
                for c in peers
            ],
        )
        where = "S3/MinIO" if scheme == "s3" else "GCS/fake-gcs-server"
        rows += [(f"download {args.files} × {args.file_kib} KiB ({where})", c, res[c], many_bytes) for c in peers]

    write_report(args, rows)
    subprocess.run(["rm", "-rf", str(tmp)])


def write_report(args, rows):
    lines = [
        "# shoal from Python vs the Python peers",
        "",
        f"`bench/python_bench.py --big-mib {args.big_mib} --files {args.files} --file-kib {args.file_kib} --runs "
        f"{args.runs}`: best of {args.runs} runs, round-robin;",
        "local MinIO and fake-gcs-server on the same 2-core machine as the client, files on tmpfs. Wall seconds",
        "around a fresh child process (imports included); CPU = the client's user+sys seconds",
        "(process pools included). Ratio = best peer's time ÷ shoal's (higher is better for shoal).",
        "`shoal-dask` is `shoal.dask.copy` over a 2-process `distributed.LocalCluster`: wall excludes",
        "the cluster's start-up (its own time shown as copy time; CPU is the driver's only).",
        "Every peer is given 16 requests in flight where it has such a knob; shoal runs at its defaults",
        "(2 per vCPU for slices and parts, up to 64 one-request transfers at once).",
        "",
    ]
    scenarios = []
    for s, *_ in rows:
        if s not in scenarios:
            scenarios.append(s)
    for s in scenarios:
        lines += [f"## {s}", "", "| client | wall s | MB/s | CPU s | vs shoal |", "|---|---:|---:|---:|---:|"]
        mine = [r for sc, c, r, _ in rows if sc == s and c == "shoal" and "error" not in r]
        base = mine[0]["wall"] if mine else None
        for sc, c, r, nbytes in rows:
            if sc != s:
                continue
            if "error" in r:
                lines.append(f"| {c} | failed: {r['error']} | | | |")
                continue
            wall = r.get("inner_wall", r["wall"])
            ratio = f"{wall / base:.2f}×" if base and c != "shoal" else ""
            note = f" ({r['crashed']} other run(s) killed by a signal)" if r.get("crashed") else ""
            lines.append(f"| {c}{note} | {wall:.2f} | {nbytes / wall / 1e6:.0f} | {r['cpu']:.2f} | {ratio} |")
        peers = [
            r.get("inner_wall", r["wall"])
            for sc, c, r, _ in rows
            if sc == s and not c.startswith("shoal") and "error" not in r
        ]
        if peers and base:
            lines += ["", f"Best peer ÷ shoal: **{min(peers) / base:.2f}×**"]
        lines.append("")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

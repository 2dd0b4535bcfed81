"""Reads back what a client uploaded to S3 (the harness's check, not a peer).

usage: s3_verify.py ENDPOINT BUCKET object KEY   -> {"size", "sha256"}
       s3_verify.py ENDPOINT BUCKET tree PREFIX  -> {"count", "digest"} over (relative key, sha256)
       s3_verify.py ENDPOINT BUCKET delete KEY|PREFIX/
       s3_verify.py ENDPOINT BUCKET mb -
       s3_verify.py ENDPOINT BUCKET seed PREFIX FILE...   (uploads each FILE as PREFIX + its name)
"""

import hashlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def main() -> None:
    endpoint, bucket, what, key = sys.argv[1:5]
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}, max_pool_connections=16)
    )

    def digest(k: str) -> tuple[int, str]:
        h = hashlib.sha256()
        n = 0
        for chunk in s3.get_object(Bucket=bucket, Key=k)["Body"].iter_chunks(8 << 20):
            h.update(chunk)
            n += len(chunk)
        return n, h.hexdigest()

    def keys(prefix: str) -> list[str]:
        return sorted(
            o["Key"]
            for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in p.get("Contents", [])
        )

    if what == "object":
        n, h = digest(key)
        print(json.dumps({"size": n, "sha256": h}))
    elif what == "tree":
        ks = keys(key)
        with ThreadPoolExecutor(16) as ex:
            ds = list(ex.map(digest, ks))
        rels = [k[len(key) :] for k in ks]
        # As workload.tree_digest: a single wrapping folder (`cp -r dir/ URL`
        # puts `dir/` under URL, the way gcloud storage does) is looked through.
        if len({r.split("/", 1)[0] for r in rels}) == 1 and all("/" in r for r in rels):
            rels = [r.split("/", 1)[1] for r in rels]
        tree = hashlib.sha256()
        for r, (_, h) in sorted(zip(rels, ds, strict=True)):
            tree.update(f"{r}\0{h}\n".encode())
        print(json.dumps({"count": len(ks), "digest": tree.hexdigest(), "bytes": sum(n for n, _ in ds)}))
    elif what == "delete":
        ks = keys(key) if key.endswith("/") else [key]
        for i in range(0, len(ks), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in ks[i : i + 1000]], "Quiet": True})
    elif what == "mb":
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
    elif what == "seed":
        import os

        from boto3.s3.transfer import S3Transfer, TransferConfig

        t = S3Transfer(s3, TransferConfig(max_concurrency=16))
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda f: t.upload_file(f, bucket, key + os.path.basename(f)), sys.argv[5:]))
    else:
        sys.exit(f"unknown {what}")


if __name__ == "__main__":
    main()

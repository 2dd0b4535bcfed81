"""boto3 / s3transfer classic peer (the default TransferConfig).

usage: boto3_classic.py OP s3 ENDPOINT BUCKET ARGS...
  download KEY DEST | upload KEY SRC | download_tree PREFIX DEST | upload_tree PREFIX SRC | ls_glob PREFIX GLOB
  ls_all                 every key (the list_objects_v2 paginator), one per line
  cat_zstd PREFIX        every object below PREFIX in key order, one get_object at a time,
                         decompressed with the zstandard package, to stdout
Many files go through one s3transfer TransferManager (its default 10 threads).
"""

import fnmatch
import os
import sys

import boto3
from boto3.s3.transfer import S3Transfer, TransferConfig
from botocore.config import Config
from s3transfer.manager import TransferManager


def main() -> None:
    op, _proto, endpoint, bucket, *rest = sys.argv[1:]
    s3 = boto3.client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}))
    cfg = TransferConfig(preferred_transfer_client="classic")
    if op == "download":
        key, dest = rest
        S3Transfer(s3, cfg).download_file(bucket, key, dest)
    elif op == "upload":
        key, src = rest
        S3Transfer(s3, cfg).upload_file(src, bucket, key)
    elif op == "download_tree":
        prefix, dest = rest
        keys = [
            o["Key"]
            for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in p.get("Contents", [])
        ]
        with TransferManager(s3, cfg) as m:
            futs = [m.download(bucket, k, os.path.join(dest, k[len(prefix) :])) for k in keys]
            for f in futs:
                f.result()
    elif op == "upload_tree":
        prefix, src = rest
        with TransferManager(s3, cfg) as m:
            futs = [m.upload(os.path.join(src, n), bucket, prefix + n) for n in sorted(os.listdir(src))]
            for f in futs:
                f.result()
    elif op == "ls_glob":
        prefix, glob = rest
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in p.get("Contents", []):
                if fnmatch.fnmatchcase(o["Key"][len(prefix) :], glob) and "/" not in o["Key"][len(prefix) :]:
                    print(o["Key"])
    elif op == "ls_all":
        out = sys.stdout
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            out.write("".join(o["Key"] + "\n" for o in p.get("Contents", [])))
    elif op == "cat_zstd":
        import zstandard

        (prefix,) = rest
        keys = [
            o["Key"]
            for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in p.get("Contents", [])
        ]
        out = sys.stdout.buffer
        for k in keys:
            d = zstandard.ZstdDecompressor().decompressobj()
            for chunk in s3.get_object(Bucket=bucket, Key=k)["Body"].iter_chunks(1 << 20):
                out.write(d.decompress(chunk))
    else:
        sys.exit(f"unknown op {op}")


if __name__ == "__main__":
    main()

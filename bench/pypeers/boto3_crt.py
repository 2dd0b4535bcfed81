"""boto3's CRT transfer client (s3transfer.crt on awscrt's S3 client).

usage: boto3_crt.py OP s3 ENDPOINT BUCKET ARGS...
  download KEY DEST | upload KEY SRC | download_tree PREFIX DEST | upload_tree PREFIX SRC

`TransferConfig(preferred_transfer_client="crt")` ignores a custom http
endpoint and heads for AWS, so the pieces are wired by hand (shared/PEERS.md):
the CRT S3 client (TLS for an https endpoint, trusting AWS_CA_BUNDLE), botocore serialising each request for the
local endpoint (path-style), and s3transfer's CRTTransferManager driving
them. Everything else is the CRT's defaults (its own part size and
concurrency, one event-loop thread per core).
"""

import os
import sys

import botocore.session
from botocore.config import Config
from s3transfer.crt import (
    BotocoreCRTCredentialsWrapper,
    BotocoreCRTRequestSerializer,
    CRTTransferManager,
    create_s3_crt_client,
)


def manager(endpoint: str) -> tuple[CRTTransferManager, object]:
    session = botocore.session.Session()
    region = os.environ.get("AWS_REGION", "us-east-1")
    creds = BotocoreCRTCredentialsWrapper(session.get_credentials()).to_crt_credentials_provider()
    # An https endpoint with a private CA: AWS_CA_BUNDLE, as botocore reads it.
    crt = create_s3_crt_client(
        region,
        crt_credentials_provider=creds,
        use_ssl=endpoint.startswith("https"),
        verify=os.environ.get("AWS_CA_BUNDLE") or None,
    )
    kwargs = {"region_name": region, "endpoint_url": endpoint, "config": Config(s3={"addressing_style": "path"})}
    serializer = BotocoreCRTRequestSerializer(session, dict(kwargs))  # it adds service_name to what it is given
    return CRTTransferManager(crt, serializer), session.create_client("s3", **kwargs)


def keys(client, bucket: str, prefix: str) -> list[str]:
    return [
        o["Key"]
        for p in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in p.get("Contents", [])
    ]


def main() -> None:
    op, _proto, endpoint, bucket, *rest = sys.argv[1:]
    m, client = manager(endpoint)
    with m:
        if op == "download":
            key, dest = rest
            m.download(bucket, key, dest).result()
        elif op == "upload":
            key, src = rest
            m.upload(src, bucket, key).result()
        elif op == "download_tree":
            prefix, dest = rest
            futs = []
            for k in keys(client, bucket, prefix):
                path = os.path.join(dest, k[len(prefix) :])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                futs.append(m.download(bucket, k, path))
            for f in futs:
                f.result()
        elif op == "upload_tree":
            prefix, src = rest
            futs = [m.upload(os.path.join(src, n), bucket, prefix + n) for n in sorted(os.listdir(src))]
            for f in futs:
                f.result()
        else:
            sys.exit(f"unknown op {op}")


if __name__ == "__main__":
    main()

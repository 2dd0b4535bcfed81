"""obstore peer (S3 only here: its GCS writes use the XML API the emulators lack).

usage: obstore_peer.py OP s3 ENDPOINT BUCKET ARGS...
  download KEY DEST   obs.get, streamed to the file
  upload KEY SRC      obs.put from the file (its own multipart, default concurrency)
  ls_all              every key (obs.list), one per line
  cat_zstd PREFIX     every object below PREFIX in key order, one obs.get at a time,
                      decompressed with the zstandard package, to stdout
"""

import os
import sys

# An https endpoint with a private CA: obstore has no AWS_CA_BUNDLE of its
# own; its TLS trusts the platform's roots, which a user points at the CA
# with SSL_CERT_FILE. Set before obstore is imported.
if os.environ.get("AWS_CA_BUNDLE"):
    os.environ["SSL_CERT_FILE"] = os.environ["AWS_CA_BUNDLE"]

import obstore as obs
from obstore.store import S3Store


def main() -> None:
    op, _proto, endpoint, bucket, *rest = sys.argv[1:]
    store = S3Store(
        bucket,
        endpoint=endpoint,
        virtual_hosted_style_request=False,
        region="us-east-1",
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        client_options={"allow_http": True},
    )
    if op == "download":
        key, dest = rest
        with open(dest, "wb") as f:
            for chunk in obs.get(store, key).stream(min_chunk_size=8 << 20):
                f.write(chunk)
    elif op == "upload":
        key, src = rest
        with open(src, "rb") as f:
            obs.put(store, key, f)
    elif op == "ls_all":
        out = sys.stdout
        for batch in obs.list(store, chunk_size=1000):
            out.write("".join(m["path"] + "\n" for m in batch))
    elif op == "cat_zstd":
        import zstandard

        (prefix,) = rest
        keys = sorted(m["path"] for batch in obs.list(store, prefix=prefix) for m in batch)
        out = sys.stdout.buffer
        for k in keys:
            d = zstandard.ZstdDecompressor().decompressobj()
            for chunk in obs.get(store, k).stream(min_chunk_size=1 << 20):
                out.write(d.decompress(bytes(chunk)))
    else:
        sys.exit(f"unknown op {op}")


if __name__ == "__main__":
    main()

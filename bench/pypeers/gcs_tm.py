"""python-storage peer: transfer_manager (threads or processes).

usage: gcs_tm.py OP gcs ENDPOINT BUCKET ARGS... --workers-type threads|processes
  download KEY DEST          download_chunks_concurrently (32 MiB chunks)
  upload KEY SRC             blob.upload_from_filename (resumable; upload_chunks_concurrently
                             needs the XML multipart API, which the emulators lack)
  download_tree PREFIX DEST  download_many_to_path
  upload_tree PREFIX SRC     upload_many_from_filenames
  ls_glob PREFIX GLOB        list_blobs(match_glob=...), names to stdout
  ls_all                     list_blobs() (its defaults: full resources), names to stdout
Defaults are the library's own (max_workers=8).
"""

import os
import sys

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.cloud.storage import transfer_manager as tm


def main() -> None:
    args = sys.argv[1:]
    kind = tm.THREAD if "--workers-type" in args and args[args.index("--workers-type") + 1] == "threads" else tm.PROCESS
    if "--workers-type" in args:
        i = args.index("--workers-type")
        del args[i : i + 2]
    op, _proto, endpoint, bucket_name, *rest = args
    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
    )
    bucket = client.bucket(bucket_name)
    if op == "download":
        key, dest = rest
        blob = bucket.blob(key)
        blob.reload()
        tm.download_chunks_concurrently(blob, dest, worker_type=kind)
    elif op == "upload":
        key, src = rest
        bucket.blob(key).upload_from_filename(src)
    elif op == "download_tree":
        prefix, dest = rest
        names = [b.name for b in client.list_blobs(bucket_name, prefix=prefix)]
        results = tm.download_many_to_path(
            bucket,
            [n[len(prefix) :] for n in names],
            destination_directory=dest,
            blob_name_prefix=prefix,
            worker_type=kind,
            raise_exception=True,
        )
        assert all(r is None for r in results)
    elif op == "upload_tree":
        prefix, src = rest
        files = sorted(os.listdir(src))
        results = tm.upload_many_from_filenames(
            bucket, files, source_directory=src, blob_name_prefix=prefix, worker_type=kind, raise_exception=True
        )
        assert all(r is None for r in results)
    elif op == "ls_glob":
        prefix, glob = rest
        for b in client.list_blobs(
            bucket_name, prefix=prefix, match_glob=prefix + glob, fields="items(name),nextPageToken"
        ):
            print(b.name)
    elif op == "ls_all":
        out = sys.stdout
        for page in client.list_blobs(bucket_name).pages:
            out.write("".join(b.name + "\n" for b in page))
    else:
        sys.exit(f"unknown op {op}")


if __name__ == "__main__":
    main()

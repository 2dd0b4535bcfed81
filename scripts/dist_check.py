"""The installed wheel, used as a user would (run by scripts/dist_check.sh
inside a fresh venv with no cargo or rustc on PATH): a copy in each
direction and cloud to cloud, a listing, and an fsspec read through the
``shoal://`` entry point, against the local servers in SHOAL_TEST_GCS and
SHOAL_TEST_S3. Prints one line per step; any failure raises (exit 1).
"""

import os
import shutil
import sys
import tempfile
import uuid

for tool in ("cargo", "rustc"):
    if shutil.which(tool):
        sys.exit(f"dist_check: {tool} is on PATH ({shutil.which(tool)}): this check must run without Rust")

os.environ["STORAGE_EMULATOR_HOST"] = os.environ["SHOAL_TEST_GCS"]
os.environ["AWS_ENDPOINT_URL"] = os.environ["SHOAL_TEST_S3"]
os.environ["AWS_ACCESS_KEY_ID"] = os.environ.get("SHOAL_TEST_S3_KEY", "minioadmin")
os.environ["AWS_SECRET_ACCESS_KEY"] = os.environ.get("SHOAL_TEST_S3_SECRET", "minioadmin")
os.environ.setdefault("AWS_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

import fsspec  # noqa: E402

import shoal  # noqa: E402

# The wheel's module, not a source tree's or a develop install's.
where = os.path.dirname(shoal._shoal.__file__)
if not os.path.realpath(where).startswith(os.path.realpath(sys.prefix) + os.sep):
    sys.exit(f"dist_check: shoal was imported from {where}, outside the venv {sys.prefix}")
print(f"dist_check: shoal {shoal.__version__} ({shoal.__commit__}) from {where}")
if shoal.__version__ != os.environ.get("SHOAL_EXPECT_VERSION", shoal.__version__):
    sys.exit(f"dist_check: shoal.__version__ is {shoal.__version__}, the CLI says {os.environ['SHOAL_EXPECT_VERSION']}")

run = uuid.uuid4().hex[:10]
gs, s3 = f"gs://dist-{run}", f"s3://dist-{run}"
shoal.mb(gs)
shoal.mb(s3)

# 3 MiB and a bit: more than one part/slice at the small settings below.
data = os.urandom(3 << 20) + b"the end\n"
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "src.bin")
    with open(src, "wb") as f:
        f.write(data)
    shoal.copy(src, f"{s3}/a/src.bin", chunk_size=1 << 20)
    shoal.copy(f"{s3}/a/src.bin", f"{gs}/b/src.bin", chunk_size=1 << 20)
    back = os.path.join(tmp, "back.bin")
    shoal.copy(f"{gs}/b/src.bin", back, chunk_size=1 << 20)
    with open(back, "rb") as f:
        assert f.read() == data, "the copy back differs from what was uploaded"
print("dist_check: copy local -> s3 -> gs -> local: same bytes")

names = sorted(o.url for o in shoal.ls(f"{s3}/", recursive=True).objects)
assert names == [f"{s3}/a/src.bin"], names
names = sorted(o.url for o in shoal.ls(f"{gs}/", recursive=True).objects)
assert names == [f"{gs}/b/src.bin"], names
print("dist_check: listing: one object in each bucket")

# fsspec finds the filesystem by its entry point, as any fsspec user would.
with fsspec.open(f"shoal://gs/dist-{run}/b/src.bin", "rb") as f:
    f.seek(len(data) - 8)
    tail = f.read()
assert tail == b"the end\n", tail
fs = fsspec.filesystem("shoal")
assert fs.cat_file(f"s3/dist-{run}/a/src.bin", start=0, end=4) == data[:4]
print("dist_check: fsspec read: shoal:// ranges read back")

shoal.rm([f"{s3}/a/src.bin", f"{gs}/b/src.bin"])
print("dist_check: wheel OK")

"""The data every scenario moves, made once per run, and how results are checked.

Sources live in a work folder on tmpfs (/dev/shm when present) so the disk
is not what gets measured. Checks are independent of every client: sha256 of
what landed locally; for uploads, the object read back from the server
(stdlib HTTP for GCS, boto3 for S3) or, on shoal-benchserver, which keeps no
data, the CRC32C it computed over the bytes it received.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .env import CACHE, VENV_PY
from .tools import Target

PYPEERS = Path(__file__).resolve().parent.parent / "pypeers"
GLOB = "ABC*.zip"
GLOB_PREFIX = "glob/"
ZSTD_PREFIX = "ds/"


@dataclass
class Sizes:
    big: int  # bytes of the one-object scenarios
    small_n: int  # number of small files
    small_size: int
    glob_keys: int  # keys under the glob prefix
    glob_match: int  # of which match ABC*.zip
    runs: int
    list_keys: int = 1_000_000  # keys of the big synthetic listing bucket (list-N on shoal-benchserver)
    list_keys_small: int = 100_000  # the size-limited variant, for slow listers (gcloud)
    zstd_objects: int = 500  # the zstd dataset: objects ...
    zstd_bytes: int = 1 << 30  # ... and their total size decompressed
    mid_n: int = 200  # the mid-size files: 200 × 8 MiB (many files that are each worth a few requests)
    mid_size: int = 8 << 20


FULL = Sizes(big=1 << 30, small_n=5000, small_size=16 << 10, glob_keys=10_000, glob_match=150, runs=3)
SMOKE = Sizes(
    big=8 << 20,
    small_n=50,
    small_size=16 << 10,
    glob_keys=1000,
    glob_match=15,
    runs=1,
    list_keys=5000,
    list_keys_small=2000,
    zstd_objects=10,
    zstd_bytes=4 << 20,
    mid_n=4,
    mid_size=1 << 20,
)


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root: Path) -> tuple[int, str]:
    """(file count, digest over sorted (relative path, sha256)). A single
    wrapping folder (some tools copy `small/` into the destination) is
    looked through so equal content compares equal."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    rels = [p.relative_to(root).as_posix() for p in files]
    firsts = {r.split("/", 1)[0] for r in rels}
    if len(firsts) == 1 and all("/" in r for r in rels):
        rels = [r.split("/", 1)[1] for r in rels]
    pairs = sorted(zip(rels, (sha256_file(p) for p in files), strict=True))
    h = hashlib.sha256()
    for r, d in pairs:
        h.update(f"{r}\0{d}\n".encode())
    return len(pairs), h.hexdigest()


def _random_file(p: Path, size: int) -> None:
    with open(p, "wb") as f:
        left = size
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


class Workload:
    def __init__(self, work: Path, sizes: Sizes, benchserver: Path):
        self.work = work
        self.sizes = sizes
        self.benchserver = benchserver
        self.src = work / "src"
        self.dst = work / "dst"
        self.gcs_data = work / "gcs-data"
        self.big = self.src / "big.bin"
        self.small = self.src / "small"
        self.mid = self.src / "mid"
        self.zds = self.src / "ds"  # the zstd dataset's files

    def make_transfer(self) -> None:
        """Only the big file and the small files (the TLS scenario's data)."""
        s = self.sizes
        for d in (self.src, self.dst, self.small):
            d.mkdir(parents=True, exist_ok=True)
        _random_file(self.big, s.big)
        for i in range(s.small_n):
            _random_file(self.small / f"f{i:05d}.bin", s.small_size)
        self.big_sha = sha256_file(self.big)
        self.small_tree = tree_digest(self.small)

    def make(self) -> None:
        s = self.sizes
        for d in (
            self.src,
            self.dst,
            self.small,
            self.mid,
            self.gcs_data / "bench" / "big",
            self.gcs_data / "bench" / "small",
            self.gcs_data / "benchglob" / "glob",
            self.gcs_data / "benchup",
        ):
            d.mkdir(parents=True, exist_ok=True)
        _random_file(self.big, s.big)
        for i in range(s.small_n):
            _random_file(self.small / f"f{i:05d}.bin", s.small_size)
        for i in range(s.mid_n):
            _random_file(self.mid / f"m{i:03d}.bin", s.mid_size)
        os.link(self.big, self.gcs_data / "bench" / "big" / "big.bin")
        for f in self.small.iterdir():
            os.link(f, self.gcs_data / "bench" / "small" / f.name)
        (self.gcs_data / "benchup" / ".keep").write_text("")
        # The glob shape: glob_keys keys, glob_match named ABC*.zip, plus
        # decoys a correct glob must skip (deeper levels, near-miss names).
        g = self.gcs_data / "benchglob" / "glob"
        step = max(1, s.glob_keys // s.glob_match)
        matched = 0
        for i in range(s.glob_keys):
            if i % step == 0 and matched < s.glob_match:
                name, matched = f"ABC{i:05d}.zip", matched + 1
            elif i % 97 == 1:
                name = f"ABC{i:05d}.zip.bak"
            else:
                name = f"f{i:05d}.dat"
            (g / name).write_text("x")
        (g / "ABC-dir").mkdir()
        (g / "ABC-dir" / "deep.zip").write_text("x")
        self.big_sha = sha256_file(self.big)
        self.big_crc = self.crc32c(self.big)
        self.small_tree = tree_digest(self.small)
        self.mid_tree = tree_digest(self.mid)
        # What shoal-benchserver serves for size-N.
        h = hashlib.sha256()
        p = subprocess.Popen([str(self.benchserver), "gen", str(s.big)], stdout=subprocess.PIPE)
        while chunk := p.stdout.read(8 << 20):
            h.update(chunk)
        p.wait()
        self.pattern_sha = h.hexdigest()
        # The zstd dataset: cached on disk, copied to tmpfs for the local limit.
        cached, self.zstd = zstd_dataset(s.zstd_objects, s.zstd_bytes, self.benchserver)
        shutil.copytree(cached, self.zds)
        self.zstd_files = sorted(self.zds.iterdir())
        # The listing buckets: how many keys have bytes above 0x7F.
        stats = {n: self.list_key_stats(n) for n in {s.list_keys, s.list_keys_small}}
        self.list_nonascii = {n: st[1] for n, st in stats.items()}
        self.list_hot = stats[s.list_keys][2:]  # (folder holding the most keys, its share, folders)

    def crc32c(self, p: Path) -> str:
        return subprocess.run(
            [str(self.benchserver), "crc32c", str(p)], capture_output=True, text=True, check=True
        ).stdout.strip()

    def list_key_stats(self, n: int) -> tuple[int, int, str, float, int]:
        """Of shoal-benchserver's bucket list-N: (keys, keys with bytes above
        0x7F, the folder holding the most keys, its share of them, folders)."""
        out = subprocess.run([str(self.benchserver), "list-keys", str(n)], capture_output=True, check=True).stdout
        lines = out.decode().splitlines()
        folders = collections.Counter(k.rsplit("/", 1)[0] + "/" for k in lines)
        top, top_n = folders.most_common(1)[0]
        return len(lines), sum(1 for k in lines if not k.isascii()), top, top_n / len(lines), len(folders)

    def seed_s3(self, endpoint: str) -> None:
        """MinIO: buckets, the big object, the small and mid-size files and
        the zstd dataset (boto3, not a client under test)."""
        for b in ("bench", "benchup"):
            s3_helper(endpoint, b, "mb", "-")
        s3_helper(endpoint, "bench", "seed", "big/", str(self.big))
        s3_helper(endpoint, "bench", "seed", "small/", *sorted(str(p) for p in self.small.iterdir()))
        s3_helper(endpoint, "bench", "seed", "mid/", *sorted(str(p) for p in self.mid.iterdir()))
        s3_helper(endpoint, "bench", "seed", ZSTD_PREFIX, *(str(p) for p in self.zstd_files))

    def clean_dst(self) -> None:
        shutil.rmtree(self.dst, ignore_errors=True)
        self.dst.mkdir(parents=True)


def s3_helper(endpoint: str, bucket: str, what: str, *args: str, ca: str = "") -> dict:
    """`ca`: the private CA of an https endpoint (given as AWS_CA_BUNDLE)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID="minioadmin",
        AWS_SECRET_ACCESS_KEY="minioadmin",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    if ca:
        env["AWS_CA_BUNDLE"] = ca
    p = subprocess.run(
        [str(VENV_PY), str(PYPEERS / "s3_verify.py"), endpoint, bucket, what, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if p.returncode != 0:
        raise RuntimeError(f"s3 {what} {bucket}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout) if p.stdout.strip() else {}


def _gcs_obj_url(t: Target, key: str) -> str:
    return f"{t.endpoint}/storage/v1/b/{t.bucket}/o/{urllib.parse.quote(key, safe='')}"


def gcs_object_sha(t: Target, key: str) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    with urllib.request.urlopen(_gcs_obj_url(t, key) + "?alt=media", timeout=120) as r:
        while chunk := r.read(8 << 20):
            h.update(chunk)
            n += len(chunk)
    return n, h.hexdigest()


def gcs_meta(t: Target, key: str) -> dict:
    with urllib.request.urlopen(_gcs_obj_url(t, key), timeout=30) as r:
        return json.loads(r.read())


def gcs_delete(t: Target, key: str) -> None:
    try:
        urllib.request.urlopen(urllib.request.Request(_gcs_obj_url(t, key), method="DELETE"), timeout=30).close()
    except urllib.error.HTTPError:
        pass


def gcs_create_bucket(endpoint: str, bucket: str) -> None:
    req = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project=test",
        method="POST",
        data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise


def s3_head_crc(t: Target, key: str) -> tuple[int, str]:
    """On shoal-benchserver (no auth): size and CRC32C of what it received."""
    import base64

    req = urllib.request.Request(
        f"{t.endpoint}/{t.bucket}/{urllib.parse.quote(key)}", method="HEAD", headers={"x-amz-checksum-mode": "ENABLED"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        crc = base64.b64decode(r.headers["x-amz-checksum-crc32c"]).hex()
        return int(r.headers["content-length"]), crc


# ---- the zstd dataset ------------------------------------------------------

ZSTD_VERSION = 1  # bump when the generator changes: the cache key includes it


def _log_lines(rng: random.Random) -> tuple[list[str], int]:
    """Line tails (level, service, path, status, message) to draw from."""
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(3, 10))) for _ in range(2000)
    ]
    lv = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
    st = ("200", "200", "200", "201", "204", "304", "404", "500")
    ch, ri = rng.choice, rng.randrange
    return [
        f" {ch(lv)} svc-{ch(words[:40])}[{ri(1000, 1100)}]: user={ri(100000)} path=/{ch(words)}/{ch(words)}/"
        f'{ch(words)} status={ch(st)} ms={ri(1, 900)} msg="{ch(words)} {ch(words)} {ch(words)} {ch(words)}"\n'
        for _ in range(65536)
    ], 0


def _text(rng: random.Random, tails: list[str], nbytes: int, t: int) -> tuple[bytes, int]:
    """`nbytes` of log-like lines (timestamp, random request id, a drawn tail),
    ending in a newline: compressible about 3x by zstd -3, like real logs
    with ids in them."""
    out: list[str] = []
    n = 0
    while n < nbytes:
        rb = rng.randbytes(11 * 4096)
        for i in range(0, len(rb), 11):
            t += rb[i] % 40 + 1
            s = (
                f"2024-06-01T{t // 3600000 % 24:02}:{t // 60000 % 60:02}:{t // 1000 % 60:02}.{t % 1000:03}Z "
                f"req={rb[i + 1 : i + 9].hex()}{tails[rb[i + 9] << 8 | rb[i + 10]]}"
            )
            out.append(s)
            n += len(s)
            if n >= nbytes:
                break
    return "".join(out).encode()[: nbytes - 1] + b"\n", t


def zstd_dataset(n_objects: int, total: int, benchserver: Path) -> tuple[Path, dict]:
    """The zstd dataset (made once, cached in $SHOAL_CACHE/bench-data): a
    folder of `part-NNNNN.zst` files (zstd -3, one frame each) and what the
    concatenated decompressed stream must be, as `shoal-benchserver crc32c -`
    reports it (CRC32C and byte count) plus its sha256."""
    root = CACHE / "bench-data" / f"zstd-v{ZSTD_VERSION}-{n_objects}x{total}"
    manifest = root / "manifest.json"
    if manifest.exists():
        return root / "ds", json.loads(manifest.read_text())
    if not shutil.which("zstd"):
        raise RuntimeError("the zstd CLI is not installed (apt-get install zstd)")
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "ds").mkdir(parents=True)
    rng = random.Random(20240601)
    tails, t = _log_lines(rng)
    sink = subprocess.Popen([str(benchserver), "crc32c", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    sha = hashlib.sha256()
    compressed = 0
    for i in range(n_objects):
        size = total // n_objects + (1 if i < total % n_objects else 0)
        raw, t = _text(rng, tails, size, t)
        sink.stdin.write(raw)
        sha.update(raw)
        z = subprocess.run(["zstd", "-3", "-q", "-c"], input=raw, capture_output=True, check=True).stdout
        (tmp / "ds" / f"part-{i:05d}.zst").write_bytes(z)
        compressed += len(z)
    sink.stdin.close()
    crc, nbytes = sink.stdout.read().decode().split()
    sink.wait()
    m = {"objects": n_objects, "bytes": int(nbytes), "crc32c": crc, "sha256": sha.hexdigest(), "compressed": compressed}
    (tmp / "manifest.json").write_text(json.dumps(m, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return root / "ds", m

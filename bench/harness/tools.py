"""The clients under test and the exact command each runs.

Every tool runs as a child process at its out-of-the-box settings (the
defaults a user gets), aimed at 127.0.0.1 as shared/PEERS.md says. A method
answers a `Job` or None when the tool cannot do that operation on that
protocol; None is reported as "n/a", never silently.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .env import BENCH, S3_KEY, S3_SECRET, VENV_PY

PYPEERS = BENCH / "pypeers"


@dataclass(frozen=True)
class Target:
    """A server as one protocol sees it, at one latency profile."""

    server: str  # "minio", "fake-gcs", "benchserver"
    proto: str  # "s3" | "gcs"
    endpoint: str  # http://127.0.0.1:PORT (direct or through toxiproxy)
    bucket: str
    profile: str  # "loopback" | "+10 ms"
    name: str = ""  # what the report calls it, if not "server (proto)"
    # The server without the proxy, for reading results back: a check
    # through the latency toxic would take minutes and measure nothing.
    direct: str = ""
    # A private CA's PEM file for an https endpoint: each client is told it
    # the way its users would (`AWS_CA_BUNDLE`; rclone `--ca-cert`).
    ca: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.server} ({self.proto})"

    @property
    def check_endpoint(self) -> str:
        return self.direct or self.endpoint


@dataclass
class Job:
    argv: list[str]
    env: dict[str, str]
    # For listings: the number of matching names in the tool's stdout.
    count: Callable[[str], int] | None = None
    note: str = ""
    # stdout goes through `shoal-benchserver crc32c -` (CRC32C and byte
    # count of the stream) instead of into memory.
    digest: bool = False


def base_env() -> dict[str, str]:
    """The caller's environment without cloud settings, so nothing leaks to a real cloud."""
    drop = ("AWS_", "GOOGLE_", "CLOUDSDK_", "STORAGE_EMULATOR", "GCLOUD", "S3_", "RCLONE_", "BOTO")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def target_env(t: Target) -> dict[str, str]:
    env = base_env()
    if t.proto == "s3":
        env.update(
            AWS_ACCESS_KEY_ID=S3_KEY,
            AWS_SECRET_ACCESS_KEY=S3_SECRET,
            AWS_REGION="us-east-1",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_EC2_METADATA_DISABLED="true",
            AWS_ENDPOINT_URL=t.endpoint,
        )
        if t.ca:
            env["AWS_CA_BUNDLE"] = t.ca
    else:
        env.update(STORAGE_EMULATOR_HOST=t.endpoint, GOOGLE_CLOUD_PROJECT="test")
    return env


def url(t: Target, key: str) -> str:
    return f"{'s3' if t.proto == 's3' else 'gs'}://{t.bucket}/{key}"


def count_lines(pattern: str) -> Callable[[str], int]:
    rx = re.compile(pattern)
    return lambda out: sum(1 for line in out.splitlines() if rx.search(line.strip()))


def shell(cmd: str, env: dict[str, str]) -> Job:
    """A bash pipeline that fails when any stage fails."""
    return Job(["bash", "-c", "set -o pipefail; " + cmd], env, digest=True)


def q(s: str) -> str:
    import shlex

    return shlex.quote(s)


@dataclass
class Tool:
    name: str
    ok: bool = True
    reason: str = ""
    version: str = ""
    protos: tuple[str, ...] = ("s3", "gcs")
    extra: dict = field(default_factory=dict)

    def supports(self, t: Target) -> bool:
        return t.proto in self.protos

    def download(self, t: Target, key: str, dest: Path) -> Job | None:
        return None

    def upload(self, t: Target, src: Path, key: str) -> Job | None:
        return None

    def download_tree(self, t: Target, prefix: str, dest: Path) -> Job | None:
        return None

    def upload_tree(self, t: Target, src: Path, prefix: str) -> Job | None:
        return None

    def ls_glob(self, t: Target, prefix: str, glob: str) -> Job | None:
        return None

    def ls_all(self, t: Target) -> Job | None:
        """Every key of the bucket, one line each (stdout), counted by `Job.count`."""
        return None

    def cat_zstd(self, t: Target, prefix: str) -> Job | None:
        """Every object below prefix in key order, decompressed, to stdout."""
        return None

    def skip_why(self, scenario: str, t: Target) -> str:
        """Why this tool is not measured there (a row says so), or "".

        `extra["ls_all_max"]`: the largest `list-N` bucket the tool lists
        (for listers so slow that a million keys take minutes per run);
        `extra["skip"]`: {(operation, server): why} for pairs not measured."""
        skip = self.extra.get("skip", {}).get((scenario.split("-")[0], t.server))
        if skip:
            return skip
        cap = self.extra.get("ls_all_max")
        n = int(t.bucket.removeprefix("list-")) if t.bucket.startswith("list-") else 0
        if scenario == "ls-full" and cap and n > cap:
            return f"not run at {n:,} keys (minutes per run): see its {cap:,}-key row"
        return ""


class Shoal(Tool):
    def __init__(self, exe: Path, has_recursive: bool, **kw):
        super().__init__("shoal", **kw)
        self.exe = str(exe)
        self.has_recursive = has_recursive

    def download(self, t, key, dest):
        return Job([self.exe, "cp", url(t, key), str(dest)], target_env(t))

    def upload(self, t, src, key):
        return Job([self.exe, "cp", str(src), url(t, key)], target_env(t))

    def download_tree(self, t, prefix, dest):
        if not self.has_recursive:
            return None
        return Job([self.exe, "cp", "-r", url(t, prefix), str(dest) + "/"], target_env(t))

    def upload_tree(self, t, src, prefix):
        if not self.has_recursive:
            return None
        return Job([self.exe, "cp", "-r", str(src) + "/", url(t, prefix)], target_env(t))

    def ls_glob(self, t, prefix, glob):
        return Job([self.exe, "ls", url(t, prefix + glob)], target_env(t), count=count_lines(r"ABC[^/]*\.zip$"))

    def ls_all(self, t):
        return Job([self.exe, "ls", "-r", url(t, "")], target_env(t), count=count_lines(r"^(s3|gs)://"))

    def cat_zstd(self, t, prefix):
        return Job([self.exe, "cat", "-d", url(t, prefix + "**")], target_env(t), digest=True)


class ShoalBenchRead(Tool):
    """`shoal bench read`: reads and decompresses, writes nothing; it reports
    the objects and decompressed bytes it saw (its check), not a digest."""

    def __init__(self, exe: Path, **kw):
        super().__init__("shoal bench read", **kw)
        self.exe = str(exe)

    def cat_zstd(self, t, prefix):
        return Job(
            [self.exe, "bench", "read", "--json", url(t, prefix + "**")],
            target_env(t),
            note="writes nothing: checked by its own count of objects and decompressed bytes, no digest",
        )


class LocalZstd(Tool):
    """The local limit: `zstd -dc` over the dataset's files on tmpfs."""

    def __init__(self, files: list[Path], **kw):
        super().__init__("zstd -dc (local files)", protos=("file",), **kw)
        self.files = [str(f) for f in files]

    def cat_zstd(self, t, prefix):
        return Job(["zstd", "-dc", *self.files], base_env(), digest=True)


class S5cmd(Tool):
    def __init__(self, exe: str, **kw):
        super().__init__("s5cmd", protos=("s3",), **kw)
        self.exe = exe

    def _cmd(self, t, *args):
        return Job([self.exe, "--endpoint-url", t.endpoint, *args], target_env(t))

    def download(self, t, key, dest):
        return self._cmd(t, "cp", url(t, key), str(dest))

    def upload(self, t, src, key):
        return self._cmd(t, "cp", str(src), url(t, key))

    def download_tree(self, t, prefix, dest):
        return self._cmd(t, "cp", url(t, prefix) + "*", str(dest) + "/")

    def upload_tree(self, t, src, prefix):
        return self._cmd(t, "cp", str(src) + "/*", url(t, prefix))

    def ls_glob(self, t, prefix, glob):
        j = self._cmd(t, "ls", url(t, prefix + glob))
        j.count = count_lines(r"ABC[^/]*\.zip$")
        return j

    def ls_all(self, t):
        j = self._cmd(t, "ls", url(t, "*"))
        j.count = count_lines(r"^\S+ \S+\s+\d+\s")  # date time size key (not "DIR")
        return j

    def cat_zstd(self, t, prefix):
        # s5cmd cat takes a wildcard and writes the objects in key order.
        return shell(
            f"{q(self.exe)} --endpoint-url {q(t.endpoint)} cat {q(url(t, prefix + '*'))} | zstd -dc", target_env(t)
        )


class Rclone(Tool):
    def __init__(self, exe: str, **kw):
        super().__init__("rclone", **kw)
        self.exe = exe

    def _remote(self, t: Target) -> str:
        if t.proto == "s3":
            return (
                f':s3,provider=Other,env_auth=true,endpoint="{t.endpoint}",'
                f"force_path_style=true,region=us-east-1:{t.bucket}"
            )
        return (
            f':gcs,anonymous=true,endpoint="{t.endpoint}/storage/v1/",'
            f"project_number=test,bucket_policy_only=true:{t.bucket}"
        )

    def _cmd(self, t, *args):
        env = target_env(t)
        env["RCLONE_CONFIG"] = "/dev/null"
        flags = ["--s3-no-check-bucket", "--s3-no-head"] if t.proto == "s3" else []
        if t.ca:
            flags += ["--ca-cert", t.ca]
        return Job([self.exe, *args, *flags], env)

    def download(self, t, key, dest):
        return self._cmd(t, "copyto", f"{self._remote(t)}/{key}", str(dest))

    def upload(self, t, src, key):
        return self._cmd(t, "copyto", str(src), f"{self._remote(t)}/{key}")

    def download_tree(self, t, prefix, dest):
        return self._cmd(t, "copy", f"{self._remote(t)}/{prefix}", str(dest))

    def upload_tree(self, t, src, prefix):
        return self._cmd(t, "copy", str(src), f"{self._remote(t)}/{prefix}")

    def ls_glob(self, t, prefix, glob):
        j = self._cmd(t, "lsf", f"{self._remote(t)}/{prefix}", "--include", glob)
        j.count = count_lines(r"ABC[^/]*\.zip$")
        return j

    def ls_all(self, t):
        j = self._cmd(t, "lsf", "-R", "--files-only", self._remote(t))
        j.count = count_lines(r".")
        return j

    def cat_zstd(self, t, prefix):
        j = self._cmd(t, "cat", f"{self._remote(t)}/{prefix}")
        return shell(" ".join(q(a) for a in j.argv) + " | zstd -dc", j.env)


class Gcloud(Tool):
    def __init__(self, **kw):
        # Measured, not assumed: `gcloud storage ls 'gs://list-100000/**'` took
        # 45 s (~2,200 keys/s, 21 CPU s) on this project's 2-core machine
        # against shoal-benchserver: a million keys would take ~8 min per run.
        kw.setdefault("extra", {"ls_all_max": 100_000})
        super().__init__("gcloud storage", protos=("gcs",), **kw)
        self.config = tempfile.mkdtemp(prefix="shoal-bench-gcloud-")

    def _cmd(self, t, *args):
        env = base_env()
        env.update(
            CLOUDSDK_CONFIG=self.config,
            CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=f"{t.endpoint}/storage/v1/",
            CLOUDSDK_AUTH_DISABLE_CREDENTIALS="true",
            CLOUDSDK_CORE_PROJECT="test",
            CLOUDSDK_CORE_DISABLE_PROMPTS="1",
            CLOUDSDK_CORE_DISABLE_USAGE_REPORTING="true",
            CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK="true",
        )
        return Job(["gcloud", "storage", *args], env)

    def download(self, t, key, dest):
        return self._cmd(t, "cp", url(t, key), str(dest))

    # Measured instead of assumed: gcloud's multipart upload is refused by
    # shoal-benchserver's multipart/related parser and its resumable one stalls.
    skip_reason = {
        (
            "upload",
            "benchserver",
        ): "not measured: gcloud's upload to shoal-benchserver does not finish (the instrument's gap)"
    }

    def upload(self, t, src, key):
        if t.server == "benchserver":
            return None
        return self._cmd(t, "cp", str(src), url(t, key))

    def download_tree(self, t, prefix, dest):
        return self._cmd(t, "cp", "-r", url(t, prefix) + "*", str(dest) + "/")

    def upload_tree(self, t, src, prefix):
        return self._cmd(t, "cp", "-r", str(src) + "/*", url(t, prefix))

    def ls_glob(self, t, prefix, glob):
        j = self._cmd(t, "ls", url(t, prefix + glob))
        j.count = count_lines(r"ABC[^/]*\.zip$")
        return j

    def ls_all(self, t):
        j = self._cmd(t, "ls", url(t, "**"))
        j.count = count_lines(r"^gs://")
        return j


class PyPeer(Tool):
    """A Python library driven by a script in bench/pypeers, run in the bench venv."""

    def __init__(
        self,
        name: str,
        script: str,
        protos: tuple[str, ...],
        args: tuple[str, ...] = (),
        ops: tuple[str, ...] = ("download", "upload", "download_tree", "upload_tree", "ls_glob"),
        **kw,
    ):
        super().__init__(name, protos=protos, **kw)
        self.script = str(PYPEERS / script)
        self.args = list(args)
        self.ops = ops

    def _cmd(self, op, t, *args):
        if op not in self.ops:
            return None
        env = target_env(t)
        env["PYTHONIOENCODING"] = "utf-8"
        return Job([str(VENV_PY), self.script, op, t.proto, t.endpoint, t.bucket, *args, *self.args], env)

    def download(self, t, key, dest):
        return self._cmd("download", t, key, str(dest))

    def upload(self, t, src, key):
        return self._cmd("upload", t, key, str(src))

    def download_tree(self, t, prefix, dest):
        return self._cmd("download_tree", t, prefix, str(dest))

    def upload_tree(self, t, src, prefix):
        return self._cmd("upload_tree", t, prefix, str(src))

    def ls_glob(self, t, prefix, glob):
        j = self._cmd("ls_glob", t, prefix, glob)
        if j:
            j.count = count_lines(r"ABC[^/]*\.zip$")
        return j

    def ls_all(self, t):
        j = self._cmd("ls_all", t)
        if j:
            j.count = count_lines(r".")
        return j

    def cat_zstd(self, t, prefix):
        j = self._cmd("cat_zstd", t, prefix)
        if j:
            j.digest = True
        return j


class CurlList(Tool):
    """One raw JSON-API list request: the floor on what a cold `ls` can cost."""

    def __init__(self, **kw):
        super().__init__("curl (1 list request)", protos=("gcs",), **kw)

    def ls_glob(self, t, prefix, glob):
        from urllib.parse import quote

        q = (
            f"prefix={quote(prefix, safe='')}&matchGlob={quote(prefix + glob, safe='')}"
            f"&fields={quote('items(name),nextPageToken', safe='')}"
        )
        u = f"{t.endpoint}/storage/v1/b/{t.bucket}/o?{q}"

        def count(out: str) -> int:
            try:
                items = json.loads(out).get("items", [])
            except ValueError:
                return -1
            return sum(1 for i in items if re.search(r"ABC[^/]*\.zip$", i.get("name", "")))

        return Job(
            ["curl", "-fsS", u],
            base_env(),
            count=count,
            note="one request, no paging; a server that ignores matchGlob answers one unfiltered page",
        )

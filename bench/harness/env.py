"""Paths, ports and environment shared by every part of the harness.

The harness owns its ports (defaults well away from scripts/test.sh's and the
developers' 4443/9000/8474) so a benchmark never lands on someone else's
server. Every server and client is aimed at 127.0.0.1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent
CACHE = Path(os.environ.get("SHOAL_CACHE", Path.home() / ".cache" / "shoal"))
BIN = CACHE / "bin"
VENV = CACHE / "bench-venv"
VENV_PY = VENV / "bin" / "python"
RESULTS = BENCH / "results"
RAW = RESULTS / "raw"

S3_KEY = "minioadmin"
S3_SECRET = "minioadmin"


def go_env() -> dict[str, str]:
    """The Go settings scripts/servers.sh uses: local toolchain, caches in CACHE."""
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",
        GOPATH=str(CACHE / "go"),
        GOCACHE=str(CACHE / "go-build"),
        GOMODCACHE=str(CACHE / "go" / "pkg" / "mod"),
        GOFLAGS="-trimpath",
    )
    return env


@dataclass(frozen=True)
class Ports:
    """Ports of this harness's own servers (override with SHOAL_BENCH_PORT_BASE)."""

    base: int

    @property
    def gcs(self) -> int:  # fake-gcs-server
        return self.base

    @property
    def s3(self) -> int:  # MinIO (console on s3 + 1)
        return self.base + 10

    @property
    def s3_tls(self) -> int:  # MinIO serving HTTPS (TLS scenario; console on s3_tls + 1)
        return self.base + 12

    @property
    def toxi(self) -> int:  # toxiproxy API
        return self.base + 20

    @property
    def bench(self) -> int:  # shoal-benchserver
        return self.base + 30

    def proxy(self, i: int) -> int:  # toxiproxy listeners
        return self.base + 40 + i


def ports() -> Ports:
    return Ports(int(os.environ.get("SHOAL_BENCH_PORT_BASE", "31400")))

"""The servers of one benchmark run, on the harness's own ports.

MinIO and toxiproxy come from scripts/servers.sh (built and cached there).
fake-gcs-server is started here directly because its seed data is loaded
at start-up with `-data` (inserting 10,000 objects through its API takes
minutes: every insert scans the bucket under a lock). shoal-benchserver is
this repo's own. Everything binds 127.0.0.1; `stop` ends only the
processes started here, by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .env import BIN, REPO, Ports


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def wait_http(url: str, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except Exception:
            time.sleep(0.1)
    return False


class Servers:
    def __init__(self, ports: Ports, run_dir: Path):
        self.ports = ports
        self.run_dir = run_dir
        self.procs: list[subprocess.Popen] = []
        self.proxies: dict[str, int] = {}

    def _script_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SHOAL_RUN_DIR=str(self.run_dir / "servers"),
            SHOAL_GCS_PORT=str(self.ports.gcs),
            SHOAL_S3_PORT=str(self.ports.s3),
            SHOAL_TOXI_PORT=str(self.ports.toxi),
        )
        return env

    def start(self, gcs_data: Path, benchserver: Path) -> None:
        _log("starting MinIO and toxiproxy (scripts/servers.sh; first use builds them)")
        subprocess.run(
            [str(REPO / "scripts" / "servers.sh"), "start", "s3", "toxiproxy"], env=self._script_env(), check=True
        )
        subprocess.run([str(REPO / "scripts" / "servers.sh"), "install"], env=self._script_env(), check=True)
        _log("starting fake-gcs-server with the seed data (loading it takes a while for many objects)")
        log = open(self.run_dir / "fake-gcs-server.log", "w")
        p = self.ports.gcs
        self.procs.append(
            subprocess.Popen(
                [
                    str(BIN / "fake-gcs-server"),
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    str(p),
                    "-backend",
                    "memory",
                    "-data",
                    str(gcs_data),
                    "-external-url",
                    f"http://127.0.0.1:{p}",
                    "-public-host",
                    f"127.0.0.1:{p}",
                    "-log-level",
                    "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        )
        log = open(self.run_dir / "benchserver.log", "w")
        self.procs.append(
            subprocess.Popen(
                [str(benchserver), "serve", "--port", str(self.ports.bench)],
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        )
        if not wait_http(f"http://127.0.0.1:{self.ports.bench}/storage/v1/b/x/o/size-1", 30):
            raise RuntimeError("shoal-benchserver did not start (see its log in the run dir)")
        if not wait_http(f"http://127.0.0.1:{p}/_internal/healthcheck", 900):
            raise RuntimeError("fake-gcs-server did not start (see its log in the run dir)")

    def start_toxiproxy(self) -> None:
        subprocess.run([str(REPO / "scripts" / "servers.sh"), "start", "toxiproxy"], env=self._script_env(), check=True)

    def start_tls_minio(self, certs: Path, ca: Path) -> str:
        """MinIO serving HTTPS from `certs` (public.crt, private.key) on its
        own port, with a data dir in the run dir; answers its endpoint."""
        port = self.ports.s3_tls
        env = dict(os.environ, MINIO_ROOT_USER="minioadmin", MINIO_ROOT_PASSWORD="minioadmin", HOME=str(self.run_dir))
        log = open(self.run_dir / "minio-tls.log", "w")
        self.procs.append(
            subprocess.Popen(
                [
                    str(BIN / "minio"),
                    "server",
                    "--quiet",
                    "--certs-dir",
                    str(certs),
                    "--address",
                    f"127.0.0.1:{port}",
                    "--console-address",
                    f"127.0.0.1:{port + 1}",
                    str(self.run_dir / "minio-tls-data"),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        )
        from .tls import wait_https

        endpoint = f"https://127.0.0.1:{port}"
        if not wait_https(f"{endpoint}/minio/health/live", ca, 60):
            raise RuntimeError(f"MinIO with TLS did not answer on {endpoint} (see minio-tls.log in the run dir)")
        return endpoint

    def proxy(self, name: str, upstream_port: int, latency_ms: int) -> int:
        """A toxiproxy listener in front of upstream_port adding latency each way."""
        if name in self.proxies:
            return self.proxies[name]
        listen = self.ports.proxy(len(self.proxies))
        api = f"http://127.0.0.1:{self.ports.toxi}"
        _post(
            f"{api}/proxies",
            {"name": name, "listen": f"127.0.0.1:{listen}", "upstream": f"127.0.0.1:{upstream_port}", "enabled": True},
        )
        for stream in ("upstream", "downstream"):
            _post(
                f"{api}/proxies/{name}/toxics",
                {
                    "name": f"latency_{stream}",
                    "type": "latency",
                    "stream": stream,
                    "attributes": {"latency": latency_ms, "jitter": 0},
                },
            )
        self.proxies[name] = listen
        return listen

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.procs.clear()
        subprocess.run([str(REPO / "scripts" / "servers.sh"), "stop"], env=self._script_env(), check=False)


def _post(url: str, body: dict) -> None:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10):
            pass
    except urllib.error.HTTPError as e:
        if e.code != 409:  # already exists (a re-used toxiproxy)
            raise

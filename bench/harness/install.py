"""Install the peers shoal is measured against, cached in $SHOAL_CACHE.

Each installer answers a `Peer` status instead of raising: a peer that fails
to install is reported in REPORT.md as "not installed: <reason>", never
dropped. Recipes follow shared/PEERS.md (s5cmd through a wrapper module
because the proxy refuses `@latest` for it; rclone with `go install`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .env import BIN, CACHE, VENV, VENV_PY, go_env

S5CMD_VERSION = "v2.3.0"
RCLONE_MODULE = "github.com/rclone/rclone@latest"  # as PEERS.md: @latest resolves here

# Python packages, in two stages so --smoke only waits for the small set.
# s3fs is not used, but if it ever is, PEERS.md says pin it (botocore conflict).
PY_SMOKE = ["matplotlib", "boto3", "s3transfer", "zstandard", "awscrt"]
PY_FULL = ["google-cloud-storage", "obstore"]


@dataclass
class Peer:
    name: str
    ok: bool
    version: str = ""
    reason: str = ""
    extra: dict = field(default_factory=dict)


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _tail(text: str, n: int = 300) -> str:
    text = " ".join(text.strip().split())
    return text[-n:] if text else "no output"


def s5cmd() -> Peer:
    exe = BIN / "s5cmd"
    stamp = BIN / "s5cmd.version"
    if not (exe.exists() and stamp.exists() and stamp.read_text().strip() == S5CMD_VERSION):
        _log(f"building s5cmd {S5CMD_VERSION} (cached in {CACHE})")
        work = CACHE / "s5cmd-build"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "go.mod").write_text(
            f"module shoalbench/s5cmd\n\ngo 1.22\n\nrequire github.com/peak/s5cmd/v2 {S5CMD_VERSION}\n"
        )
        (work / "tools.go").write_text('//go:build tools\n\npackage tools\n\nimport _ "github.com/peak/s5cmd/v2"\n')
        BIN.mkdir(parents=True, exist_ok=True)
        for cmd in (["go", "mod", "tidy"], ["go", "build", "-o", str(exe), "github.com/peak/s5cmd/v2"]):
            try:
                p = subprocess.run(cmd, cwd=work, env=go_env(), capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as e:
                return Peer("s5cmd", False, reason=f"{' '.join(cmd[:2])}: {e}")
            if p.returncode != 0:
                return Peer("s5cmd", False, reason=f"{' '.join(cmd[:2])}: {_tail(p.stderr)}")
        stamp.write_text(S5CMD_VERSION + "\n")
    v = subprocess.run([str(exe), "version"], capture_output=True, text=True)
    ver = v.stdout.strip()
    if not ver or "dev" in ver:  # a module build carries no version stamp
        ver = S5CMD_VERSION
    return Peer("s5cmd", True, version=ver, extra={"exe": str(exe)})


def rclone_log() -> Path:
    return CACHE / "rclone-build.log"


def rclone(build: bool) -> Peer:
    """rclone takes ~15 min of CPU to build: only with --with-rclone, at nice 19.

    With `build` False a cached binary is still used if one exists.
    """
    exe = BIN / "rclone"
    if not exe.exists():
        if not build:
            return Peer("rclone", False, reason="not built (pass --with-rclone; ~15 min build)")
        _log(f"building rclone at nice 19 (~15 min; log {rclone_log()})")
        tmp = CACHE / "rclone-gobin"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        env = go_env()
        env["GOBIN"] = str(tmp)
        with open(rclone_log(), "w") as log:
            p = subprocess.run(
                ["nice", "-n", "19", "go", "install", RCLONE_MODULE],
                cwd=tmp,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if p.returncode != 0 or not (tmp / "rclone").exists():
            return Peer("rclone", False, reason=f"go install failed: {_tail(rclone_log().read_text())}")
        BIN.mkdir(parents=True, exist_ok=True)
        shutil.move(str(tmp / "rclone"), exe)
        shutil.rmtree(tmp, ignore_errors=True)
    v = subprocess.run(
        [str(exe), "version"], capture_output=True, text=True, env={**os.environ, "RCLONE_CONFIG": "/dev/null"}
    )
    first = (v.stdout.splitlines() or ["?"])[0]
    return Peer("rclone", True, version=first.replace("rclone ", ""), extra={"exe": str(exe)})


def gcloud() -> Peer:
    exe = Path("/usr/bin/gcloud")
    if not exe.exists():
        return Peer("gcloud", False, reason="/usr/bin/gcloud not present (not on any registry)")
    return Peer("gcloud", True, version="google-cloud-cli", extra={"exe": str(exe)})


def venv(full: bool) -> dict[str, Peer]:
    """The bench venv: matplotlib for charts plus the Python peers.

    Answers one status per Python package group. Stamps record what was
    installed so a warm run does no pip work at all.
    """
    wanted = PY_SMOKE + (PY_FULL if full else [])
    err = ""
    if not VENV_PY.exists():
        _log(f"creating venv {VENV}")
        p = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if p.returncode != 0:
            err = f"venv: {_tail(p.stderr)}"
    stamp = VENV / "shoal-bench-installed.txt"
    have = set(stamp.read_text().split()) if stamp.exists() else set()
    missing = [w for w in wanted if w not in have]
    if missing and not err:
        _log(f"pip install {' '.join(missing)}")
        p = subprocess.run(
            [str(VENV_PY), "-m", "pip", "install", "-q", "--disable-pip-version-check", *missing],
            capture_output=True,
            text=True,
        )
        if p.returncode == 0:
            stamp.write_text("\n".join(sorted(have | set(missing))) + "\n")
        else:
            err = f"pip: {_tail(p.stderr)}"
    versions = _py_versions(
        ["matplotlib", "boto3", "s3transfer", "botocore", "google-cloud-storage", "obstore", "zstandard", "awscrt"]
    )
    out = {}
    for pkg in ["matplotlib", "boto3", "google-cloud-storage", "obstore", "zstandard", "awscrt"]:
        if pkg in versions:
            out[pkg] = Peer(pkg, True, version=versions[pkg])
        elif pkg in wanted:
            out[pkg] = Peer(pkg, False, reason=err or "import failed after pip install")
        else:
            out[pkg] = Peer(pkg, False, reason="not installed in --smoke mode")
    if "boto3" in out and out["boto3"].ok:
        out["boto3"].version = f"boto3 {versions['boto3']}, s3transfer {versions.get('s3transfer', '?')}"
    if out["awscrt"].ok and "boto3" in versions:
        out["awscrt"].version = f"awscrt {versions['awscrt']}, s3transfer {versions.get('s3transfer', '?')}"
    return out


def _py_versions(pkgs: list[str]) -> dict[str, str]:
    if not VENV_PY.exists():
        return {}
    code = (
        "import importlib.metadata as m, sys\n"
        "for p in sys.argv[1:]:\n"
        "    try: print(p, m.version(p))\n"
        "    except Exception: pass\n"
    )
    p = subprocess.run([str(VENV_PY), "-c", code, *pkgs], capture_output=True, text=True)
    return dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)

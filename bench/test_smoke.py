"""The benchmark harness end to end, at smoke size (bench/run.py and bench/tls.py).

Runs `bench/run.py --smoke` (tiny objects, one run, shoal + s5cmd + boto3,
its own servers on its own ports) and checks that it wrote a REPORT.md with
a measured shoal row and no FAILED check. Set SHOAL_BENCH_SMOKE_ARGS to pass
extra flags (e.g. "--no-build" when target/release is already built).
"""
import os
import shlex
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def test_smoke_run_writes_a_clean_report(tmp_path: Path) -> None:
    extra = shlex.split(os.environ.get("SHOAL_BENCH_SMOKE_ARGS", ""))
    p = subprocess.run([sys.executable, str(BENCH / "run.py"), "--smoke", "--out", str(tmp_path), *extra],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    shoal_rows = [l for l in report.splitlines() if l.startswith("|") and "| **shoal** |" in l]
    measured = [l for l in shoal_rows if "ok (" in l]
    assert measured, "no measured shoal row:\n" + report
    failed = [l for l in report.splitlines() if l.startswith("|") and "FAILED" in l]
    assert not failed, "\n".join(failed)
    assert any(tmp_path.glob("*.png")), "no chart was drawn"


def test_tls_smoke_run_counts_connections(tmp_path: Path) -> None:
    """`bench/tls.py --smoke`: MinIO over TLS with a CA made for the run, every
    client told that CA; each small-object row carries its connection and
    handshake counts from the counting forwarder."""
    extra = shlex.split(os.environ.get("SHOAL_BENCH_SMOKE_ARGS", ""))
    p = subprocess.run([sys.executable, str(BENCH / "tls.py"), "--smoke", "--out", str(tmp_path), *extra],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "TLS.md").read_text()
    rows = [l for l in report.splitlines() if l.startswith("| ") and "ok (" in l]
    assert any(l.startswith("| **shoal** |") for l in rows), "no measured shoal row:\n" + report
    failed = [l for l in report.splitlines() if l.startswith("|") and "FAILED" in l]
    assert not failed, "\n".join(failed)
    # The per-object table: every measured row counted at least one connection and one handshake.
    small = report.split("## TLS: download ")[2]
    counted = [l for l in small.splitlines() if l.startswith("| ") and "ok (" in l]
    assert counted, small
    for l in counted:
        cells = [c.strip() for c in l.strip("|").split("|")]
        conns = float(cells[6].split()[0].replace(",", ""))
        full, resumed = (float(x.replace(",", "")) for x in cells[7].split(" + "))
        assert conns > 0 and full > 0 and resumed >= 0, l

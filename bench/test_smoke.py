"""The benchmark harness end to end, at smoke size (bench/run.py and bench/tls.py).

Runs `bench/run.py --smoke` (tiny objects, one run, shoal + s5cmd + boto3,
its own servers on its own ports) and checks that it wrote a REPORT.md with
a measured shoal row and no FAILED check. Set SHOAL_BENCH_SMOKE_ARGS to pass
extra flags (e.g. "--no-build" when target/release is already built).
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent


def test_smoke_run_writes_a_clean_report(tmp_path: Path) -> None:
    extra = shlex.split(os.environ.get("SHOAL_BENCH_SMOKE_ARGS", ""))
    p = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--out", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    shoal_rows = [line for line in report.splitlines() if line.startswith("|") and "| **shoal** |" in line]
    measured = [line for line in shoal_rows if "ok (" in line]
    assert measured, "no measured shoal row:\n" + report
    failed = [line for line in report.splitlines() if line.startswith("|") and "FAILED" in line]
    assert not failed, "\n".join(failed)
    assert any(tmp_path.glob("*.png")), "no chart was drawn"


def test_tls_smoke_run_counts_connections(tmp_path: Path) -> None:
    """`bench/tls.py --smoke`: MinIO over TLS with a CA made for the run, every
    client told that CA; each small-object row carries its connection and
    handshake counts from the counting forwarder."""
    extra = shlex.split(os.environ.get("SHOAL_BENCH_SMOKE_ARGS", ""))
    p = subprocess.run(
        [sys.executable, str(BENCH / "tls.py"), "--smoke", "--out", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "TLS.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and "ok (" in line]
    assert any(line.startswith("| **shoal** |") for line in rows), "no measured shoal row:\n" + report
    failed = [line for line in report.splitlines() if line.startswith("|") and "FAILED" in line]
    assert not failed, "\n".join(failed)
    # The per-object table: every measured row counted at least one connection and one handshake.
    small = report.split("## TLS: download ")[2]
    counted = [line for line in small.splitlines() if line.startswith("| ") and "ok (" in line]
    assert counted, small
    for line in counted:
        cells = [c.strip() for c in line.strip("|").split("|")]
        conns = float(cells[6].split()[0].replace(",", ""))
        full, resumed = (float(x.replace(",", "")) for x in cells[7].split(" + "))
        assert conns > 0 and full > 0 and resumed >= 0, line


def test_py_read_plan_and_local_floor(tmp_path: Path) -> None:
    """bench/py_read_bench.py's parts that need no server: the requests a
    parquet row needs (`_plan`, what `requests-only` sends) and the
    local-files child, on a small dataset of the benchmark's shape."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "ds").mkdir()
    for f in range(2):
        cols = {"id": pa.array(range(40_000), pa.int64())}
        cols.update({f"c{c:02d}": pa.array([float(i % 7 + c) for i in range(40_000)]) for c in range(1, 20)})
        pq.write_table(pa.table(cols), tmp_path / "ds" / f"part-{f:02d}.parquet", row_group_size=10_000)
    sys.path.insert(0, str(BENCH))
    import py_read_bench

    plan = py_read_bench._plan(str(tmp_path))
    sizes = dict(plan["files"])
    assert sorted(sizes) == ["part-00.parquet", "part-01.parquet"]
    rows = plan["rows"]
    # One chunk of c03 per row group; every column's span per row group;
    # the filter (id < 10,000) keeps the first row group of each file.
    assert len(rows["one_col"]) == len(rows["all_cols"]) == 8
    assert len(rows["filter"]) == 2 and all(r in rows["all_cols"] for r in rows["filter"])
    for name, a, b in rows["one_col"] + rows["all_cols"]:
        assert 4 <= a < b <= sizes[name] - 8
    env = dict(os.environ, PYREAD_LOCAL=str(tmp_path))
    p = subprocess.run(
        [sys.executable, str(BENCH / "py_read_bench.py"), "child", "s3", "one_col", "local-files"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[-1])["check"].startswith("rows=80000 cols=1 ")

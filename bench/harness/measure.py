"""Running one client as a child process and measuring it.

Wall time around fork/exit; CPU seconds (user+sys) and peak RSS from the
child's own rusage (`os.wait4`), which also counts grandchildren the child
waited for (gcloud's and python-storage's worker processes); peak RSS is
then the largest single process, not a sum.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass


@dataclass
class Proc:
    rc: int
    wall: float
    cpu: float
    rss_mib: float
    stdout: str
    stderr: str


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 900,
        cwd: str | None = None, capture_stdout: bool = True) -> Proc:
    """Runs argv to completion; a run past `timeout` is killed and reported rc=-9."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    out: list[bytes] = []
    err: list[bytes] = []
    readers = []
    for stream, sink in ((p.stdout, out), (p.stderr, err)):
        if stream is None:
            continue
        t = threading.Thread(target=lambda s=stream, k=sink: k.append(s.read()), daemon=True)
        t.start()
        readers.append(t)

    def kill() -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the child's own session only
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    # Polled rather than blocking so SIGINT/SIGTERM reach the main thread
    # (and stop the servers) at once; the poll adds at most 2 ms to wall time.
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    return Proc(
        rc=p.returncode,
        wall=wall,
        cpu=ru.ru_utime + ru.ru_stime,
        rss_mib=ru.ru_maxrss / 1024,
        stdout=b"".join(out).decode(errors="replace"),
        stderr=b"".join(err).decode(errors="replace"),
    )

"""Running one client as a child process and measuring it.

Wall time around fork/exit; CPU seconds (user+sys) from the child's own
rusage (`os.wait4`), which also counts grandchildren the child waited for
(gcloud's and python-storage's worker processes). Peak RSS is the largest
single process, not a sum, and comes from GNU time (`/usr/bin/time -f %M`)
wrapped around the client: a process forked from this harness starts with
the harness's own resident pages counted in its `ru_maxrss` (~35 MiB here),
which would hide any client smaller than that; one forked from `time`
starts at ~2 MiB. Without GNU time the rusage figure is used (a floor).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass


def _gnu_time() -> str | None:
    try:
        p = subprocess.run(["/usr/bin/time", "--version"], capture_output=True, text=True)
    except OSError:
        return None
    return "/usr/bin/time" if "GNU" in p.stdout + p.stderr else None


GNU_TIME = _gnu_time()


@dataclass
class Proc:
    rc: int
    wall: float
    cpu: float
    rss_mib: float
    stdout: str
    stderr: str


def run(
    argv: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 900,
    cwd: str | None = None,
    capture_stdout: bool = True,
    stdout_fd: int | None = None,
) -> Proc:
    """Runs argv to completion; a run past `timeout` is killed and reported rc=-9.
    `stdout_fd`: where the child's stdout goes instead (a pipe to a checker)."""
    rss_file = None
    if GNU_TIME:
        fd, rss_file = tempfile.mkstemp(prefix="shoal-bench-rss-")
        os.close(fd)
        argv = [GNU_TIME, "-f", "%M", "-o", rss_file, "--", *argv]
    t0 = time.perf_counter()
    out_to = stdout_fd if stdout_fd is not None else subprocess.PIPE if capture_stdout else subprocess.DEVNULL
    # A process group of its own (for the timeout's kill), not a session:
    # with Linux's autogroup scheduling a new session is a new scheduling
    # group, and every multi-threaded client then got at most one of the
    # two cores while the servers were busy (cat -d at +10 ms: 1.76 s in a
    # session, 1.57 s without), a share no client next to remote servers
    # is held to.
    p = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out_to, stderr=subprocess.PIPE, process_group=0
    )
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
    rss_kib = ru.ru_maxrss
    if rss_file:
        try:
            with open(rss_file) as f:  # "Command exited with non-zero status N" may come first
                rss_kib = int(f.read().split()[-1])
        except (OSError, ValueError, IndexError):
            rss_kib = float("nan")  # time itself was killed (a timeout): unknown
        os.unlink(rss_file)
    return Proc(
        rc=p.returncode,
        wall=wall,
        cpu=ru.ru_utime + ru.ru_stime,
        rss_mib=rss_kib / 1024,
        stdout=b"".join(out).decode(errors="replace"),
        stderr=b"".join(err).decode(errors="replace"),
    )

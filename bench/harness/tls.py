"""The TLS scenario's pieces: a private CA made per run, MinIO serving HTTPS
with it, and a TCP forwarder that counts what the clients open.

The CA and the server certificate are made with openssl in the run dir
(the recipe of crates/shoal-cli/tests/cli/network.rs: a CA, a server key, a
certificate for IP:127.0.0.1 and DNS:localhost signed by the CA); MinIO
reads `certs/public.crt` and `certs/private.key` from `--certs-dir`. Each
client is told the CA the way its users would (tools.py: `AWS_CA_BUNDLE`
for shoal, s5cmd and boto3, `--ca-cert` for rclone, `SSL_CERT_FILE` for
obstore).

Connections are counted at a TCP layer the harness controls, not by
sampling `ss`: `ConnCounter` accepts each client connection, opens one to
its upstream (toxiproxy, which adds the latency and passes TLS through as
TCP) and relays bytes both ways. It reads, without changing them, the first
TLS record each way: the ClientHello and the ServerHello. A handshake is
*resumed* when the server accepts the client's pre-shared key (TLS 1.3: a
`pre_shared_key` extension in the ServerHello) or echoes the client's
non-empty session id (TLS 1.2); every other connection that carried a
ServerHello is a full handshake. The counts are taken when the client has
exited, so every connection it made has been accepted and its ServerHello
relayed (the hello is parsed before it is passed on). A connection the
kernel had queued, or one still handshaking, when the client exited is
still this run's: `take()` first waits until every accepted connection has
closed and none waits in the listen queue (the client is gone, so its
sockets are closed), then reads the counts.
"""

from __future__ import annotations

import select
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


def make_ca(d: Path) -> Path:
    """A CA and a server certificate for 127.0.0.1 in `d`; answers the CA's
    PEM path. `d/certs` is what MinIO's `--certs-dir` reads."""
    (d / "certs").mkdir(parents=True, exist_ok=True)
    (d / "ext.cnf").write_text("basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for args in (
        [
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=shoal bench CA",
        ],
        [
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "certs/private.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "certs/public.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    ):
        p = subprocess.run(["openssl", *args], cwd=d, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"openssl {args[0]}: {p.stderr.strip()[-300:]}")
    return d / "ca.crt"


def wait_https(url: str, ca: Path, seconds: float) -> bool:
    """True once `url` answers over TLS verified against `ca` alone."""
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(ca))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx):
                return True
        except Exception:
            time.sleep(0.1)
    return False


@dataclass
class Counts:
    connections: int = 0
    full: int = 0  # TLS handshakes without resumption
    resumed: int = 0
    other: int = 0  # connections closed before a ServerHello passed (or not TLS)


def _record(buf: bytes) -> bytes | None:
    """The body of the first TLS handshake record in buf, b"" if buf is not
    one, None while it is incomplete."""
    if len(buf) < 5:
        return None
    if buf[0] != 0x16:
        return b""
    n = int.from_bytes(buf[3:5], "big")
    return buf[5 : 5 + n] if len(buf) >= 5 + n else None


def _hello(body: bytes, want: int) -> tuple[bytes, dict[int, bytes]] | None:
    """(session id, extensions) of a ClientHello (1) / ServerHello (2)."""
    if len(body) < 4 or body[0] != want:
        return None
    i = 4 + 2 + 32  # handshake header, version, random
    sid = body[i + 1 : i + 1 + body[i]]
    i += 1 + body[i]
    if want == 1:  # cipher suites, compression methods
        i += 2 + int.from_bytes(body[i : i + 2], "big")
        i += 1 + body[i]
    else:  # one cipher suite, one compression method
        i += 3
    exts: dict[int, bytes] = {}
    if i + 2 <= len(body):
        end = i + 2 + int.from_bytes(body[i : i + 2], "big")
        i += 2
        while i + 4 <= min(end, len(body)):
            t, n = int.from_bytes(body[i : i + 2], "big"), int.from_bytes(body[i + 2 : i + 4], "big")
            exts[t] = body[i + 4 : i + 4 + n]
            i += 4 + n
    return sid, exts


class ConnCounter:
    """A counting TCP forwarder on 127.0.0.1 (a port of its own) in front of
    `upstream_port`. `take()` answers the counts since the last take."""

    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.counts = Counts()
        self.live = 0  # connections accepted and not yet closed both ways
        threading.Thread(target=self._accept, daemon=True).start()

    def take(self, settle: float = 30) -> Counts:
        """The counts since the last take, once the connections of a client
        that has exited are all accepted and closed (at most `settle` s)."""
        end = time.monotonic() + settle
        quiet = 0
        while time.monotonic() < end and quiet < 3:
            with self.lock:
                idle = self.live == 0
            pending = bool(select.select([self.sock], [], [], 0)[0])
            quiet = quiet + 1 if idle and not pending else 0
            time.sleep(0.02)
        with self.lock:
            c, self.counts = self.counts, Counts()
        return c

    def close(self) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.counts.connections += 1
                self.live += 1
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                with self.lock:
                    self.live -= 1
                    self.counts.other += 1
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello: dict = {}
            done = threading.Barrier(2, action=lambda c=c, u=u: self._closed(c, u))
            threading.Thread(target=self._pump, args=(c, u, hello, True, done), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, hello, False, done), daemon=True).start()

    def _closed(self, c: socket.socket, u: socket.socket) -> None:
        c.close()
        u.close()
        with self.lock:
            self.live -= 1

    def _pump(
        self, src: socket.socket, dst: socket.socket, hello: dict, from_client: bool, done: threading.Barrier
    ) -> None:
        buf = b""
        looking = True
        try:
            while data := src.recv(1 << 16):
                if looking:
                    buf += data
                    body = _record(buf)
                    if body is not None:
                        looking = False
                        self._saw(body, hello, from_client)
                dst.sendall(data)
        except OSError:
            pass
        if looking and not from_client:
            self._saw(b"", hello, False)
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            done.wait(timeout=600)
        except threading.BrokenBarrierError:
            pass

    def _saw(self, body: bytes, hello: dict, from_client: bool) -> None:
        if from_client:
            hello["client"] = _hello(body, 1)
            return
        server = _hello(body, 2)
        with self.lock:
            if server is None:
                self.counts.other += 1
                return
            sid, exts = server
            tls13 = exts.get(43) == b"\x03\x04"  # supported_versions: TLS 1.3
            client = hello.get("client")
            resumed = 41 in exts if tls13 else bool(sid) and client is not None and client[0] == sid
            if resumed:
                self.counts.resumed += 1
            else:
                self.counts.full += 1

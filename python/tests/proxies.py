"""A small forwarding HTTP proxy for the tests that need one between the
package and a server: counting what it relays (test_network.py) or
damaging a response body (test_verify.py). Absolute-form requests only
(plain HTTP); the CLI's tests cover CONNECT and TLS."""

from __future__ import annotations

import socket
import threading

#: The variables a proxy can come from; tests that bring their own clear them.
PROXY_VARS = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
]


class RelayProxy:
    """Relays each connection to the server its first request names.
    Subclasses look at each request head (:meth:`seen`) and may change the
    server's bytes on their way back (:meth:`back`)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def seen(self, lines: list[str]) -> None:
        """Called with the first request's head lines of each connection."""

    def back(self, data: bytes, state: dict) -> bytes:
        """The server's bytes as sent to the client (``state`` lives as
        long as the connection)."""
        return data

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(c,), daemon=True).start()

    def _relay(self, c: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(1)
            if not b:
                return
            head += b
        lines = head.decode("latin-1").split("\r\n")
        host, port = lines[0].split()[1].removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
        u = socket.create_connection((host, int(port)))
        with self.lock:
            self.seen(lines)
        u.sendall(head)

        def pipe(a: socket.socket, b: socket.socket, change) -> None:
            state: dict = {}
            try:
                while data := a.recv(65536):
                    b.sendall(change(data, state))
            except OSError:
                pass
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=pipe, args=(u, c, self.back), daemon=True).start()
        pipe(c, u, lambda d, _: d)

    def close(self) -> None:
        self.sock.close()

"""Daily use from Python, as the CLI has it (crates/shoal-cli/tests/cli/daily.rs
and metadata.rs): presigned URLs (fetched with urllib, no credentials),
buckets listed as directories, writes that store a type, cache control,
disposition, metadata and storage class on every write path, requester
pays on the wire, and one request for a read whose range is known.

The recorder and the counting proxy below are plain HTTP servers in the
test: the recorder answers 404 to everything (it only shows what was sent),
the proxy passes every request to the real server and counts them."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import shoal
import shoal.fsspec
from shoal.fsspec import ShoalFileSystem

from .conftest import GCS, S3, _need


def path_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}/{rest}"


def fs_for(session: shoal.Session | None = None) -> ShoalFileSystem:
    if session is None:
        return ShoalFileSystem(skip_instance_cache=True)
    return ShoalFileSystem(session=session, skip_instance_cache=True)


def fetch(url: str, data: bytes | None = None, method: str = "GET") -> tuple[int, bytes]:
    """``url`` with plain urllib: no credentials, no proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert msg and "\n" not in msg, repr(msg)
    return msg


# -- 1. presigned URLs ----------------------------------------------------


def test_presigned_s3_url_is_served_without_credentials_and_only_as_signed(s3_bucket):
    data = os.urandom(10_000)
    url = f"{s3_bucket}/dir/a b+c.bin"
    shoal.put(url, data)
    signed = shoal.presign(url, expires=600)
    assert "X-Amz-Expires=600" in signed, signed
    assert fetch(signed) == (200, data)
    # fsspec's sign(path, expiration): the same URL shape.
    fs = fs_for()
    by_fs = fs.sign(path_of(url), expiration=100)
    assert "X-Amz-Expires=100" in by_fs, by_fs
    assert fetch(by_fs) == (200, data)

    # Tampered: another key, another expiry, a changed signature.
    other = signed.replace("/dir/a%20b%2Bc.bin", "/dir/other", 1)
    assert other != signed
    longer = signed.replace("X-Amz-Expires=600", "X-Amz-Expires=6000", 1)
    at = signed.index("X-Amz-Signature=") + len("X-Amz-Signature=")
    flipped = signed[:at] + ("1" if signed[at] == "0" else "0") + signed[at + 1 :]
    for bad in (other, longer, flipped):
        code, body = fetch(bad)
        assert code == 403, (bad, body)

    # method="PUT": a plain upload through the URL, read back by shoal.
    up = f"{s3_bucket}/uploaded"
    put_url = shoal.presign(up, method="PUT")
    assert fetch(put_url, data=b"through a presigned PUT", method="PUT")[0] == 200
    assert shoal.cat(up) == b"through a presigned PUT"
    assert fetch(fs.sign(path_of(up), 60, method="put"), data=b"again", method="PUT")[0] == 200
    assert shoal.cat(up) == b"again"
    # A GET URL does not allow a PUT.
    assert fetch(signed, data=b"x", method="PUT")[0] == 403


def _service_account_file(tmp_path) -> str:
    pem = tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(pem)],
        check=True,
        capture_output=True,
    )
    key = {
        "type": "service_account",
        "project_id": "shoal-test",
        "private_key_id": "test",
        "private_key": pem.read_text(),
        "client_email": "signer@shoal-test.iam.gserviceaccount.com",
    }
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(key))
    return str(path)


def test_presigned_gcs_url_has_the_v4_shape_and_needs_a_key(gs_bucket, tmp_path, monkeypatch):
    data = os.urandom(5_000)
    url = f"{gs_bucket}/dir/obj.bin"
    shoal.put(url, data)
    bucket = gs_bucket.partition("://")[2]

    # No key configured: one line saying what to configure.
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no gcloud login file either
    with pytest.raises(shoal.UnauthenticatedError) as e:
        shoal.presign(url)
    assert "service-account key" in one_line(e) and "GOOGLE_APPLICATION_CREDENTIALS" in str(e.value)
    # A user's login holds no key to sign with.
    user = tmp_path / "user.json"
    user.write_text('{"type":"authorized_user","client_id":"x","client_secret":"y","refresh_token":"z"}')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(user))
    with pytest.raises(shoal.UnauthenticatedError) as e:
        fs_for().sign(path_of(url))
    msg = one_line(e)
    assert "authorized_user" in msg and "service-account key" in msg
    assert "refresh_token" not in msg and '"z"' not in msg

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", _service_account_file(tmp_path))
    signed = shoal.presign(url, expires=7200)
    assert signed.startswith(f"{GCS}/{bucket}/dir/obj.bin?X-Goog-Algorithm=GOOG4-RSA-SHA256&"), signed
    for p in (
        "&X-Goog-Credential=signer%40shoal-test.iam.gserviceaccount.com%2F",
        "%2Fauto%2Fstorage%2Fgoog4_request&",
        "&X-Goog-Expires=7200&X-Goog-SignedHeaders=host&X-Goog-Signature=",
    ):
        assert p in signed, (p, signed)
    assert len(signed.rsplit("X-Goog-Signature=", 1)[1]) == 512, "a 2048-bit RSA signature in hex"
    assert "PRIVATE" not in signed
    assert "X-Goog-Expires=100&" in fs_for().sign(path_of(url))
    # fake-gcs-server checks no signature, but serves the signed URL's path.
    assert fetch(signed) == (200, data)


def test_presign_refuses_bad_values_in_one_line(s3_bucket):
    url = f"{s3_bucket}/k"
    for expires in (-1, 0, 7 * 86400 + 1):
        with pytest.raises(ValueError) as e:
            shoal.presign(url, expires=expires)
        assert "1 s to 7 days" in one_line(e) and url in str(e.value)
    assert "X-Amz-Expires=604800" in shoal.presign(url, expires=7 * 86400)
    import datetime

    assert "X-Amz-Expires=5400" in shoal.presign(url, expires=datetime.timedelta(minutes=90))
    for expires in ("1h", 1.5, True):
        with pytest.raises(TypeError) as e:
            shoal.presign(url, expires=expires)
        assert "expires" in one_line(e)
    with pytest.raises(ValueError) as e:
        shoal.presign(url, method="PATCH")
    assert "GET, PUT, HEAD, DELETE or POST" in one_line(e)
    # The URL shapes only GCS has are refused on S3, not ignored.
    for shape in (
        {"virtual_hosted_style": True},
        {"bucket_bound_hostname": "cdn.example"},
        {"api_access_endpoint": "https://elsewhere"},
    ):
        with pytest.raises(shoal.UnsupportedError) as e:
            shoal.presign(url, **shape)
        assert "GCS options" in one_line(e), shape
    with pytest.raises(ValueError) as e:
        shoal.presign(url, version="v2")
    assert "only V4" in one_line(e)
    with pytest.raises(ValueError) as e:
        shoal.presign(f"{s3_bucket}/*.csv")
    assert "glob" in one_line(e)
    # A bucket's URL is a listing (GET), never anything else: on S3 a
    # DELETE of it would delete the bucket.
    listing = shoal.presign(s3_bucket)
    assert fetch(listing)[0] == 200 and b"ListBucketResult" in fetch(listing)[1]
    for method in ("DELETE", "PUT"):
        with pytest.raises(ValueError) as e:
            shoal.presign(s3_bucket, method=method)
        assert "names a bucket" in one_line(e)
    fs = fs_for()
    with pytest.raises(ValueError):
        fs.sign(path_of(url), expiration=-5)
    with pytest.raises(TypeError, match="'colour'"):
        fs.sign(path_of(url), colour="red")


# -- 2. buckets -------------------------------------------------------------


def test_ls_of_a_store_lists_its_buckets_as_directories(bucket):
    scheme, _, name = bucket.partition("://")
    other = shoal.ls(f"{scheme}://")
    assert f"{bucket}/" in other.prefixes and not other.objects
    assert f"{bucket}/" in shoal.ls(f"{scheme}://", session=shoal.session()).prefixes
    fs = fs_for()
    for root in (scheme, f"{scheme}://", ""):
        entries = fs.ls(root, detail=True)
        mine = [e for e in entries if e["name"] == f"{scheme}/{name}"]
        assert mine and mine[0]["type"] == "directory", (root, entries)
        assert all(e["type"] == "directory" for e in entries)
    assert f"{scheme}/{name}" in fs.ls(scheme, detail=False)
    # ls("") holds both stores' buckets.
    assert {e.split("/")[0] for e in fs.ls("", detail=False)} == {"gs", "s3"}
    # The gs:// and s3:// filesystems of register(override=True): bare names.
    cls = shoal.fsspec.ShoalGCSFileSystem if scheme == "gs" else shoal.fsspec.ShoalS3FileSystem
    bound = cls(skip_instance_cache=True)
    for root in ("", f"{scheme}://"):
        assert name in bound.ls(root, detail=False), root
    assert bound.info(name)["type"] == "directory"


# -- 3. what a write stores -------------------------------------------------

#: Each server's storage class that it keeps and reports (MinIO answers
#: STANDARD with no header at all).
CLASS = {"gs": "NEARLINE", "s3": "REDUCED_REDUNDANCY"}


def _keywords(scheme: str) -> dict:
    return {
        "cache_control": "public, max-age=60",
        "content_disposition": 'attachment; filename="r.bin"',
        "metadata": {"owner": "web-team", "build": "42"},
        "storage_class": CLASS[scheme].lower(),
    }


def _assert_kept(info: dict, scheme: str, content_type: str) -> None:
    assert info["content_type"] == content_type, info
    assert info["cache_control"] == "public, max-age=60", info
    assert info["content_disposition"] == 'attachment; filename="r.bin"', info
    # A file's upload adds the file's time, as gcloud and rclone record it
    # (docs/round-trips.md); what the caller gave is kept as given.
    given = {k: v for k, v in info["metadata"].items() if k not in ("goog-reserved-file-mtime", "mtime")}
    assert given == {"owner": "web-team", "build": "42"}, info
    assert info["storage_class"] == CLASS[scheme], info


def test_every_write_path_stores_what_it_is_given(bucket, tmp_path, monkeypatch):
    scheme = bucket.partition("://")[0]
    kw = _keywords(scheme)
    fs = fs_for()
    small = b"<p>small</p>"
    # Above the 16 MiB part size: S3 multipart; on fake-gcs-server, a
    # resumable session (put) or a composite upload (files).
    big = os.urandom(17 << 20)
    (tmp_path / "small.html").write_bytes(small)
    (tmp_path / "big.css").write_bytes(big)

    def written(key: str, how) -> dict:
        url = f"{bucket}/{key}"
        how(url, path_of(url))
        return fs.info(path_of(url))

    def spilled_open(u, p):
        # Past the spill size, a file written is uploaded from a temporary
        # file (multipart): typed by the object's name, not that file's.
        monkeypatch.setattr(shoal.fsspec, "_SPILL", 1 << 20)
        with fs.open(p, "wb", **kw) as f:
            for i in range(0, len(big), 4 << 20):
                f.write(big[i : i + (4 << 20)])
        monkeypatch.undo()

    cases = [
        ("put.html", lambda u, p: shoal.put(u, small, **kw), "text/html", small),
        ("put-typed.html", lambda u, p: shoal.put(u, small, content_type="text/plain", **kw), "text/plain", small),
        ("put-big.css", lambda u, p: shoal.put(u, big, **kw), "text/css", big),
        ("upload.bin", lambda u, p: shoal.upload(tmp_path / "small.html", u, **kw), "text/html", small),
        ("pipe.html", lambda u, p: fs.pipe_file(p, small, **kw), "text/html", small),
        (
            "pipe.json",
            lambda u, p: fs.pipe(p, small, content_type="application/x-custom", **kw),
            "application/x-custom",
            small,
        ),
        ("put_file.bin", lambda u, p: fs.put_file(str(tmp_path / "small.html"), p, **kw), "text/html", small),
        ("put_file-big.bin", lambda u, p: fs.put_file(str(tmp_path / "big.css"), p, **kw), "text/css", big),
        ("put.bin", lambda u, p: fs.put(str(tmp_path / "small.html"), p, **kw), "text/html", small),
        ("open.html", lambda u, p: _write_open(fs, p, small, kw), "text/html", small),
        ("open-text.css", lambda u, p: _write_text(fs, p, kw), "text/css", b"p{}"),
        ("open-big.css", spilled_open, "text/css", big),
    ]
    for key, how, content_type, data in cases:
        info = written(key, how)
        _assert_kept(info, scheme, content_type)
        assert info["size"] == len(data), key
        if data is big and scheme == "s3":
            assert info["version"].endswith('-2"'), (key, info)  # assembled from 2 parts
    assert shoal.cat(f"{bucket}/open-big.css") == big
    assert shoal.cat(f"{bucket}/put_file-big.bin") == big
    # stat shows the same.
    st = shoal.stat(f"{bucket}/put.html")
    assert (st.content_type, st.cache_control, st.metadata["owner"]) == ("text/html", "public, max-age=60", "web-team")
    # Without keywords: a guessed type and nothing else.
    shoal.put(f"{bucket}/plain.css", b"p{}")
    info = fs.info(path_of(f"{bucket}/plain.css"))
    assert info["content_type"] == "text/css" and info["metadata"] == {} and info["cache_control"] is None


def _write_open(fs, p, data, kw):
    with fs.open(p, "wb", **kw) as f:
        f.write(data)


def _write_text(fs, p, kw):
    with fs.open(p, "w", **kw) as f:
        f.write("p{}")


def test_write_keywords_are_refused_by_name_and_nothing_is_written(s3_bucket, tmp_path):
    fs = fs_for()
    url = f"{s3_bucket}/k.txt"
    p = path_of(url)
    (tmp_path / "f").write_bytes(b"x")
    unknown = [
        lambda: fs.pipe_file(p, b"x", content_typ="text/plain"),
        lambda: fs.pipe(p, b"x", content_typ="text/plain"),
        lambda: fs.put_file(str(tmp_path / "f"), p, content_typ="text/plain"),
        lambda: fs.open(p, "wb", content_typ="text/plain"),
        lambda: shoal.put(url, b"x", content_typ="text/plain"),
    ]
    for call in unknown:
        with pytest.raises(TypeError) as e:
            call()
        assert "'content_typ'" in one_line(e)
    wrong_types = [
        {"metadata": [("a", "b")]},
        {"metadata": {"a": 1}},
        {"metadata": {1: "a"}},
        {"cache_control": 60},
        {"storage_class": b"STANDARD"},
    ]
    for kw in wrong_types:
        for call in (
            lambda kw=kw: fs.pipe_file(p, b"x", **kw),
            lambda kw=kw: fs.open(p, "wb", **kw),
            lambda kw=kw: shoal.put(url, b"x", **kw),
            lambda kw=kw: fs.put_file(str(tmp_path / "f"), p, **kw),
        ):
            with pytest.raises(TypeError) as e:
                call()
            assert next(iter(kw)) in one_line(e), (kw, str(e.value))
    bad_values = [
        ({"metadata": {"a b": "c"}}, "metadata key 'a b'"),
        ({"metadata": {"k": "line\nbreak"}}, "printable ASCII"),
        ({"cache_control": "a\r\nx-evil: 1"}, "printable ASCII"),
        ({"content_type": ""}, "empty"),
        ({"storage_class": "FROZEN"}, "unknown storage class 'FROZEN'"),
        ({"storage_class": "nearline"}, "not a s3:// storage class"),
    ]
    for kw, words in bad_values:
        for call in (
            lambda kw=kw: fs.pipe_file(p, b"x", **kw),
            lambda kw=kw: fs.open(p, "wb", **kw),
            lambda kw=kw: shoal.put(url, b"x", **kw),
            lambda kw=kw: fs.put_file(str(tmp_path / "f"), p, **kw),
        ):
            with pytest.raises(ValueError) as e:
                call()
            msg = one_line(e)
            assert words in msg and url in msg, (kw, msg)
    with pytest.raises(FileNotFoundError):
        shoal.stat(url)


# -- 4. requester pays ------------------------------------------------------


class Recorder:
    """An HTTP server that keeps each request's head and answers 404: it
    shows what reached the wire, and is no store."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.heads: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                self.heads.append(buf.decode("latin-1"))
                conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")

    def take(self) -> list[str]:
        heads, self.heads = self.heads, []
        return heads

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def recorder():
    r = Recorder()
    yield r
    r.close()


def test_requester_pays_reaches_the_wire(recorder, monkeypatch):
    # S3: the header, signed, on each request; from Session keywords and
    # from the configuration keywords of the top-level functions.
    s3 = dict(endpoint_url=recorder.url, key="AKIDTEST", secret="secret", attempts=1)
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("s3://b/k", session=shoal.Session(request_payer=True, **s3))
    with pytest.raises(shoal.ShoalError):
        shoal.ls("s3://b/p/", request_payer=True, **s3)
    with pytest.raises(shoal.ShoalError):
        fs_for(shoal.Session(request_payer=True, **s3)).cat_file("s3/b/k", 0, 10)
    heads = recorder.take()
    assert len(heads) == 3, heads
    for h in heads:
        lower = h.lower()
        assert "\r\nx-amz-request-payer: requester\r\n" in lower, h
        assert ";x-amz-request-payer" in lower, f"signed: {h}"
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("s3://b/k", session=shoal.Session(**s3))
    (h,) = recorder.take()
    assert "request-payer" not in h.lower(), h

    # GCS: userProject on each request, from the keyword or gcloud's
    # variable (the keyword wins).
    gs = dict(gcs_endpoint_url=recorder.url, attempts=1)
    monkeypatch.delenv("CLOUDSDK_BILLING_QUOTA_PROJECT", raising=False)
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("gs://b/k", session=shoal.Session(billing_project="payer-1", **gs))
    with pytest.raises(shoal.ShoalError):
        shoal.ls("gs://b/p/", billing_project="payer-1", **gs)
    monkeypatch.setenv("CLOUDSDK_BILLING_QUOTA_PROJECT", "payer-2")
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("gs://b/k", session=shoal.Session(**gs))
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("gs://b/k", session=shoal.Session(billing_project="payer-3", **gs))
    monkeypatch.delenv("CLOUDSDK_BILLING_QUOTA_PROJECT")
    with pytest.raises(shoal.NotFoundError):
        shoal.stat("gs://b/k", session=shoal.Session(**gs))
    lines = [h.split("\r\n", 1)[0] for h in recorder.take()]
    assert len(lines) == 5, lines
    assert "userProject=payer-1" in lines[0] and "userProject=payer-1" in lines[1], lines
    assert "userProject=payer-2" in lines[2], lines
    assert "userProject=payer-3" in lines[3] and "payer-2" not in lines[3], lines
    assert "userProject" not in lines[4], lines


def test_requester_pays_keywords_are_kept_and_checked():
    s = shoal.Session(billing_project="payer-1", request_payer=True)
    assert s.kwargs["billing_project"] == "payer-1" and s.kwargs["request_payer"] is True
    import pickle

    assert pickle.loads(pickle.dumps(s)).kwargs == s.kwargs
    for bad in ("", "has space"):
        with pytest.raises(ValueError) as e:
            shoal.Session(billing_project=bad)
        assert "billing_project" in one_line(e)


# -- 5. one request for a known range ---------------------------------------


class _Forward(BaseHTTPRequestHandler):
    """Passes each request to the server (same path, headers and body,
    so signatures still hold) and records its method and path."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _forward(self) -> None:
        self.server.seen.append((self.command, self.path))
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else None
        up = http.client.HTTPConnection(*self.server.upstream, timeout=60)
        up.request(self.command, self.path, body=body, headers={k: v for k, v in self.headers.items()})
        resp = up.getresponse()
        data = resp.read()
        up.close()
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() in ("transfer-encoding", "connection") or (
                k.lower() == "content-length" and self.command != "HEAD"
            ):
                continue
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward


@pytest.fixture
def counted():
    """``counted(scheme)``: a session whose requests to that server pass
    through a counting proxy, and the list of ``(method, path)`` it saw."""
    servers = []

    def make(scheme: str):
        target = urllib.parse.urlsplit(GCS if scheme == "gs" else S3)
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Forward)
        srv.daemon_threads = True
        srv.seen = []
        srv.upstream = (target.hostname, target.port)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        ep = f"http://127.0.0.1:{srv.server_address[1]}"
        kw = {"gcs_endpoint_url": ep} if scheme == "gs" else {"s3_endpoint_url": ep}
        return shoal.Session(**kw), srv.seen

    yield make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_a_read_of_a_known_range_is_one_request(bucket, counted):
    scheme = bucket.partition("://")[0]
    _need(GCS if scheme == "gs" else S3, scheme)
    data = os.urandom(100_000)
    url = f"{bucket}/r.bin"
    shoal.put(url, data)
    session, seen = counted(scheme)
    fs = fs_for(session)
    p = path_of(url)

    def requests(call) -> list:
        seen.clear()
        call()
        return list(seen)

    # cat_file with start and end: one ranged GET, no metadata request.
    assert len(requests(lambda: fs.cat_file(p, 10, 1_000) == data[10:1_000] or pytest.fail("bytes"))) == 1
    assert fs.cat_file(p, 10, 1_000) == data[10:1_000]
    # Past the end: cut at it, still one request.
    assert len(requests(lambda: fs.cat_file(p, 99_000, 200_000) == data[99_000:] or pytest.fail("tail"))) == 1
    assert fs.cat_file(p, 99_000, 200_000) == data[99_000:]
    assert shoal.cat(url, 5, 50, session=session) == data[5:50]
    # Starting past the end: no bytes (the 416, then the metadata).
    assert fs.cat_file(p, 200_000, 300_000) == b""
    # The whole object from 0 to its size: checked against its CRC32C.
    assert len(requests(lambda: fs.cat_file(p, 0, len(data)) == data or pytest.fail("whole"))) == 1

    # A file read: its metadata once (size, version), then one GET per block.
    def read_all():
        with fs.open(p, "rb", block_size=1 << 20) as f:
            assert f.read() == data

    got = requests(read_all)
    assert len(got) == 2, got
    if scheme == "s3":
        assert [m for m, _ in got] == ["HEAD", "GET"], got
    else:
        assert "alt=media" not in got[0][1] and "alt=media" in got[1][1], got
    # A range counted from the end needs the size first: two requests.
    assert len(requests(lambda: fs.cat_file(p, -10) == data[-10:] or pytest.fail("suffix"))) == 2

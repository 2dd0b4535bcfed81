"""Proxies through the package: the CLI's variables, and ``proxy=`` /
``ca_bundle=`` on a session. A small forwarding proxy written here counts
what it relays (the CLI's tests cover CONNECT and TLS)."""

from __future__ import annotations

import pytest

import shoal
from shoal import _shoal
from shoal.errors import InvalidInputError

from .proxies import PROXY_VARS, RelayProxy


class CountingProxy(RelayProxy):
    """Counts the connections it relays and the ``Proxy-Authorization``
    it is sent."""

    def __init__(self) -> None:
        self.relayed = 0
        self.auths: list[str | None] = []
        super().__init__()

    def seen(self, lines: list[str]) -> None:
        self.relayed += 1
        self.auths.append(
            next((h.split(":", 1)[1].strip() for h in lines if h.lower().startswith("proxy-authorization:")), None)
        )


@pytest.fixture
def proxy():
    p = CountingProxy()
    yield p
    p.close()


@pytest.fixture
def direct_env(monkeypatch):
    """No proxy variable from the caller's environment."""
    for v in PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_proxy_variables_are_honoured(bucket, proxy, direct_env):
    shoal.put(f"{bucket}/k", b"through the proxy")
    direct_env.setenv("HTTP_PROXY", proxy.url)
    s = _shoal.Session()  # a new session reads the environment again
    assert shoal.cat(f"{bucket}/k", session=s) == b"through the proxy"
    assert proxy.relayed > 0

    direct_env.setenv("NO_PROXY", "127.0.0.1")
    before = proxy.relayed
    s = _shoal.Session()
    assert shoal.cat(f"{bucket}/k", session=s) == b"through the proxy"
    assert proxy.relayed == before


def test_proxy_keyword_with_credentials(bucket, proxy, direct_env):
    shoal.put(f"{bucket}/k", b"x")
    with_creds = proxy.url.replace("http://", "http://alice:pr0xy-s3cret@")
    s = _shoal.Session(proxy=with_creds)
    assert [o.key for o in shoal.ls(bucket, session=s).objects] == ["k"]
    assert proxy.relayed > 0
    assert set(proxy.auths) == {"Basic YWxpY2U6cHIweHktczNjcmV0"}
    assert "pr0xy-s3cret" not in repr(s)


def test_bad_ca_bundle_and_proxy_are_named(bucket, tmp_path, direct_env):
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificate here\n")
    with pytest.raises(InvalidInputError, match="ca_bundle="):
        shoal.ls(bucket, session=_shoal.Session(ca_bundle=str(empty)))
    with pytest.raises(InvalidInputError, match="proxy=") as e:
        shoal.ls(bucket, session=_shoal.Session(proxy="ftp://alice:hunter2@proxy.corp"))
    assert "hunter2" not in str(e.value)

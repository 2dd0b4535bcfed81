"""Google's V4 signing conformance cases through fsspec's ``sign``.

The 29 ``signingV4Tests`` of ``conformance/gcs/v4_signatures.json`` (the
shared test data) are signed by the Rust signer in shoal-gcs's own tests;
here each case goes in as a user of fsspec writes it, with the keywords of
Google's ``Blob.generate_signed_url`` that gcsfs passes on, signed with the
file's dummy service-account key at the case's fixed time. RSA PKCS#1 v1.5
is deterministic, so the URL, signature included, must match byte for byte.
Signing is local: no server is needed.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib

import pytest

import shoal
from shoal.fsspec import ShoalFileSystem

SHARED = pathlib.Path(os.environ.get("SHOAL_SHARED", pathlib.Path(__file__).resolve().parents[3] / "shared"))
CASES = SHARED / "conformance" / "gcs" / "v4_signatures.json"
KEY = SHARED / "conformance" / "gcs" / "test_service_account.not-a-test.json"


def _cases() -> list[dict]:
    if not CASES.exists():
        return []
    return json.loads(CASES.read_text())["signingV4Tests"]


def _endpoint(case: dict) -> str:
    """The ``scheme://host`` the case's client names: a hostname, else the
    client endpoint, else the emulator host, else ``storage.`` + the
    universe domain; the scheme is the chosen URL's, else the case's, else
    https (the rule of Google's clients the cases describe)."""
    for name in ("hostname", "clientEndpoint", "emulatorHostname"):
        if case.get(name):
            chosen = case[name]
            break
    else:
        chosen = f"storage.{case['universeDomain']}" if case.get("universeDomain") else "storage.googleapis.com"
    if "://" in chosen:
        return chosen.rstrip("/")
    return f"{case.get('scheme', 'https')}://{chosen}"


def _keywords(case: dict) -> dict:
    kw: dict = {
        "method": case["method"],
        "signed_at": datetime.datetime.fromisoformat(case["timestamp"].replace("Z", "+00:00")),
    }
    if case.get("headers"):
        kw["headers"] = case["headers"]
    if case.get("queryParameters"):
        kw["query_parameters"] = case["queryParameters"]
    style = case.get("urlStyle", "PATH_STYLE")
    if style == "BUCKET_BOUND_HOSTNAME":
        kw["bucket_bound_hostname"] = case["bucketBoundHostname"]
        kw["scheme"] = case.get("scheme", "http")
    else:
        kw["api_access_endpoint"] = _endpoint(case)
        if style == "VIRTUAL_HOSTED_STYLE":
            kw["virtual_hosted_style"] = True
    return kw


@pytest.mark.skipif(not CASES.exists(), reason=f"no {CASES} (the shared test data)")
@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["description"])
def test_googles_v4_case_through_fsspec_sign(case, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(KEY))
    fs = ShoalFileSystem(skip_instance_cache=True)
    path = f"gs/{case['bucket']}"
    if "object" in case:
        path += f"/{case['object']}"
    url = fs.sign(path, case["expiration"], **_keywords(case))
    assert url == case["expectedUrl"]


@pytest.mark.skipif(not CASES.exists(), reason=f"no {CASES} (the shared test data)")
def test_shoal_presign_takes_the_same_keywords(monkeypatch):
    # The module function and its asyncio twin sign the same URL.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(KEY))
    case = next(c for c in _cases() if c["description"] == "Simple headers")
    kw = _keywords(case)
    method = kw.pop("method")
    url = f"gs://{case['bucket']}/{case['object']}"
    assert shoal.presign(url, case["expiration"], method, **kw) == case["expectedUrl"]
    import asyncio

    assert asyncio.run(shoal.presign_async(url, case["expiration"], method, **kw)) == case["expectedUrl"]
    # Google's shorthands land where its own client puts them.
    short = shoal.presign(url, 60, "PUT", content_type="text/csv", response_disposition="attachment", signed_at=0)
    assert "X-Goog-SignedHeaders=content-type%3Bhost&" in short
    assert "&response-content-disposition=attachment&" in short
    with pytest.raises(ValueError) as e:
        shoal.presign(url, signed_at=datetime.datetime(2020, 1, 1))
    assert "time zone" in str(e.value)
    with pytest.raises(ValueError) as e:
        shoal.presign(url, virtual_hosted_style=True, bucket_bound_hostname="cdn.example")
    assert "not both" in str(e.value)

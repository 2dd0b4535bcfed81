"""Fixtures: fresh buckets on the local servers scripts/servers.sh runs.

scripts/test.sh exports SHOAL_TEST_GCS / SHOAL_TEST_S3 (+ key, secret).
Without them the server tests are skipped, unless SHOAL_REQUIRE_SERVERS=1
(CI), where a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid

import pytest

GCS = os.environ.get("SHOAL_TEST_GCS")
S3 = os.environ.get("SHOAL_TEST_S3")

# The same configuration the CLI reads, set before any store is built (and
# inherited by Dask worker processes).
if GCS:
    os.environ["STORAGE_EMULATOR_HOST"] = GCS
    # The project whose buckets `ls("gs://")` lists (the emulator takes any).
    os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "shoal-test")
if S3:
    os.environ["AWS_ENDPOINT_URL"] = S3
    os.environ["AWS_ACCESS_KEY_ID"] = os.environ.get("SHOAL_TEST_S3_KEY", "minioadmin")
    os.environ["AWS_SECRET_ACCESS_KEY"] = os.environ.get("SHOAL_TEST_S3_SECRET", "minioadmin")
    os.environ.setdefault("AWS_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

import shoal  # noqa: E402


def _need(server: str | None, name: str) -> None:
    if not server:
        if os.environ.get("SHOAL_REQUIRE_SERVERS") == "1":
            pytest.fail(f"{name} test server not configured (run through scripts/test.sh)")
        pytest.skip(f"{name} test server not configured")


def new_bucket(scheme: str) -> str:
    url = f"{scheme}://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(url)
    return url


@pytest.fixture(params=["gs", "s3"])
def bucket(request) -> str:
    """A fresh, empty bucket URL on each server (``gs://py-…``, ``s3://py-…``)."""
    _need(GCS if request.param == "gs" else S3, request.param)
    return new_bucket(request.param)


@pytest.fixture
def gs_bucket() -> str:
    _need(GCS, "gs")
    return new_bucket("gs")


@pytest.fixture
def s3_bucket() -> str:
    _need(S3, "s3")
    return new_bucket("s3")

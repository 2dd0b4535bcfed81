"""fsspec's own abstract test-suite (copy, get, put, open, pipe, mv) on
ShoalFileSystem, against MinIO and fake-gcs-server."""

from __future__ import annotations

import uuid

import fsspec.tests.abstract as abstract
import pytest

import shoal
from shoal.fsspec import ShoalFileSystem

from .conftest import GCS, S3, _need


class ShoalFixtures(abstract.AbstractFixtures):
    scheme = "s3"

    @pytest.fixture(scope="class")
    def _bucket(self):
        _need(S3 if self.scheme == "s3" else GCS, self.scheme)
        name = f"py-abs-{uuid.uuid4().hex[:10]}"
        shoal.mb(f"{self.scheme}://{name}")
        return f"{self.scheme}/{name}"

    @pytest.fixture
    def fs(self, _bucket):
        return ShoalFileSystem()

    @pytest.fixture
    def fs_path(self, _bucket):
        return f"{_bucket}/t-{uuid.uuid4().hex[:8]}"

    @pytest.fixture
    def supports_empty_directories(self):
        return False


class TestS3Copy(abstract.AbstractCopyTests, ShoalFixtures):
    pass


class TestS3Get(abstract.AbstractGetTests, ShoalFixtures):
    pass


class TestS3Put(abstract.AbstractPutTests, ShoalFixtures):
    pass


class TestS3Open(abstract.AbstractOpenTests, ShoalFixtures):
    pass


class TestS3Pipe(abstract.AbstractPipeTests, ShoalFixtures):
    pass


class GcsFixtures(ShoalFixtures):
    scheme = "gs"


class TestGcsCopy(abstract.AbstractCopyTests, GcsFixtures):
    pass


class TestGcsGet(abstract.AbstractGetTests, GcsFixtures):
    pass


class TestGcsPut(abstract.AbstractPutTests, GcsFixtures):
    pass


class TestGcsOpen(abstract.AbstractOpenTests, GcsFixtures):
    pass


class TestGcsPipe(abstract.AbstractPipeTests, GcsFixtures):
    pass

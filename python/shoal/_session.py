"""Sessions: one per distinct set of configuration keywords, reused.

Configuration is the CLI's: ``STORAGE_EMULATOR_HOST`` or Application
Default Credentials for ``gs://``; ``AWS_ENDPOINT_URL(_S3)``, ``AWS_REGION``
and the AWS credential chain for ``s3://``; ``HTTPS_PROXY``/``HTTP_PROXY``/
``ALL_PROXY``/``NO_PROXY`` and ``SSL_CERT_FILE`` for both, ``AWS_CA_BUNDLE``
for ``s3://``.
Keywords override: ``endpoint_url``, ``gcs_endpoint_url``,
``s3_endpoint_url``, ``no_sign_request``, ``region``, ``profile``,
``key``/``secret``, ``s3_addressing`` (``auto``/``path``/``virtual``),
``workers`` (requests in flight per call, default 2 per vCPU),
``attempts``, ``read_timeout`` (seconds without a byte moving on a
connection, sending or receiving, default 60; as ``--read-timeout``),
``connect_timeout`` (seconds to make a connection, default 10; as
``--connect-timeout``), ``proxy`` (one proxy URL for every request; ``NO_PROXY`` still
applies), ``ca_bundle`` (a PEM file of extra CA certificates), and for
requester-pays buckets ``billing_project`` (GCS: the project billed, sent
as ``userProject``; default ``CLOUDSDK_BILLING_QUOTA_PROJECT``) and
``request_payer=True`` (S3: ``x-amz-request-payer: requester``), as the
CLI's ``--billing-project`` and ``--request-payer``. Encryption keys, as
the CLI's flags (``docs/encryption.md``): ``sse`` (``"AES256"`` or
``"aws:kms"``), ``sse_kms_key_id``, ``sse_c_key`` and
``sse_c_copy_source_key`` (32 bytes) for S3; ``encryption_key`` (a base64
customer-supplied key or a Cloud KMS key name) and ``decryption_keys`` (a
list of base64 keys objects to read may be under) for GCS. A session's repr
never shows a key.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _shoal

_lock = threading.Lock()
_sessions: dict[tuple, _shoal.Session] = {}


def session(**options: Any) -> _shoal.Session:
    """The shared session for these options (built on first use)."""
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items() if v is not None))
    with _lock:
        s = _sessions.get(key)
        if s is None:
            s = _shoal.Session(**dict(key))
            _sessions[key] = s
        return s


def resolve(sess: _shoal.Session | None, options: dict[str, Any]) -> _shoal.Session:
    """``sess`` if given, else the shared session for ``options``."""
    if sess is not None:
        if options:
            raise TypeError("give either session= or configuration keywords, not both")
        return sess
    return session(**options)


def _rebuild(kwargs: dict[str, Any]) -> _shoal.Session:
    # Unpickling (Dask workers): same keywords, this process's own stores.
    return session(**kwargs)

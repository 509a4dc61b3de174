"""Session-wide test settings. Area-specific fixtures live in tests/<area>/conftest.py."""

import os
import tempfile

import pytest

# Nothing in the tests may reach the real Hub; tiny models are saved and loaded locally.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "HF_HOME" not in os.environ:
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="conceptforge-hf-home-")


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto) on 127.0.0.1; fsspec reaches it through FSSPEC_S3_* variables."""
    pytest.importorskip("s3fs", reason="the store's S3 tests need the test extra: pip install '.[test]'")
    from tests.core.s3_server import S3Server

    server = S3Server()
    saved = {key: os.environ.get(key) for key in server.env}
    os.environ.update(server.env)
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {}).update({"endpoint_url": server.endpoint, "key": "testing", "secret": "testing"})
    try:
        yield server
    finally:
        fsspec.config.conf.get("s3", {}).clear()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()

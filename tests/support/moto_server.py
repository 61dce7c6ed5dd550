"""A real S3 endpoint for the lake tests: moto's server (``moto[server]``) in a subprocess on 127.0.0.1, started
once per session on a free port and stopped after. ``s3_lake`` gives each test a fresh bucket and the
``storage.options`` that reach it (dummy credentials: moto accepts any)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.request import urlopen

import pytest

from tests.support.ports import free_port


@dataclass(frozen=True)
class S3Lake:
    endpoint: str
    bucket: str

    @property
    def storage_options(self) -> dict[str, object]:
        return {"key": "testing-key", "secret": "testing-secret-value", "client_kwargs": {"endpoint_url": self.endpoint,
                "region_name": "eu-west-1"}}

    @property
    def storage_options_json(self) -> str:
        return json.dumps(self.storage_options)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/lake"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the moto server did not start on {endpoint}") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def s3_lake(moto_endpoint: str) -> S3Lake:
    import s3fs

    lake = S3Lake(moto_endpoint, f"lake-{uuid.uuid4().hex[:10]}")
    fs = s3fs.S3FileSystem(**lake.storage_options, skip_instance_cache=True)
    fs.mkdir(lake.bucket)
    return lake

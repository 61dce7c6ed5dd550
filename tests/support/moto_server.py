"""A real S3 endpoint for the lake tests: moto's server (``moto[server]``) in a subprocess on 127.0.0.1, started
once per session on a free port and stopped after. ``s3_lake`` gives each test a fresh bucket and the
``storage.options`` that reach it (dummy credentials: moto accepts any).

:func:`moto_server` starts one (a context manager) for tests that need another: over HTTPS with a certificate
(``moto_server --ssl-cert/--ssl-key``, a :class:`~tests.support.tls.Issued` of ``tests/support/tls.py``) and with
credentials checked (``INITIAL_NO_AUTH_ACTION_COUNT``: moto lets that many requests through unauthenticated, then
signs every request against the IAM users it holds; :func:`moto_user` spends them creating one user with an access
key and an ``s3:*`` policy, so a wrong secret or an unknown key is refused as AWS refuses it).
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.request import urlopen

import pytest

from tests.support.ports import free_port
from tests.support.tls import Issued


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


START_TIMEOUT_S = 30.0
MOTO_USER_ACTIONS = 3
"""The unauthenticated requests :func:`moto_user` spends (create the user, its access key, its policy)."""


@contextlib.contextmanager
def moto_server(cert: Issued | None = None, *, authenticated: bool = False) -> Iterator[str]:
    """A moto server on a free port of 127.0.0.1: its endpoint (``https://`` with ``cert``), stopped on exit.
    ``authenticated``: only the first :data:`MOTO_USER_ACTIONS` requests go unauthenticated (call
    :func:`moto_user` first)."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    context = None
    if cert is not None:
        command += ["--ssl-cert", str(cert.cert), "--ssl-key", str(cert.key)]
        context = ssl.create_default_context(cafile=str(cert.ca))
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # an expired certificate answers too: the tests check the clients
    env = dict(os.environ)
    if authenticated:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(MOTO_USER_ACTIONS)
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    endpoint = f"{'https' if cert is not None else 'http'}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urlopen(f"{endpoint}/moto-api/", timeout=1, context=context).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the moto server did not answer GET {endpoint}/moto-api/ within "
                                       f"{START_TIMEOUT_S:g} s (exit code {proc.poll()})") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def moto_user(endpoint: str, ca: str | None = None, name: str = "lake") -> tuple[str, str]:
    """``(access key id, secret)`` of a new IAM user of the moto server at ``endpoint`` allowed ``s3:*``: the
    :data:`MOTO_USER_ACTIONS` unauthenticated requests of an ``authenticated`` server."""
    import boto3

    iam = boto3.client("iam", endpoint_url=endpoint, verify=ca, region_name="us-east-1",
                       aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_lake(moto_endpoint: str) -> S3Lake:
    import s3fs

    lake = S3Lake(moto_endpoint, f"lake-{uuid.uuid4().hex[:10]}")
    fs = s3fs.S3FileSystem(**lake.storage_options, skip_instance_cache=True)
    fs.mkdir(lake.bucket)
    return lake

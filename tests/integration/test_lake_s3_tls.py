"""The lake on S3 over HTTPS with credentials checked (issue 34.4): moto's server with a certificate of the test CA
(``moto_server --ssl-cert/--ssl-key``) and IAM authentication on (tests/support/moto_server.py), the ParquetSink
through s3fs with ``storage.options`` ``client_kwargs: {endpoint_url: https://..., verify: <CA file>}``.

Records land once over HTTPS and read back through the lake's reader. Then, per failure (a foreign CA, the server's
certificate expired, a wrong secret, an unknown access key): the run fails at its start with one error naming the
endpoint and the cause, never the secret (nor in the logs), at the first request (botocore's retry loop, about
15 s of backoff for a TLS failure, is not entered: its log says so), and nothing is committed: no object in the bucket, the group's offsets
untouched, and the rerun with the right settings delivers every record once. Spark's S3A reads the same lake over
HTTPS with the CA in a JVM trust store (``spark-submit --master local[1]``, about a minute: the recipe of
docs/lake.md)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import committed_files
from connect_runtime.runtime.sink import run_sink
from tests.support import REPO, cache_home, find_java, unavailable
from tests.support.moto_server import moto_server, moto_user
from tests.support.tls import Issued, TestCA

TOPIC = "events"
SECRET_TEXT = "testing-secret-value"
FAIL_FAST_S = 5.0
"""A failed TLS handshake or refused credentials end the run well within this (botocore's default retry loop
takes about 15 s on a TLS failure, measured 13.7 s): the check is generous for a loaded machine, the retry loop is
what it catches."""


@dataclass(frozen=True)
class Tls:
    ca: TestCA
    server: Issued
    expired: Issued
    foreign: TestCA


@dataclass(frozen=True)
class S3Tls:
    endpoint: str
    expired_endpoint: str
    key: str
    secret: str
    ca: str
    foreign_ca: str


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    ca = TestCA.create(tmp_path_factory.mktemp("s3-ca"))
    return Tls(ca, ca.issue("s3"), ca.issue("s3-old", expired=True),
               TestCA.create(tmp_path_factory.mktemp("s3-foreign"), name="a CA nobody trusts"))


@pytest.fixture(scope="module")
def s3(tls: Tls) -> Iterator[S3Tls]:
    with moto_server(tls.server, authenticated=True) as endpoint, moto_server(tls.expired) as expired:
        key, secret = moto_user(endpoint, str(tls.ca.cert_path))
        yield S3Tls(endpoint, expired, key, secret, str(tls.ca.cert_path), str(tls.foreign.cert_path))


def options(s3: S3Tls, *, endpoint: str | None = None, key: str | None = None, secret: str | None = None,
            ca: str | None = None) -> dict[str, Any]:
    return {"key": key or s3.key, "secret": secret or s3.secret,
            "client_kwargs": {"endpoint_url": endpoint or s3.endpoint, "region_name": "eu-west-1",
                              "verify": ca or s3.ca}}


@pytest.fixture
def bucket(s3: S3Tls) -> str:
    import s3fs

    name = f"lake-{uuid.uuid4().hex[:10]}"
    s3fs.S3FileSystem(**options(s3), skip_instance_cache=True).mkdir(name)
    return name


def fill(url: str, n: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord(TOPIC, 0, None, json.dumps({"id": i}).encode()) for i in range(n)])
            producer.flush(60)
        finally:
            producer.close()


def config(bucket: str, opts: dict[str, Any]) -> dict[str, str]:
    return {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
            "path": f"s3://{bucket}/lake", "storage.options": json.dumps(opts), "flush.size": "40",
            "tasks.max": "1"}


def read_ids(bucket: str, opts: dict[str, Any]) -> list[int]:
    import fsspec
    import pyarrow.parquet as pq

    root = f"s3://{bucket}/lake"
    fsspec.core.url_to_fs(root, **opts)[0].invalidate_cache()
    out: list[int] = []
    for url in committed_files(root, TOPIC, 0, storage_options=opts):
        with fsspec.open(url, "rb", **opts) as fh:
            out.extend(pq.read_table(fh, columns=["id"]).column("id").to_pylist())
    return out


def test_records_land_once_over_https(s3: S3Tls, bucket: str, sqlite_url: str) -> None:
    fill(sqlite_url, 100)
    assert run_sink(config(bucket, options(s3)), sqlite_url).records == 100
    assert run_sink(config(bucket, options(s3)), sqlite_url).records == 0  # a rerun finds the lake's offsets
    assert read_ids(bucket, options(s3)) == list(range(100))


CAUSES = {
    "foreign CA": "not signed by a CA this client trusts",
    "expired certificate": "the server's certificate has expired",
    "wrong secret": "refused access (PermissionError: The request signature we calculated does not match",
    "unknown access key": "refused access (PermissionError: The AWS Access Key Id you provided does not exist",
}


@pytest.mark.parametrize("case", list(CAUSES))
def test_a_refused_connection_fails_fast_naming_the_endpoint(s3: S3Tls, bucket: str, sqlite_url: str, case: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    cause = CAUSES[case]
    fill(sqlite_url, 50)
    bad = {"foreign CA": options(s3, ca=s3.foreign_ca),
           "expired certificate": options(s3, endpoint=s3.expired_endpoint),
           "wrong secret": options(s3, secret=SECRET_TEXT),
           "unknown access key": options(s3, key="AKIAUNKNOWN0000000000", secret=SECRET_TEXT)}[case]
    endpoint = bad["client_kwargs"]["endpoint_url"]
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        run_sink(config(bucket, bad), sqlite_url)
    took = time.monotonic() - started
    text = str(info.value)
    print(f"{case}: {took:.2f} s: {text}")
    assert endpoint in text and cause in text, text
    for secret in (SECRET_TEXT, s3.secret):
        assert secret not in text and secret not in caplog.text
    retried = [r.getMessage() for r in caplog.records if r.name.startswith("botocore.retryhandler")
               and r.getMessage().lower().startswith("retry needed")]
    assert not retried, f"{case}: botocore retried: {retried[:2]}"
    assert took < FAIL_FAST_S, f"{case}: the run took {took:.1f} s to fail: {text}"
    # nothing committed: no object, and the rerun with the right settings delivers every record once
    assert read_ids(bucket, options(s3)) == []
    assert run_sink(config(bucket, options(s3)), sqlite_url).records == 50
    assert read_ids(bucket, options(s3)) == list(range(50))




@pytest.mark.spark
def test_spark_reads_the_lake_over_https_through_s3a_with_a_trust_store(s3: S3Tls, tls: Tls, bucket: str,
                                                                       sqlite_url: str, tmp_path: Path) -> None:
    """Spark's own S3A (hadoop-aws, the AWS SDK v2) over HTTPS: the JVM trusts the test CA through a PKCS#12 trust
    store (``keytool -importcert``) given as ``-Djavax.net.ssl.trustStore``, as docs/lake.md says; the read of the
    run's range (``read_lake(..., url_scheme="s3a")`` in ``spark-submit --master local[1]``) equals what was
    written."""
    from airflow_pyconnect.spark import spark_env

    keytool = find_java("keytool")
    jars = sorted(str(j) for j in (cache_home("PYCONNECT_HADOOP_AWS_HOME", "hadoop-aws-3.5.0") / "jars").glob("*.jar"))
    if keytool is None or not any(Path(j).name.startswith("hadoop-aws-") for j in jars):
        unavailable("no keytool or no hadoop-aws jars", "CI fetches them with `bash scripts/fetch_hadoop_aws.sh`")
    store = tmp_path / "trust.p12"
    subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "lake-ca", "-file", s3.ca, "-keystore", str(store),
                    "-storetype", "PKCS12", "-storepass", "changeit"], check=True, capture_output=True, timeout=120)
    fill(sqlite_url, 60)
    run_sink(config(bucket, options(s3)), sqlite_url)
    trust = f"-Djavax.net.ssl.trustStore={store} -Djavax.net.ssl.trustStorePassword=changeit " \
            "-Djavax.net.ssl.trustStoreType=PKCS12"
    conf = {"spark.driver.extraJavaOptions": trust, "spark.executor.extraJavaOptions": trust,
            "spark.hadoop.fs.s3a.endpoint": s3.endpoint, "spark.hadoop.fs.s3a.connection.ssl.enabled": "true",
            "spark.hadoop.fs.s3a.path.style.access": "true", "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
            "spark.hadoop.fs.s3a.access.key": s3.key, "spark.hadoop.fs.s3a.secret.key": s3.secret,
            "spark.ui.enabled": "false", "spark.driver.memory": "512m"}
    out = tmp_path / "out.json"
    command = ["spark-submit", "--master", "local[1]", "--jars", ",".join(jars),
               *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}")), str(REPO / "tests/support/spark_cluster_job.py"),
               "--lake", f"s3://{bucket}/lake", "--ranges", json.dumps({TOPIC: {"0": [0, 60]}}),
               "--storage-options", json.dumps(options(s3)), "--url-scheme", "s3a", "--out", str(out)]
    proc = subprocess.run(command, env={**os.environ, **spark_env(), "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(out.read_text())["ids"] == list(range(60))

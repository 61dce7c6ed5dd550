"""Pieces of the distributed deployment on one machine (issue 33): each starts real servers and stops them.

:func:`distributed` starts all of them as one deployment, as machines would run them::

    with distributed(base, dags_folder=REPO / "dags") as d:
        d.airflow            # deploy.airflow_celery.AirflowCelery: CeleryExecutor, two workers, PostgreSQL metadata
        d.kafka              # three KRaft brokers (tests/support/kafka_cluster.py): RF 3, min.insync.replicas 2
        d.kafka_url          # the pyconnect_default connection's host: kafka://b1,b2,b3
        d.spark              # deploy.spark_cluster.SparkCluster: a master and two workers
        d.s3_endpoint        # a moto S3 server: the lake (workers share no disk)
        d.postgres_url       # the PostgreSQL server: databases "airflow" (metadata) and "warehouse" (the sinks)
        d.warehouse_url

Modules: :mod:`deploy.servers` (Redis, PostgreSQL, moto), :mod:`deploy.airflow_celery`, :mod:`deploy.spark_cluster`,
:mod:`deploy.worker_hostname`. Every wait is bounded and names what it waited for; every process is stopped on
exit, also after a failure.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .airflow_celery import AirflowCelery, airflow_celery
from .servers import moto_s3, postgres_server, redis_server
from .spark_cluster import SparkCluster, spark_cluster

__all__ = ["BACKEND_SETTINGS", "S3_BUCKET", "Deployment", "distributed"]

REPO = Path(__file__).resolve().parents[2]
S3_BUCKET = "pyconnect-lake"
S3_KEY, S3_SECRET = "deployment-key", "deployment-secret-value"
BACKEND_SETTINGS = {
    "offset.storage.replication.factor": "3",
    "topic.creation.default.replication.factor": "3",
    "topic.creation.default.min.insync.replicas": "2",
}
"""The Kafka backend's settings on a cluster (docs/kafka.md): every topic it creates survives a broker."""


@dataclass
class Deployment:
    """A running deployment (see the module docstring)."""

    airflow: AirflowCelery
    kafka: Any
    spark: SparkCluster
    s3_endpoint: str
    postgres_url: str

    @property
    def kafka_url(self) -> str:
        return str(self.kafka.url)

    @property
    def warehouse_url(self) -> str:
        return f"{self.postgres_url}/warehouse"

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"key": S3_KEY, "secret": S3_SECRET,
                "client_kwargs": {"endpoint_url": self.s3_endpoint, "region_name": "eu-west-1"}}

    @property
    def lake_url(self) -> str:
        return f"s3://{S3_BUCKET}/lake"


@contextlib.contextmanager
def kafka_cluster(base: Path) -> Iterator[Any]:
    """Three KRaft brokers (the tests' cluster: tests/support/kafka_cluster.py), killed on exit."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.support.kafka_cluster import running_cluster

    with running_cluster(base) as cluster:
        yield cluster


def _make_bucket(endpoint: str) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, client_kwargs={"endpoint_url": endpoint,
                                                                         "region_name": "eu-west-1"})
    fs.mkdir(S3_BUCKET)


@contextlib.contextmanager
def distributed(base: Path, *, dags_folder: Path, env: Mapping[str, str] | None = None,
                workers: tuple[str, ...] = ("worker-a", "worker-b"), concurrency: int = 2,
                heartbeat_timeout_s: int = 30) -> Iterator[Deployment]:
    """Start Redis, PostgreSQL, three Kafka brokers, moto S3, a Spark master with two workers and Airflow on
    Celery with ``workers``; the Airflow connections ``pyconnect_default`` (the Kafka backend with
    :data:`BACKEND_SETTINGS`) and ``spark_default`` (the master, client mode) and the Variables the distributed
    example reads are set in every Airflow process's environment."""
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(base / "redis"))
        pg = stack.enter_context(postgres_server(("airflow", "warehouse")))
        kafka = stack.enter_context(kafka_cluster(base / "kafka"))
        s3 = stack.enter_context(moto_s3(base))
        _make_bucket(s3)
        spark = stack.enter_context(spark_cluster(base / "spark", workers=2, env={"PYTHONPATH": str(REPO)}))
        d = Deployment(airflow=None, kafka=kafka, spark=spark, s3_endpoint=s3, postgres_url=pg)  # type: ignore[arg-type]
        host, port = spark.master_url.removeprefix("spark://").rsplit(":", 1)
        af_env = {
            "AIRFLOW_CONN_PYCONNECT_DEFAULT": json.dumps({"conn_type": "pyconnect", "host": d.kafka_url,
                                                          "extra": BACKEND_SETTINGS}),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": f"spark://{host}",
                                                      "port": int(port), "extra": {"deploy-mode": "client"}}),
            "AIRFLOW_VAR_PYCONNECT_LAKE_URL": d.lake_url,
            "AIRFLOW_VAR_PYCONNECT_LAKE_STORAGE_OPTIONS": json.dumps(d.storage_options),
            "AIRFLOW_VAR_PYCONNECT_WAREHOUSE_URL": d.warehouse_url,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": str(REPO),
        }
        af_env.update(env or {})
        d.airflow = stack.enter_context(airflow_celery(
            base, dags_folder=dags_folder, metadata_url=f"{pg}/airflow", broker_url=redis_url, env=af_env,
            workers=workers, concurrency=concurrency, heartbeat_timeout_s=heartbeat_timeout_s))
        yield d

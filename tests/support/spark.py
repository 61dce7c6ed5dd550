"""One in-process SparkSession for the whole test session (``spark_session``), with Spark's Kafka source and
spark-avro on its classpath when ``scripts/fetch_spark_kafka.sh`` fetched them.

Why one: the JVM py4j starts outlives a stopped SparkSession, and a new SparkContext that loads Spark's Kafka
source again (``spark.jars`` / ``ADD JAR``) loads it in a new class loader, whose static config entries clash with
the first load's (``Config entry spark.kafka.producer.cache.timeout already registered!``, then
``NoClassDefFoundError: KafkaDataConsumer$``): CI ran the Spark modules in one process and the later Kafka reads
failed. So every module's ``spark`` fixture returns this session and none stops it; it stops at the end.

``spark_kafka_jars`` is for tests that need the jars: it fails in CI (which fetches them) and skips elsewhere
when they are missing, naming the fetch command.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import unavailable


def _jars() -> tuple[list[str], str | None]:
    from connect_runtime.spark_kafka import kafka_jars

    try:
        return kafka_jars(avro=True), None
    except FileNotFoundError as exc:
        return [], str(exc)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The process's SparkSession: ``local[2]``, UTC, no UI, 2 shuffle partitions, the pyconnect data source
    registered, and the Kafka/Avro jars when fetched."""
    from pyspark.sql import SparkSession

    from connect_runtime.spark import register

    jars, _ = _jars()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master("local[2]").appName("airflow-pyconnect-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" at INFO from __del__ at interpreter exit, when a handler
    # Airflow's logging set up (in another test) may point at a stream pytest has closed
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark_kafka_jars() -> list[str]:
    """The Kafka source and spark-avro jars (on ``spark_session``'s classpath); fails in CI, skips elsewhere."""
    from connect_runtime.spark_kafka import FETCH_COMMAND

    jars, missing = _jars()
    if missing is not None:
        unavailable(missing, f"CI fetches them with `{FETCH_COMMAND}` and never skips")
    return jars


@pytest.fixture(scope="module")
def spark_with_kafka(spark_session: Any, spark_kafka_jars: list[str]) -> Any:
    """``spark_session``, for tests that read through Spark's Kafka source or spark-avro."""
    return spark_session

"""What a native read needs on Spark's classpath, checked on the driver before the read is planned, so a missing jar
fails with one error naming the jar and how to get it, not with Spark's ``DATA_SOURCE_NOT_FOUND`` or Hadoop's
``ClassNotFoundException`` from an executor.

The driver's class loader is the one to ask: jars given as ``--jars`` / ``spark.jars`` are on it (client mode) and
Spark ships the same jars to every executor, on a standalone cluster as in local mode. A session without a JVM
here (Spark Connect) is not checked: its server's classpath is not visible from the client.
"""

from __future__ import annotations

from typing import Any

from connect_runtime.api.errors import ConnectError

KAFKA_SOURCE_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"


class SparkClasspathError(ConnectError):
    """A class a native read needs is not on the Spark driver's classpath; the message names the jar and the fix."""


def _jvm(spark: Any) -> Any:
    context = getattr(spark, "sparkContext", None)
    try:
        return getattr(context, "_jvm", None) if context is not None else None
    except Exception:  # Spark Connect's session raises on sparkContext access: nothing to check from here
        return None


def class_loadable(spark: Any, class_name: str) -> bool | None:
    """Whether the driver can load ``class_name`` (Spark's own ``Utils.classIsLoadable``); None without a JVM."""
    jvm = _jvm(spark)
    if jvm is None:
        return None
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(class_name))


def require_kafka_source(spark: Any) -> None:
    """Raise :class:`SparkClasspathError` unless Spark's Kafka source is on the driver's classpath."""
    if class_loadable(spark, KAFKA_SOURCE_CLASS) is False:
        from connect_runtime.spark_kafka import FETCH_COMMAND

        raise SparkClasspathError(
            f"Spark's Kafka source ({KAFKA_SOURCE_CLASS}, spark-sql-kafka-0-10 matching pyspark) is not on this "
            f"session's classpath: fetch it with `{FETCH_COMMAND}` and start the session with its jars "
            "(spark.jars / spark-submit --jars = connect_runtime.spark.kafka_jars(); in a DAG "
            "spark_submit_kwargs(..., kafka=True)); Spark ships them to the executors")


def require_lake_filesystem(spark: Any, scheme: str) -> None:
    """Raise :class:`SparkClasspathError` when Spark cannot read ``scheme`` URLs: ``s3a`` without Hadoop's S3A
    (``hadoop-aws`` and the AWS SDK), ``s3`` with no ``fs.s3.impl`` configured (Hadoop has none by default)."""
    jvm_ok = class_loadable(spark, S3A_CLASS)
    if scheme == "s3a" and jvm_ok is False:
        raise SparkClasspathError(
            f"Spark reads s3a:// through Hadoop's S3A ({S3A_CLASS}), which is not on this session's classpath: add "
            "org.apache.hadoop:hadoop-aws matching pyspark's Hadoop (hadoop-client-api-<version>.jar in pyspark's "
            "jars) and the AWS SDK v2 bundle it names (software.amazon.awssdk:bundle) as spark.jars / --jars, with "
            "spark.hadoop.fs.s3a.* settings for the endpoint and credentials")
    if scheme == "s3" and jvm_ok is not None:
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        if conf.get("fs.s3.impl") is None:
            raise SparkClasspathError(
                "Spark has no filesystem for s3:// URLs (Hadoop defines none): pass url_scheme=\"s3a\" to read the "
                "lake through Hadoop's S3A (hadoop-aws on the classpath), or set spark.hadoop.fs.s3.impl")

"""Spark job of tests/integration/test_spark_handoff_secure.py: reads the handed-off committed range from the secured
Kafka backend with the settings ``PyConnectSparkSubmitOperator`` put in its environment, and writes to ``--out`` the
ids it read (none with ``--settings-only``: no Spark session), the names of the settings it was handed (and the
SHA-256 of a client key among them), whether the variable was still in its environment afterwards,
and the command line and environment names of the ``spark-submit`` JVM that started it (its parent)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--backend", "--ranges", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--settings-only", action="store_true", help="write what was handed over, start no Spark")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from connect_runtime.spark import read_kafka_range
    from connect_runtime.spark_kafka import SETTINGS_ENV, handed_settings

    settings = handed_settings(required=True)
    parent = Path(f"/proc/{os.getppid()}")
    ids: list[int] | None = None
    if not args.settings_only:
        spark = SparkSession.builder.getOrCreate()
        try:
            rows = read_kafka_range(spark, args.backend, args.ranges, settings=settings).select("value").collect()
        finally:
            spark.stop()
        ids = [json.loads(bytes(row.value))["id"] for row in rows]
    Path(args.out).write_text(json.dumps({
        "ids": ids,
        "key_sha256": hashlib.sha256(settings["ssl.key.pem"].encode()).hexdigest() if "ssl.key.pem" in settings
        else None,
        "handed": sorted(settings),
        "still_in_env": SETTINGS_ENV in os.environ,
        "parent_cmdline": (parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"),
        "parent_env_names": sorted(line.split(b"=", 1)[0].decode(errors="replace")
                                   for line in (parent / "environ").read_bytes().split(b"\0") if line),
    }))


if __name__ == "__main__":
    main()

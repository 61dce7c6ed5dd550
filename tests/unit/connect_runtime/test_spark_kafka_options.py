"""connect_runtime.spark_kafka: the options of Spark's Kafka source for a committed range, and where its jars are
(pure: no pyspark, no broker; the real reads are in tests/integration/connect_runtime/test_spark_kafka.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from connect_runtime.ranges import RangesFormatError
from connect_runtime.spark_kafka import (
    HOME_ENV,
    bootstrap_servers,
    consumer_group_id,
    kafka_jars,
    kafka_read_options,
    pyspark_versions,
    range_topics,
    spark_kafka_home,
)


def _offsets(read: dict[str, str]) -> tuple[object, object, object]:
    return json.loads(read["assign"]), json.loads(read["startingOffsets"]), json.loads(read["endingOffsets"])


def test_one_read_with_exclusive_ends_read_committed_and_assign() -> None:
    [read] = kafka_read_options({"orders": {"0": [10, 255], "1": [0, 100]}}, "kafka://127.0.0.1:9092,h2:9093")
    assert read["kafka.bootstrap.servers"] == "127.0.0.1:9092,h2:9093"
    assert read["kafka.isolation.level"] == "read_committed"
    assert read["failOnDataLoss"] == "true"
    assert "subscribe" not in read
    assert _offsets(read) == ({"orders": [0, 1]}, {"orders": {"0": 10, "1": 0}}, {"orders": {"0": 255, "1": 100}})


def test_every_shape_the_one_parser_takes() -> None:
    want = kafka_read_options({"t": {"0": [5, 8]}}, "h:1")
    result = {"connector": "c", "records": 3, "ranges": {"t": {"0": [5, 8]}}, "source_offsets": []}
    handoff = {"backend": "kafka://h:1", "connector": "c", "ranges": {"t": {"0": [5, 8]}}, "records": 3}
    assert kafka_read_options(result, "h:1") == want
    assert kafka_read_options(json.dumps(result), "h:1") == want
    assert kafka_read_options(handoff, "h:1") == want
    assert kafka_read_options('{"t": {"0": [[5, 6], [6, 8]]}}', "h:1") == want  # touching spans join


def test_spans_of_another_writer_become_rounds_of_reads() -> None:
    reads = kafka_read_options({"t": {"0": [[0, 400], [424, 1000], [1100, 1200]], "1": [0, 50]}}, "h:1")
    assert [_offsets(r) for r in reads] == [
        ({"t": [0, 1]}, {"t": {"0": 0, "1": 0}}, {"t": {"0": 400, "1": 50}}),
        ({"t": [0]}, {"t": {"0": 424}}, {"t": {"0": 1000}}),
        ({"t": [0]}, {"t": {"0": 1100}}, {"t": {"0": 1200}}),
    ]


def test_an_offset_target_reads_from_the_earliest_offset() -> None:
    [read] = kafka_read_options({"t": {"0": 40, "2": 7}}, "h:1")
    assert _offsets(read) == ({"t": [0, 2]}, {"t": {"0": -2, "2": -2}}, {"t": {"0": 40, "2": 7}})
    sink_result = {"connector": "s", "committed": {"t": {"0": 40}}}
    assert _offsets(kafka_read_options(sink_result, "h:1")[0])[2] == {"t": {"0": 40}}


def test_empty_ranges_read_nothing_and_extra_options_win() -> None:
    assert kafka_read_options({"t": {"0": [5, 5]}}, "h:1") == []
    [read] = kafka_read_options({"t": {"0": [0, 1]}}, "h:1", fail_on_data_loss=False,
                                options={"kafka.security.protocol": "SSL", "failOnDataLoss": "true"})
    assert read["kafka.security.protocol"] == "SSL" and read["failOnDataLoss"] == "true"


def test_malformed_ranges_are_named() -> None:
    with pytest.raises(RangesFormatError, match="'t'"):
        kafka_read_options({"t": {"0": "x"}}, "h:1")
    with pytest.raises(Exception, match="kafka://host:port"):
        bootstrap_servers("kafka://")


def test_a_group_id_per_consumer_setting_so_spark_reuses_its_consumers() -> None:
    """Spark pools its executors' consumers by group id and refuses one id with other settings: reads with the
    same kafka.* settings share one id (whatever the offsets), other settings get another, the user's wins."""
    [a] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1")
    [b] = kafka_read_options({"t": {"0": [7, 9]}, "u": {"1": [0, 1]}}, "kafka://h:1", options={"minPartitions": 4})
    [c] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1", options={"kafka.fetch.max.wait.ms": 10})
    assert a["kafka.group.id"] == b["kafka.group.id"] == consumer_group_id(a)
    assert a["kafka.group.id"].startswith("pyconnect-spark-") and c["kafka.group.id"] != a["kafka.group.id"]
    [d] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1", options={"kafka.group.id": "mine"})
    [e] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1", options={"groupIdPrefix": "acl-ok"})
    assert d["kafka.group.id"] == "mine" and "kafka.group.id" not in e


@pytest.mark.parametrize("url", ["kafka://a:9092", "kafka://a:9092, b:9093/", "kafka://[::1]:9092?x=1"])
def test_bootstrap_servers_is_the_backends_public_parser(url: str) -> None:
    import connect_runtime.backends as backends

    assert "kafka_bootstrap_servers" in backends.__all__
    assert bootstrap_servers(url) == backends.kafka_bootstrap_servers(url)
    assert bootstrap_servers("a:1,b:2") == "a:1,b:2"  # bootstrap servers as given


def test_jars_come_from_the_cache_and_a_missing_cache_names_the_fetch_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    assert spark_kafka_home() == tmp_path
    with pytest.raises(FileNotFoundError, match=r"scripts/fetch_spark_kafka\.sh"):
        kafka_jars()
    (tmp_path / "jars").mkdir()
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar"):
        (tmp_path / "jars" / name).write_bytes(b"")
    assert [Path(j).name for j in kafka_jars()] == ["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]
    assert all(Path(j).is_absolute() for j in kafka_jars())


def test_avro_jobs_also_need_spark_avro_among_the_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_bytes(b"")
    assert len(kafka_jars()) == 1
    with pytest.raises(FileNotFoundError, match=r"Spark's Avro functions \(spark-avro\) is not in .*fetch_spark_kafka\.sh"):
        kafka_jars(avro=True)
    (tmp_path / "jars" / "spark-avro_2.13-4.2.0.jar").write_bytes(b"")
    assert [Path(j).name for j in kafka_jars(avro=True)] == ["spark-avro_2.13-4.2.0.jar",
                                                             "spark-sql-kafka-0-10_2.13-4.2.0.jar"]


def test_a_read_of_some_topics_of_the_ranges() -> None:
    ranges = {"orders": {"0": [0, 5]}, "payments": {"0": [3, 9], "1": [0, 2]}}
    assert range_topics(ranges) == ["orders", "payments"]
    assert range_topics(json.dumps({"connector": "c", "ranges": ranges})) == ["orders", "payments"]
    [read] = kafka_read_options(ranges, "h:1", topics=["payments"])
    assert json.loads(read["assign"]) == {"payments": [0, 1]}
    assert json.loads(read["startingOffsets"]) == {"payments": {"0": 3, "1": 0}}
    assert kafka_read_options(ranges, "h:1", topics=["elsewhere"]) == []


def test_versions_of_the_installed_pyspark_without_importing_it() -> None:
    loaded = "pyspark" in sys.modules  # an earlier test in the same process (the whole suite) may have
    version, scala, jars = pyspark_versions()
    assert version.split(".")[0] == "4" and scala == "2.13" and jars.is_dir()
    assert loaded or "pyspark" not in sys.modules

"""ParquetSink on local files and ``memory://``: layout and footer metadata, recovery from the files alone,
rotation, the remainder published at a bounded run's end, temporary names and incomplete groups of killed runs
removed, fencing by generation, offsets get/alter/reset, partitioners, bad input. Every test is a real
``run_sink`` over a real SQLite backend file; S3 (moto) and SIGKILL loops are in tests/integration/test_lake_*.py.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest

from connect_runtime.api import ConnectError, ProducerFencedError, TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.connectors.lake import ParquetSink, committed_files
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake._writer import PartitionWriter
from connect_runtime.connectors.lake.store import Lake, scrub
from connect_runtime.runtime.sink import run_sink
from connect_runtime.secrets import config_defs, mask_config

TOPIC = "orders"


@pytest.fixture
def backend(sqlite_url: str) -> Iterator[Backend]:
    with open_backend(sqlite_url) as be:
        yield be


def fill(backend: Backend, values: list[Any], partitions: int = 2, start: int = 0, raw: bool = False) -> None:
    backend.create_topics({TOPIC: partitions})
    producer = backend.producer()
    try:
        producer.send([ProducerRecord(TOPIC, (start + i) % partitions, None, v if raw else json.dumps(v).encode(),
                                      timestamp=1_700_000_000_000 + (start + i) * 60_000)
                       for i, v in enumerate(values)])
        producer.flush(30)
    finally:
        producer.close()


def config(root: str, **extra: str) -> dict[str, str]:
    cfg = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
           "path": root, "consumer.max.poll.records": "7"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def rows(root: str, p: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for url in committed_files(root, TOPIC, p):
        with fsspec.open(url, "rb") as fh:
            out.extend(pq.read_table(fh).to_pylist())
    return out


def names(root: str, p: int) -> list[str]:
    return [u.rsplit("/", 1)[-1] for u in committed_files(root, TOPIC, p)]


def everything(root: str) -> list[str]:
    fs, path = fsspec.core.url_to_fs(root)
    fs.invalidate_cache()
    return sorted(p[len(path.rstrip("/")) + 1:] for p in fs.find(path))


def footer(root: str, p: int, i: int) -> dict[bytes, bytes]:
    with fsspec.open(committed_files(root, TOPIC, p)[i], "rb") as fh:
        return dict(pq.ParquetFile(fh).schema_arrow.metadata)


def values(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "amount": i * 1.5, "sku": f"s{i % 3}"} for i in range(start, start + n)]


def test_layout_footer_and_remainder_at_the_end_of_a_bounded_run(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(30))
    result = run_sink(config(root, flush_size="4"), sqlite_url)
    assert result.records == 30 and result.committed == {}
    # 15 records per partition: files of 4, 4, 4 and the remainder, 3, at the run's end
    assert names(root, 0) == [f"{TOPIC}+0+{s:010d}.parquet" for s in (0, 4, 8, 12)]
    assert [r["id"] for r in rows(root, 0)] == list(range(0, 30, 2))
    assert [r["id"] for r in rows(root, 1)] == list(range(1, 30, 2))
    meta = footer(root, 0, 3)
    assert (meta[b"pyconnect.start_offset"], meta[b"pyconnect.end_offset"]) == (b"12", b"15")
    assert meta[b"pyconnect.generation"] == b"0" and meta[b"pyconnect.connector"] == b"lake"
    # nothing but data files under the root
    assert all(n.endswith(".parquet") and "/." not in n for n in everything(root))
    assert everything(root)[0].startswith(f"topics/{TOPIC}/partition=0/")


def test_a_rerun_continues_from_the_files_alone(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(10))
    run_sink(config(root, flush_size="3"), sqlite_url)
    fill(backend, values(6, start=10), start=10)
    assert run_sink(config(root, flush_size="3"), sqlite_url).records == 6
    assert [r["id"] for r in rows(root, 0)] == list(range(0, 16, 2))
    assert names(root, 0) == [f"{TOPIC}+0+{s:010d}.parquet" for s in (0, 3, 5)]
    assert run_sink(config(root, flush_size="3"), sqlite_url).records == 0
    offsets = ParquetSink().read_offsets(config(root))
    assert offsets.offsets == {TopicPartition(TOPIC, 0): 8, TopicPartition(TOPIC, 1): 8}
    assert offsets.generation == 1  # the run with no records wrote nothing


def test_temporary_names_and_incomplete_groups_of_a_killed_run_are_removed(root: str, sqlite_url: str,
                                                                          backend: Backend) -> None:
    fill(backend, values(8))
    run_sink(config(root, flush_size="2"), sqlite_url)
    fs, path = fsspec.core.url_to_fs(root)
    part = f"{path}/topics/{TOPIC}/partition=0"
    fs.pipe_file(f"{part}/.{TOPIC}+0+{4:010d}.parquet.0123.tmp", b"torn")
    fill(backend, values(4, start=8), start=8)
    run_sink(config(root, flush_size="2"), sqlite_url)
    assert [r["id"] for r in rows(root, 0)] == list(range(0, 12, 2))
    assert all("/." not in n for n in everything(root))


def test_a_file_a_newer_generation_wrote_fences_an_older_run(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(4))
    lake = Lake(LakeConfig.parse(config(root, flush_size="1")))
    tp = TopicPartition(TOPIC, 0)
    zombie = PartitionWriter(lake, tp, generation=5, encode=None, ts=None, reporter=None)
    assert zombie.claim() is None
    run_sink(config(root, flush_size="1"), sqlite_url)  # a newer run publishes after the zombie opened
    ParquetSink().alter_offsets(config(root), {tp: 9}, generation=99)
    with pytest.raises(ProducerFencedError, match="generation 99"):
        PartitionWriter(lake, tp, generation=98, encode=None, ts=None, reporter=None).claim()
    from connect_runtime.api import SinkRecord
    zombie.add([SinkRecord(topic=TOPIC, partition=0, offset=0, value={"id": 0})])
    with pytest.raises(ProducerFencedError, match="generation 99"):
        zombie.commit(1, closing=True)
    assert [r["id"] for r in rows(root, 0)] == [0, 2]


def test_offsets_alter_forward_skips_and_reset_is_refused_while_files_hold_records(
    root: str, sqlite_url: str, backend: Backend
) -> None:
    fill(backend, values(10))
    sink = ParquetSink()
    sink.alter_offsets(config(root), {TopicPartition(TOPIC, 0): 3}, generation=0)  # skip offsets 0..2 of p0
    run_sink(config(root), sqlite_url)
    assert [r["id"] for r in rows(root, 0)] == [6, 8]
    assert sink.read_offsets(config(root)).offsets[TopicPartition(TOPIC, 0)] == 5
    with pytest.raises(ConnectError, match="Remove those files first"):
        sink.alter_offsets(config(root), {TopicPartition(TOPIC, 0): None}, generation=5)


def test_field_partitioner_writes_one_group_per_commit(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(12), partitions=1)
    cfg = config(root, flush_size="6", partitioner_class="io.confluent.connect.storage.partitioner.FieldPartitioner",
                 partition_field_name="sku")
    run_sink(cfg, sqlite_url)
    got = everything(root)
    assert f"topics/{TOPIC}/sku=s0/{TOPIC}+0+{0:010d}.parquet" in got
    assert f"topics/{TOPIC}/sku=s2/{TOPIC}+0+{6:010d}.parquet" in got
    assert sorted(r["id"] for r in rows(root, 0)) == list(range(12))
    assert ParquetSink().read_offsets(cfg).offsets == {TopicPartition(TOPIC, 0): 12}


def test_time_partitioner_renders_path_format(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(3), partitions=1)
    run_sink(config(root, partitioner_class="TimeBasedPartitioner", path_format="'dt'=YYYY-MM-dd/'hour'=HH",
                    partition_duration_ms="3600000"), sqlite_url)
    assert everything(root) == [f"topics/{TOPIC}/dt=2023-11-14/hour=22/{TOPIC}+0+{0:010d}.parquet"]


def test_rotate_interval_cuts_by_record_time(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(6), partitions=1)  # one record a minute
    run_sink(config(root, rotate_interval_ms="120000"), sqlite_url)
    assert names(root, 0) == [f"{TOPIC}+0+{s:010d}.parquet" for s in (0, 2, 4)]


def test_a_value_that_is_not_an_object_is_named_and_nothing_committed_is_lost(
    root: str, sqlite_url: str, backend: Backend
) -> None:
    fill(backend, values(4), partitions=1)
    run_sink(config(root, flush_size="2"), sqlite_url)
    fill(backend, [[1, 2]], partitions=1, start=4)
    with pytest.raises(Exception, match=r"orders-0@4: its value is a list, not an object"):
        run_sink(config(root, flush_size="2"), sqlite_url)
    assert [r["id"] for r in rows(root, 0)] == [0, 1, 2, 3]


def test_a_field_whose_type_changes_is_named(root: str, sqlite_url: str, backend: Backend) -> None:
    fill(backend, values(2), partitions=1)
    run_sink(config(root), sqlite_url)
    fill(backend, [{"id": "three", "amount": 1.0, "sku": "x"}], partitions=1, start=2)
    with pytest.raises(Exception, match=r"orders-0@2: field 'id' is a str, but its column is int64"):
        run_sink(config(root), sqlite_url)
    assert [r["id"] for r in rows(root, 0)] == [0, 1]


def test_errant_records_are_reported_and_the_range_stays_accounted_for(root: str, sqlite_url: str,
                                                                        backend: Backend) -> None:
    fill(backend, [*values(2), "text", {"id": 9, "amount": 0.5, "sku": "z"}], partitions=1)
    result = run_sink(config(root, errors_tolerance="all"), sqlite_url)
    assert [r["id"] for r in rows(root, 0)] == [0, 1, 9]
    assert ParquetSink().read_offsets(config(root)).offsets == {TopicPartition(TOPIC, 0): 4}
    assert result.records == 4


def test_storage_options_are_secret_in_config_and_errors() -> None:
    cfg = config("memory://x", storage_options='{"key": "AKIA-very-secret"}')
    assert "AKIA-very-secret" not in json.dumps(mask_config(cfg, config_defs(cfg)), default=str)
    parsed = LakeConfig.parse(cfg)
    assert parsed.storage_options == {"key": "AKIA-very-secret"} and "AKIA" not in repr(parsed)
    assert scrub("denied for AKIA-very-secret", parsed) == "denied for [hidden]"
    with pytest.raises(ConnectError) as info:
        LakeConfig.parse(config("memory://x", storage_options='{"key": "AKIA-very-secret"'))
    assert "AKIA" not in str(info.value) and "storage.options" in str(info.value)


def test_storage_errors_name_the_endpoint_and_the_cause_but_no_credential() -> None:
    opts = {"key": "AKIA-very-secret", "secret": "s3cret-value",
            "client_kwargs": {"endpoint_url": "https://svc:url-pa55@s3.internal:9000", "region_name": "eu-west-1",
                              "verify": "/etc/pki/lake-ca.pem"}}
    lake = Lake(LakeConfig.parse(config("memory://x", storage_options=json.dumps(opts))))
    assert lake.endpoint == "https://s3.internal:9000"
    expired = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    expired.verify_code, expired.verify_message = 10, "certificate has expired"
    try:
        raise OSError("SSL validation failed for https://svc:url-pa55@s3.internal:9000/x") from expired
    except OSError as exc:
        text = str(lake.failure("reading the offsets in", exc))
    assert "the TLS handshake with the server at https://s3.internal:9000 failed: the server's certificate has " \
           "expired" in text and "client_kwargs.verify" in text
    denied = str(lake.failure("publishing to", PermissionError("Access Denied for AKIA-very-secret")))
    assert "refused access (PermissionError: Access Denied for [hidden])" in denied
    other = str(lake.failure("listing", OSError("s3.internal:9000 eu-west-1 /etc/pki/lake-ca.pem url-pa55")))
    assert "s3.internal:9000 eu-west-1 /etc/pki/lake-ca.pem [hidden]" in other  # what failed stays readable
    for secret in ("AKIA-very-secret", "s3cret-value", "url-pa55"):
        assert secret not in text + denied + other

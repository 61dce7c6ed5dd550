"""ParquetSink's offsets through the admin API and ``pyconnect offsets get|set|reset`` (in process): read from the
files' names and footers, moved forward by an empty file covering the skipped range, moving back and reset refused
while files hold the records (KIP-875's destination offsets, docs/lake.md "Offsets management"), and an alteration
is a new generation that fences every older run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import admin
from connect_runtime.api import ProducerFencedError, TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.cli import main
from connect_runtime.connectors.lake import ParquetSink, committed_files, files_for
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake._writer import PartitionWriter
from connect_runtime.connectors.lake.store import Lake
from connect_runtime.runtime.sink import run_sink

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)
PART = json.dumps({"kafka_topic": TOPIC, "kafka_partition": 0})


@pytest.fixture(autouse=True)
def _outside_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_TASK_ID", "AIRFLOW_CTX_DAG_RUN_ID", "AIRFLOW_CTX_TRY_NUMBER"):
        monkeypatch.delenv(var, raising=False)


def produce(url: str, start: int, n: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        producer.send([ProducerRecord(TOPIC, 0, None, json.dumps({"id": i}).encode()) for i in range(start, start + n)])
        producer.flush(30)
        producer.close()


def ids(root: str) -> list[int]:
    import fsspec
    import pyarrow.parquet as pq

    out: list[int] = []
    for url in committed_files(root, TOPIC, 0):
        with fsspec.open(url, "rb") as fh:
            table = pq.read_table(fh)
        out.extend(table.column("id").to_pylist() if table.num_rows else [])
    return out


def cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, Any, str]:
    rc = main(["--backend", url, "offsets", *args])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 and out.strip() else None), err


def test_cli_offsets_get_set_reset_through_the_parquet_sink(tmp_path: Path, sqlite_url: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = f"file://{tmp_path / 'lake'}"
    config = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
              "path": root, "flush.size": "4"}
    cfg_file = tmp_path / "lake.json"
    cfg_file.write_text(json.dumps(config))
    produce(sqlite_url, 0, 10)
    run_sink(config, sqlite_url)
    where = f"ParquetSink file names and footers under {root}"
    entry = [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 10}}]

    rc, got, _ = cli(capsys, sqlite_url, "get", "lake")  # the last run's record of them
    assert rc == 0 and (got["offsets"], got["managed_by"], got["where"]) == (entry, "destination", where)
    rc, got, _ = cli(capsys, sqlite_url, "get", str(cfg_file))  # read in the files
    assert rc == 0 and got == {"offsets": entry, "managed_by": "destination", "where": where}

    rc, _, err = cli(capsys, sqlite_url, "set", "lake", "--partition", PART, "--offset", '{"kafka_offset": 15}')
    assert rc == 1 and "pass the connector's config" in err and "nothing was changed" in err
    rc, _, err = cli(capsys, sqlite_url, "set", str(cfg_file), "--partition", PART, "--offset", '{"kafka_offset": 3}')
    assert rc == 1 and "move back to offset 3" in err and f"{TOPIC}+0+0000000008.parquet" in err
    rc, got, err = cli(capsys, sqlite_url, "set", str(cfg_file), "--partition", PART, "--offset",
                       '{"kafka_offset": 15}')
    assert rc == 0, err
    assert got == {"connector": "lake", "partition": json.loads(PART), "offset": {"kafka_offset": 15},
                   "in": "destination", "where": where}
    # an empty file covers the skipped range [10, 15): the lake still accounts for every offset
    assert [(f.start, f.end, f.rows) for f in files_for(root, {TOPIC: {0: [(0, 15)]}})] == [
        (0, 4, 4), (4, 8, 4), (8, 10, 2), (10, 15, 0)]
    rc, got, _ = cli(capsys, sqlite_url, "get", "lake")
    assert got["offsets"][0]["offset"] == {"kafka_offset": 15}

    produce(sqlite_url, 10, 10)
    assert run_sink(config, sqlite_url).records == 5
    assert ids(root) == [*range(10), *range(15, 20)]

    rc, _, err = cli(capsys, sqlite_url, "reset", str(cfg_file))
    assert rc == 1 and f"to reset {TOPIC}-0" in err and "Remove those files first" in err
    assert ids(root) == [*range(10), *range(15, 20)]  # nothing removed for the user
    for url in committed_files(root, TOPIC, 0):
        Path(url.removeprefix("file://")).unlink()
    rc, got, err = cli(capsys, sqlite_url, "reset", str(cfg_file))
    assert rc == 0, err
    rc, got, _ = cli(capsys, sqlite_url, "get", str(cfg_file))
    assert got["offsets"] == []
    assert run_sink(config, sqlite_url).records == 20  # nothing in the group: the topic is written again
    assert ids(root) == list(range(20))


def test_admin_reads_and_alters_in_the_files_as_a_generation_that_fences_older_runs(tmp_path: Path,
                                                                                     sqlite_url: str) -> None:
    root = f"memory://lake-offsets-{tmp_path.name}"
    config = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
              "path": root, "flush.size": "3"}
    produce(sqlite_url, 0, 6)
    run_sink(config, sqlite_url)  # generation 0
    zombie = PartitionWriter(Lake(LakeConfig.parse(config)), TP, generation=0, encode=None, ts=None, reporter=None)
    assert zombie.claim() == 6  # a zombie of that run: it opened before the alteration and is still going
    with open_backend(sqlite_url) as backend:
        before = ParquetSink().read_offsets(config)
        assert before.offsets == {TP: 6}
        done = admin.alter_offsets(backend, "lake", [{"partition": json.loads(PART), "offset": {"kafka_offset": 9}}],
                                   config=config)
        assert done["in"] == "destination" and done["altered"] == 1
        after = ParquetSink().read_offsets(config)
        assert after.offsets == {TP: 9} and after.generation > before.generation
        rec = admin.connector(backend, "lake")
        assert rec is not None and rec.destination_offsets == [[TOPIC, 0, 9]]
        assert admin.get_offsets(backend, "lake", config=config)["offsets"][0]["offset"] == {"kafka_offset": 9}
        produce(sqlite_url, 6, 5)
        assert admin.sink_lag(backend, "lake") == [
            {"topic": TOPIC, "partition": 0, "committed": 9, "end": 11, "lag": 2, "in": "destination"}]
    # the alteration's generation is above every run before it: the zombie publishes nothing
    from connect_runtime.api import SinkRecord

    zombie.add([SinkRecord(topic=TOPIC, partition=0, offset=6, value={"id": 6})])
    with pytest.raises(ProducerFencedError, match=f"generation {after.generation}"):
        zombie.commit(7, closing=True)
    assert run_sink(config, sqlite_url).records == 2
    assert ParquetSink().read_offsets(config).offsets == {TP: 11}
